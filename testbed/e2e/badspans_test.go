package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/svc/svc-collector/testbed/platform"
)

// One client's bad span never costs another client's data (issue 26, item 5): the tests send a
// hundred GenAI spans in one OTLP request, straight as a client would, through the shipped
// configuration.

// chatSpans is one request of n chat spans of one service, one trace of 10 spans per trace id
// byte; each span is a root (the span filter keeps it and never waits for a parent).
func chatSpans(n int, traceSeed byte) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("opentelemetry.instrumentation.openai_v2")
	start := time.Now().Add(-time.Minute)
	for i := 0; i < n; i++ {
		span := ss.Spans().AppendEmpty()
		span.SetName(fmt.Sprintf("chat gpt-4o #%d", i))
		var tid pcommon.TraceID
		tid[0] = traceSeed
		binary.BigEndian.PutUint64(tid[8:], uint64(i/10+1))
		span.SetTraceID(tid)
		var sid pcommon.SpanID
		sid[0] = traceSeed
		binary.BigEndian.PutUint64(sid[:], uint64(i+1)|uint64(traceSeed)<<56)
		span.SetSpanID(sid)
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(i) * time.Millisecond)))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(i)*time.Millisecond + time.Second)))
		span.Attributes().PutStr("gen_ai.operation.name", "chat")
		span.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
		span.Attributes().PutStr("gen_ai.input.messages", fmt.Sprintf(`[{"role":"user","parts":[{"type":"text","content":"private question %d"}]}]`, i))
	}
	return td
}

func spansOf(td ptrace.Traces) []ptrace.Span {
	var spans []ptrace.Span
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				spans = append(spans, span)
			}
		}
	}
	return spans
}

// storedSpanIDs reads, through the platform's observations API, the ids of the observations of
// the traces of td.
func (g *gateway) storedSpanIDs(t *testing.T, td ptrace.Traces) map[string]bool {
	t.Helper()
	traces := map[string]bool{}
	for _, span := range spansOf(td) {
		if !span.TraceID().IsEmpty() {
			traces[span.TraceID().String()] = true
		}
	}
	ids := map[string]bool{}
	for traceID := range traces {
		for _, o := range g.observations(t, traceID) {
			ids[o.ID] = true
		}
	}
	return ids
}

// postTracesProto sends td to the gateway's OTLP/HTTP receiver as protobuf and returns the answer.
func postTracesProto(t *testing.T, g *gateway, td ptrace.Traces) (int, ptraceotlp.ExportResponse) {
	t.Helper()
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+g.collector.OTLPHTTPEndpoint+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	answer := ptraceotlp.NewExportResponse()
	if resp.StatusCode == http.StatusOK {
		if err := answer.UnmarshalProto(out); err != nil {
			t.Fatalf("answer is not an ExportTraceServiceResponse: %v (%q)", err, out)
		}
	}
	return resp.StatusCode, answer
}

// A request with one span whose span id is all zero and 99 good spans: the 99 reach the
// platform, the one is refused to its sender with an OTLP partial success, over HTTP and gRPC.
func TestZeroIDSpanRefusedAloneWithPartialSuccess(t *testing.T) {
	for _, transport := range []string{"http", "grpc"} {
		t.Run(transport, func(t *testing.T) {
			g := startGateway(t, gatewayOptions{})
			td := chatSpans(100, 0x11)
			bad := spansOf(td)[42]
			bad.SetSpanID(pcommon.SpanID{})

			var answer ptraceotlp.ExportResponse
			if transport == "http" {
				var status int
				status, answer = postTracesProto(t, g, td)
				if status != http.StatusOK {
					t.Fatalf("status %d, want 200 with a partial success", status)
				}
			} else {
				conn, err := grpc.NewClient(g.collector.OTLPGRPCEndpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				answer, err = ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
				if err != nil {
					t.Fatal(err)
				}
			}
			ps := answer.PartialSuccess()
			if ps.RejectedSpans() != 1 || !strings.Contains(ps.ErrorMessage(), "all-zero span id") {
				t.Fatalf("partial success %d %q, want 1 span refused for its span id", ps.RejectedSpans(), ps.ErrorMessage())
			}

			g.waitForSpans(t, 99)
			stored := g.storedSpanIDs(t, td)
			for i, span := range spansOf(td) {
				if i != 42 && !stored[span.SpanID().String()] {
					t.Errorf("span %d (%s) not delivered", i, span.SpanID())
				}
			}
			if stored[pcommon.SpanID{}.String()] || stored[""] {
				t.Error("the span with the all-zero id reached the platform")
			}
			time.Sleep(500 * time.Millisecond)
			if st := g.platform.Stats(); st.UniqueSpans != 99 {
				t.Errorf("platform stored %d spans, want 99", st.UniqueSpans)
			}
			logs := g.collector.Logs()
			if !strings.Contains(logs, "Refused spans with an empty or all-zero trace or span id") {
				t.Error("the refusal is not logged")
			}
			if strings.Contains(logs, "private question") {
				t.Error("the log carries span content")
			}
		})
	}
}

// A platform that answers 400 to any span batch holding a marked span: every other span of the
// batch is delivered; the marked one is refused alone and logged by id, without its content.
func TestPlatform400RefusesOnlyTheUnreadableSpan(t *testing.T) {
	p := startPlatform(t, "")
	if err := p.SetFault(platform.EndpointTraces, platform.Fault{RefuseSpansWithAttribute: "test.unreadable"}); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, gatewayOptions{platform: p})
	td := chatSpans(100, 0x22)
	bad := spansOf(td)[63]
	bad.Attributes().PutBool("test.unreadable", true)
	if status, answer := postTracesProto(t, g, td); status != http.StatusOK || answer.PartialSuccess().RejectedSpans() != 0 {
		t.Fatalf("the gateway took the request with status %d, rejected %d; want 200, none", status, answer.PartialSuccess().RejectedSpans())
	}

	g.waitForSpans(t, 99)
	stored := g.storedSpanIDs(t, td)
	for i, span := range spansOf(td) {
		if i != 63 && !stored[span.SpanID().String()] {
			t.Errorf("span %d (%s) not delivered", i, span.SpanID())
		}
	}
	if stored[bad.SpanID().String()] {
		t.Error("the marked span was stored although the platform refuses it")
	}
	if !eventually(10*time.Second, func() bool {
		return strings.Contains(g.collector.Logs(), "malformed (400) even on its own")
	}) {
		t.Fatal("the refused span is not logged")
	}
	logs := g.collector.Logs()
	if !strings.Contains(logs, bad.SpanID().String()) {
		t.Errorf("the log does not name the refused span %s", bad.SpanID())
	}
	if strings.Contains(logs, "private question") {
		t.Error("the log carries span content")
	}
	refused := 0
	for _, r := range p.Requests(platform.EndpointTraces) {
		if r.Status == http.StatusBadRequest {
			refused++
		}
	}
	t.Logf("%d requests to the platform, %d refused with 400", len(p.Requests(platform.EndpointTraces)), refused)
}
