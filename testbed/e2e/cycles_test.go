package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/svc/svc-collector/testbed/workload"
)

// Issue 25, hostile trees: spans whose parents form a cycle (a buggy or hostile client) go on with
// the cycle cut. The platform must hold every kept span, and every span's ancestry on the platform
// must end in a root: no cycle, and no parent it never receives.

// cycleSpan is one span of a hostile trace: kept (GenAI) or dropped (plain HTTP).
type cycleSpan struct {
	id, parent byte
	kept       bool
}

// TestParentCyclesReachThePlatformCut sends, through the default gateway config:
//   - a GenAI span that is its own parent, with a GenAI child, in one request;
//   - two GenAI spans that are each other's parent, one per request;
//   - a GenAI span whose parent is a dropped span whose parent is that GenAI span, one per request;
//   - a GenAI span below two dropped spans that are each other's parent, the GenAI span first.
func TestParentCyclesReachThePlatformCut(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	cases := []struct {
		name     string
		requests [][]cycleSpan
	}{
		{"self-parent", [][]cycleSpan{{{id: 1, parent: 1, kept: true}, {id: 2, parent: 1, kept: true}}}},
		{"two-span cycle across two requests", [][]cycleSpan{{{id: 1, parent: 2, kept: true}}, {{id: 2, parent: 1, kept: true}}}},
		{"cycle through a dropped span", [][]cycleSpan{{{id: 1, parent: 2, kept: true}}, {{id: 2, parent: 1}}}},
		{"below a cycle of two dropped spans", [][]cycleSpan{{{id: 1, parent: 2, kept: true}}, {{id: 2, parent: 3}, {id: 3, parent: 2}}}},
	}
	wantKept := map[string]string{} // trace hex/span hex → name
	traces := map[string]string{}   // trace hex → case name
	for i, c := range cases {
		tid := pcommon.TraceID{0xc7, 0xc1, 0xe5, byte(i + 1), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
		traces[hex.EncodeToString(tid[:])] = c.name
		for _, req := range c.requests {
			td := ptrace.NewTraces()
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", "hostile-client")
			for _, s := range req {
				ss := rs.ScopeSpans().AppendEmpty()
				span := ss.Spans().AppendEmpty()
				span.SetTraceID(tid)
				span.SetSpanID(pcommon.SpanID{0xc7, 0, 0, 0, 0, 0, byte(i + 1), s.id})
				span.SetParentSpanID(pcommon.SpanID{0xc7, 0, 0, 0, 0, 0, byte(i + 1), s.parent})
				now := time.Now()
				span.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Second)))
				span.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
				if s.kept {
					ss.Scope().SetName(workload.ScopeOpenAI)
					span.SetName(fmt.Sprintf("chat %d", s.id))
					span.Attributes().PutStr("gen_ai.operation.name", "chat")
					sid := span.SpanID()
					wantKept[hex.EncodeToString(tid[:])+"/"+hex.EncodeToString(sid[:])] = c.name + ": " + span.Name()
				} else {
					ss.Scope().SetName(workload.ScopeHTTPServer)
					span.SetName(fmt.Sprintf("GET /%d", s.id))
				}
			}
			postUntilAcknowledged(t, g.collector.OTLPHTTPEndpoint, td)
		}
	}
	g.waitForSpans(t, len(wantKept))

	// What arrives late (a span held for a parent that is itself) has had the wait to arrive:
	// wait until nothing is held, then read.
	if !eventually(time.Minute, func() bool {
		v, err := scrapeSum("http://"+g.collector.MetricsEndpoint+"/metrics", "otelcol_processor_svcspanfilter_spans_held")
		return err == nil && v == 0
	}) {
		t.Errorf("the gateway still holds spans a minute after the last request")
	}
	got := holdings(g.platform)
	for key, name := range wantKept {
		if _, ok := got.parents[key]; !ok {
			t.Errorf("%s (%s) is not on the platform", name, key)
		}
	}
	for trace, spans := range got.byTrace {
		name := traces[trace]
		t.Logf("%s: span → parent on the platform: %v", name, spans)
		for id := range spans {
			if problem := ancestryProblem(spans, id); problem != "" {
				t.Errorf("%s: span %s: %s (parents on the platform: %v)", name, id, problem, spans)
			}
		}
	}
}

// ancestryProblem walks from span id up through parents (span id → parent id, "" for a root):
// "" when the walk ends in a root, else what stops it (a cycle, a parent never received).
func ancestryProblem(parents map[string]string, id string) string {
	seen := map[string]bool{}
	for cur := id; ; {
		if seen[cur] {
			return "its ancestry is a cycle through " + cur
		}
		seen[cur] = true
		parent := parents[cur]
		if parent == "" {
			return ""
		}
		if _, ok := parents[parent]; !ok {
			return "its ancestry ends at " + parent + ", which the platform never received"
		}
		cur = parent
	}
}

// postUntilAcknowledged sends td over OTLP/HTTP until the collector answers 200, as an SDK retries.
func postUntilAcknowledged(t *testing.T, endpoint string, td ptrace.Traces) {
	t.Helper()
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+endpoint+"/v1/traces", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := http.DefaultClient.Do(req)
		status := 0
		if err == nil {
			status = resp.StatusCode
			resp.Body.Close()
		}
		if status == http.StatusOK {
			return
		}
		if status >= 400 && status < 500 && status != http.StatusTooManyRequests {
			t.Fatalf("the collector refused the request for good: %d", status)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the collector did not acknowledge the request for 30 s (last: %d, %v)", status, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
