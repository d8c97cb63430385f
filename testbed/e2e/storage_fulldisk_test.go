package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/testbed/collector"
)

// TestFullDiskAlertsRefusesAndLosesNothing: the gateway with the shipped config and alert rules
// keeps its storage on a small volume (a tmpfs), which something else fills. Clients keep sending
// (traces whose children come first and wait for their parent in the span filter's journal, and
// whole traces): the gateway refuses what it cannot write with 503 (the client retries), says why
// in its log (the directory and "no space left on device"), and Prometheus, scraping it, fires
// SvcStorageVolumeNearlyFull, SvcStorageWriteErrors and SvcStorageVolumeFillingUp (the rules as
// shipped, their minutes shortened as in monitoring_test.go). Once space is freed the clients'
// retries are accepted, the parents arrive, every span the gateway acknowledged reaches the
// platform exactly once, and the alerts of the full volume and the failed writes resolve.
func TestFullDiskAlertsRefusesAndLosesNothing(t *testing.T) {
	collectorBinary(t) // skips without a built gateway
	promBin := os.Getenv("SVC_PROMETHEUS_BIN")
	if promBin == "" {
		promBin, _ = exec.LookPath("prometheus")
	}
	if promBin == "" {
		t.Skip("no prometheus binary (run `make prometheus`, or set SVC_PROMETHEUS_BIN)")
	}
	dir := mountTmpfs(t, "16m", false)
	p := startPlatform(t, "")
	opts := gatewayOptions{platform: p}.collectorOptions(t, p)
	opts.StorageDir = dir
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := collector.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{platform: p, collector: c}
	t.Cleanup(func() { g.stop(t) })
	prom := startPrometheus(t, promBin, c.MetricsEndpoint)
	prom.waitScraped(t)

	s := &fullDiskSender{t: t, endpoint: "http://" + c.OTLPHTTPEndpoint + "/v1/traces"}
	for range 2 {
		if status := s.send(s.wholeTrace()); status != http.StatusOK {
			t.Fatalf("before the disk filled: HTTP %d", status)
		}
	}

	filler := fillVolume(t, dir)
	t.Logf("volume %s filled (%d MiB of filler) at %s", dir, filler.size>>20, time.Now().UTC().Format(time.RFC3339))
	storageAlerts := []string{"SvcStorageVolumeNearlyFull", "SvcStorageWriteErrors", "SvcStorageVolumeFillingUp"}
	start := time.Now()
	fired := map[string]time.Duration{}
	for i := 0; ; i++ {
		req := s.wholeTrace()
		if i%2 == 0 {
			req = s.children()
		}
		s.send(req)
		for name := range prom.firing(t) {
			if _, ok := fired[name]; !ok {
				fired[name] = time.Since(start)
				t.Logf("%s firing %.1fs after the volume filled", name, fired[name].Seconds())
			}
		}
		all := len(s.refused) > 0
		for _, name := range storageAlerts {
			_, ok := fired[name]
			all = all && ok
		}
		if all {
			break
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("after 90s with the volume full: firing %v, want %v; %d requests refused\ncollector output:\n%s",
				keys(prom.firing(t)), storageAlerts, len(s.refused), lastLines(c.Logs(), 30))
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("while full: %d requests acknowledged, %d refused (%v); first refusal's answer: %q",
		s.acknowledgedRequests, len(s.refused), s.statuses, s.firstRefusal)
	for status := range s.statuses {
		if status != http.StatusOK && status != http.StatusServiceUnavailable {
			t.Errorf("HTTP %d among the answers: a full disk must be a retryable refusal (503)", status)
		}
	}
	if n := c.CountLines("svc_file_storage: a write failed", dir, "no space left on device"); n == 0 {
		t.Errorf("the collector's log does not say that writes to %s fail for want of space:\n%s", dir, lastLines(c.Logs(), 30))
	} else {
		t.Logf("collector log lines of the failed writes: %d", n)
	}

	if err := os.Remove(filler.path); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	t.Logf("space freed at %s", freed.UTC().Format(time.RFC3339))
	// The clients retry what was refused, then the held traces' parents end.
	deadline := time.Now().Add(60 * time.Second)
	for len(s.refused) > 0 {
		retry := s.refused
		s.refused = nil
		for _, req := range retry {
			s.send(req)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still refused 60s after space was freed\ncollector output:\n%s", len(s.refused), lastLines(c.Logs(), 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, parent := range s.parents() {
		if status := s.send(parent); status != http.StatusOK {
			t.Fatalf("a parent span after space was freed: HTTP %d", status)
		}
	}
	if c.CountLines("svc_file_storage: writes succeed again") == 0 {
		t.Errorf("the collector's log does not say that writes succeed again")
	}

	missing := func() int {
		n := 0
		for _, sp := range s.acknowledged {
			if p.SpanDeliveries(sp.trace, sp.span) == 0 {
				n++
			}
		}
		return n
	}
	if !eventually(60*time.Second, func() bool { return missing() == 0 }) {
		t.Fatalf("%d of the %d acknowledged spans never reached the platform", missing(), len(s.acknowledged))
	}
	time.Sleep(time.Second) // a late duplicate would show here
	for _, sp := range s.acknowledged {
		if n := p.SpanDeliveries(sp.trace, sp.span); n != 1 {
			t.Errorf("span %s/%s delivered %d times", sp.trace, sp.span, n)
		}
	}
	t.Logf("all %d acknowledged spans reached the platform once (%d spans stored in all)", len(s.acknowledged), p.Stats().UniqueSpans)

	resolved := []string{"SvcStorageVolumeNearlyFull", "SvcStorageWriteErrors"}
	if !eventually(60*time.Second, func() bool {
		firing := prom.firing(t)
		return !firing[resolved[0]] && !firing[resolved[1]]
	}) {
		t.Errorf("%v still firing 60s after space was freed: %v", resolved, keys(prom.firing(t)))
	} else {
		t.Logf("%v resolved %.1fs after space was freed", resolved, time.Since(freed).Seconds())
	}
}

// volumeFiller is a file that takes all the free space of a volume.
type volumeFiller struct {
	path string
	size int64
}

// fillVolume writes a file into dir until the volume has no space left.
func fillVolume(t *testing.T, dir string) volumeFiller {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	var size int64
	for {
		n, err := f.Write(chunk)
		size += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			if n == 0 && len(chunk) > 1 {
				chunk = chunk[:len(chunk)/2] // fill the last pages too
				continue
			}
			if n == 0 {
				return volumeFiller{path: path, size: size}
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// fullDiskSender posts OTLP/HTTP requests of GenAI spans and remembers which spans the gateway
// acknowledged and which requests it refused (to send them again, as a client retries).
type fullDiskSender struct {
	t                    *testing.T
	endpoint             string
	acknowledged         []sentSpan
	acknowledgedRequests int
	refused              []sentRequest
	statuses             map[int]int
	firstRefusal         string
	held                 []heldTrace // traces whose children were sent, parent not yet
}

type sentSpan struct{ trace, span string }

type sentRequest struct {
	body  []byte
	spans []sentSpan
}

type heldTrace struct {
	traceID pcommon.TraceID
	parent  pcommon.SpanID
}

// children is a request of 10 children of a parent that has not ended yet (as SDKs export them).
func (s *fullDiskSender) children() sentRequest {
	h := heldTrace{traceID: newTraceID(), parent: newSpanID()}
	s.held = append(s.held, h)
	return s.request(h.traceID, h.parent, 10)
}

// wholeTrace is a request of a root and 9 children.
func (s *fullDiskSender) wholeTrace() sentRequest {
	return s.request(newTraceID(), pcommon.SpanID{}, 10)
}

// parents are the root spans of the traces sent by children, each a request.
func (s *fullDiskSender) parents() []sentRequest {
	var out []sentRequest
	for _, h := range s.held {
		td := ptrace.NewTraces()
		spans := newGenAIScope(td)
		appendGenAISpan(spans, h.traceID, h.parent, pcommon.SpanID{})
		out = append(out, s.encode(td))
	}
	s.held = nil
	return out
}

// request is n GenAI spans of one trace with 2 KB of random content each (gzip cannot shrink
// them much): children of parent, or a root and its children when parent is empty.
func (s *fullDiskSender) request(traceID pcommon.TraceID, parent pcommon.SpanID, n int) sentRequest {
	td := ptrace.NewTraces()
	spans := newGenAIScope(td)
	if parent.IsEmpty() {
		parent = newSpanID()
		appendGenAISpan(spans, traceID, parent, pcommon.SpanID{})
		n--
	}
	for range n {
		appendGenAISpan(spans, traceID, newSpanID(), parent)
	}
	return s.encode(td)
}

func (s *fullDiskSender) encode(td ptrace.Traces) sentRequest {
	var req sentRequest
	for _, sp := range td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().All() {
		req.spans = append(req.spans, sentSpan{trace: sp.TraceID().String(), span: sp.SpanID().String()})
	}
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		s.t.Fatal(err)
	}
	req.body = body
	return req
}

// send posts the request once and returns the gateway's answer.
func (s *fullDiskSender) send(req sentRequest) int {
	s.t.Helper()
	resp, err := http.Post(s.endpoint, "application/x-protobuf", bytes.NewReader(req.body))
	if err != nil {
		s.t.Fatalf("send to the gateway: %v", err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if s.statuses == nil {
		s.statuses = map[int]int{}
	}
	s.statuses[resp.StatusCode]++
	if resp.StatusCode == http.StatusOK {
		s.acknowledged = append(s.acknowledged, req.spans...)
		s.acknowledgedRequests++
	} else {
		s.refused = append(s.refused, req)
		if s.firstRefusal == "" {
			s.firstRefusal = strconv.Itoa(resp.StatusCode) + " " + printable(answer)
		}
	}
	return resp.StatusCode
}

// printable keeps the readable runs of an answer (the message of an OTLP Status in protobuf).
func printable(b []byte) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c >= 0x20 && c < 0x7f {
			out = append(out, c)
		}
	}
	return string(out)
}

func newGenAIScope(td ptrace.Traces) ptrace.SpanSlice {
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "full-disk-e2e")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("svc-sdk")
	return ss.Spans()
}

func appendGenAISpan(spans ptrace.SpanSlice, traceID pcommon.TraceID, id, parent pcommon.SpanID) {
	now := time.Now()
	content := make([]byte, 1024)
	_, _ = rand.Read(content)
	span := spans.AppendEmpty()
	span.SetTraceID(traceID)
	span.SetSpanID(id)
	span.SetParentSpanID(parent)
	span.SetName("chat gpt-4o")
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Second)))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
	span.Attributes().PutStr("gen_ai.operation.name", "chat")
	span.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
	span.Attributes().PutStr("gen_ai.prompt", hex.EncodeToString(content))
}

func newTraceID() pcommon.TraceID {
	var id pcommon.TraceID
	_, _ = rand.Read(id[:])
	return id
}

func newSpanID() pcommon.SpanID {
	var id pcommon.SpanID
	_, _ = rand.Read(id[:])
	return id
}
