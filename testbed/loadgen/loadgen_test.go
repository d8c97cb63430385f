package loadgen

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func smallWorkload(t *testing.T, seed uint64) *Workload {
	t.Helper()
	w, err := NewWorkload(WorkloadOptions{Seed: seed, Templates: 16, IOMinBytes: 256, IOMaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func decode(t *testing.T, body []byte) ptrace.Traces {
	t.Helper()
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		t.Fatalf("request does not decode as OTLP: %v", err)
	}
	return req.Traces()
}

// A request decodes as OTLP, holds the traces it says with the ids Trace predicts, and every
// parent id points at a span of the same trace.
func TestRequestCarriesPredictedIDs(t *testing.T) {
	w := smallWorkload(t, 7)
	now := time.Unix(1_800_000_000, 0)
	w.now = func() time.Time { return now }
	req := w.NewRequest(1000, 0, 200, 3<<20)
	if req.Traces < 2 {
		t.Fatalf("request holds %d traces, want several", req.Traces)
	}
	td := decode(t, req.Body)
	if td.SpanCount() != req.Spans {
		t.Fatalf("decoded %d spans, request says %d", td.SpanCount(), req.Spans)
	}
	want := map[string]bool{}     // trace/span of every span
	wantGenAI := map[string]int{} // GenAI spans by trace
	for i := range req.Traces {
		ids := w.Trace(req.FirstSeq + uint64(i))
		for _, s := range ids.SpanIDs {
			want[ids.TraceIDHex()+"/"+hex.EncodeToString(s[:])] = true
		}
		wantGenAI[ids.TraceIDHex()] = len(ids.GenAI)
	}
	if len(want) != req.Spans {
		t.Fatalf("predicted %d distinct span ids, want %d", len(want), req.Spans)
	}
	genAI := map[string]int{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				key := s.TraceID().String() + "/" + s.SpanID().String()
				if !want[key] {
					t.Fatalf("span %s (%s) was not predicted", key, s.Name())
				}
				if !s.ParentSpanID().IsEmpty() && !want[s.TraceID().String()+"/"+s.ParentSpanID().String()] {
					t.Fatalf("span %s has parent %s outside its trace", key, s.ParentSpanID())
				}
				start, end := s.StartTimestamp().AsTime(), s.EndTimestamp().AsTime()
				if end.Before(start) || end.After(now) || start.Before(now.Add(-time.Minute)) {
					t.Fatalf("span %s runs %v – %v, want within the minute before %v", key, start, end, now)
				}
				for _, e := range s.Events().All() {
					if at := e.Timestamp().AsTime(); at.Before(start) || at.After(end) {
						t.Fatalf("event %s at %v outside its span %v – %v", e.Name(), at, start, end)
					}
				}
				if isGenAI(ss.Scope().Name(), s.Attributes()) {
					genAI[s.TraceID().String()]++
				}
			}
		}
	}
	for trace, n := range wantGenAI {
		if genAI[trace] != n {
			t.Errorf("trace %s: %d spans look GenAI, Trace says %d", trace, genAI[trace], n)
		}
	}
}

// isGenAI is the SDKs' default span filter, restricted to the scopes the workload uses.
func isGenAI(scope string, attrs pcommon.Map) bool {
	for _, known := range []string{"openinference", "opentelemetry.instrumentation.openai"} {
		if scope == known || strings.HasPrefix(scope, known+".") {
			return true
		}
	}
	for k := range attrs.All() {
		if strings.HasPrefix(k, "gen_ai.") {
			return true
		}
	}
	return false
}

// The same seed gives the same bytes; another seed or another sequence number other ids.
func TestWorkloadIsDeterministic(t *testing.T) {
	a, b, c := smallWorkload(t, 1), smallWorkload(t, 1), smallWorkload(t, 2)
	clock := func() time.Time { return time.Unix(1_800_000_000, 0) }
	a.now, b.now = clock, clock
	ra := a.NewRequest(0, 0, 512, 3<<20)
	rb := b.NewRequest(0, 0, 512, 3<<20)
	if !bytes.Equal(ra.Body, rb.Body) {
		t.Fatal("same seed, same sequence numbers: different requests")
	}
	if a.Trace(5).TraceID == c.Trace(5).TraceID {
		t.Fatal("different seeds gave the same trace id")
	}
	if a.Trace(5).TraceID == a.Trace(6).TraceID {
		t.Fatal("different sequence numbers gave the same trace id")
	}
}

// The defaults give the workload: 70% plain spans, 1–100 KiB of LLM input and output.
func TestDefaultShape(t *testing.T) {
	w, err := NewWorkload(WorkloadOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	sh := w.Shape()
	if sh.PlainShare < 0.66 || sh.PlainShare > 0.74 {
		t.Errorf("plain share %.3f, want about 0.7", sh.PlainShare)
	}
	if sh.BytesPerTrace < 10<<10 || sh.BytesPerTrace > 400<<10 {
		t.Errorf("%.0f bytes per trace, want tens of KiB (2 LLM spans of 1–100 KiB in and out)", sh.BytesPerTrace)
	}
	if sh.ScoresPerTrace != 3 {
		t.Errorf("%.1f scores per trace, want 3", sh.ScoresPerTrace)
	}
}

// Run paces, bounds and counts: refusals and rejections are told apart from acceptance, and
// only accepted traces are listed.
func TestRunCountsVerdicts(t *testing.T) {
	w := smallWorkload(t, 9)
	var n atomic.Int64
	srv := serve(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if ptraceotlp.NewExportRequest().UnmarshalProto(body) != nil {
			rw.WriteHeader(http.StatusBadRequest)
			return
		}
		switch n.Add(1) % 4 {
		case 1:
			rw.Header().Set("Retry-After", "3")
			rw.WriteHeader(http.StatusTooManyRequests)
		case 2:
			rw.WriteHeader(http.StatusServiceUnavailable)
		default:
			rw.Header().Set("Content-Type", "application/x-protobuf")
			rw.WriteHeader(http.StatusOK)
		}
	}))
	s, err := NewSender(SenderOptions{Protocol: ProtocolHTTP, Endpoint: srv})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := Run(context.Background(), w, s, RunOptions{Duration: 10 * time.Second, MaxTraces: 200, RequestSpans: 100, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent.Traces != 200 {
		t.Fatalf("sent %d traces, want exactly MaxTraces 200", res.Sent.Traces)
	}
	if res.Refused.Requests == 0 || res.Accepted.Requests == 0 || res.Rejected.Requests != 0 || res.Failed.Requests != 0 {
		t.Fatalf("verdicts %+v", res.Statuses)
	}
	if res.Accepted.Spans+res.Refused.Spans != res.Sent.Spans {
		t.Fatalf("accepted %d + refused %d spans != sent %d", res.Accepted.Spans, res.Refused.Spans, res.Sent.Spans)
	}
	if res.RetryAfter != 3*time.Second {
		t.Errorf("Retry-After %v, want 3s", res.RetryAfter)
	}
	var accepted int64
	res.EachAccepted(func(uint64) { accepted++ })
	if accepted != res.Accepted.Traces {
		t.Errorf("AcceptedSeqs list %d traces, Accepted counts %d", accepted, res.Accepted.Traces)
	}

	if out := s.Send(context.Background(), []byte("\xff\xff not protobuf")); out.Verdict != Rejected {
		t.Errorf("malformed body: verdict %v (%s), want rejected", out.Verdict, out.Status)
	}
}

// A paced run sends at the rate asked and stops at its duration.
func TestRunPaces(t *testing.T) {
	w := smallWorkload(t, 11)
	srv := serve(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rw.WriteHeader(http.StatusOK)
	}))
	s, err := NewSender(SenderOptions{Protocol: ProtocolHTTP, Endpoint: srv})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := Run(context.Background(), w, s, RunOptions{Rate: 2000, Duration: 2 * time.Second, RequestSpans: 100})
	if err != nil {
		t.Fatal(err)
	}
	// 4000 spans due in 2 s, give or take a request of ~100 spans.
	if res.Sent.Spans < 3700 || res.Sent.Spans > 4200 {
		t.Errorf("sent %d spans at 2000/s for 2s, want about 4000", res.Sent.Spans)
	}
	if res.Elapsed > 5*time.Second {
		t.Errorf("run took %v, bounded by 2s of sending", res.Elapsed)
	}
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// grpcCollector answers Export: RESOURCE_EXHAUSTED to every other request, OK to the rest.
type grpcCollector struct {
	ptraceotlp.UnimplementedGRPCServer
	calls atomic.Int64
	spans atomic.Int64
}

func (c *grpcCollector) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	if c.calls.Add(1)%2 == 0 {
		return ptraceotlp.NewExportResponse(), status.Error(codes.ResourceExhausted, "queue full")
	}
	c.spans.Add(int64(req.Traces().SpanCount()))
	return ptraceotlp.NewExportResponse(), nil
}

// Over gRPC the raw bytes arrive as a valid ExportTraceServiceRequest, and back-off codes
// count as refused.
func TestRunOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	c := &grpcCollector{}
	ptraceotlp.RegisterGRPCServer(srv, c)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	w := smallWorkload(t, 13)
	s, err := NewSender(SenderOptions{Protocol: ProtocolGRPC, Endpoint: ln.Addr().String(), Gzip: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := Run(context.Background(), w, s, RunOptions{MaxTraces: 60, Duration: 10 * time.Second, RequestSpans: 100, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted.Requests == 0 || res.Refused.Requests == 0 || res.Rejected.Requests+res.Failed.Requests != 0 {
		t.Fatalf("answers %v: want OK and ResourceExhausted only", res.Statuses)
	}
	if got := c.spans.Load(); got != res.Accepted.Spans {
		t.Errorf("server decoded %d spans in accepted requests, sender counted %d", got, res.Accepted.Spans)
	}
	if out := s.Send(context.Background(), []byte("\xff\xff not protobuf")); out.Verdict != Rejected {
		t.Errorf("malformed body: verdict %v (%s), want rejected", out.Verdict, out.Status)
	}
}

// The sender refuses to send anywhere but loopback.
func TestSenderIsLoopbackOnly(t *testing.T) {
	for _, endpoint := range []string{"10.0.0.1:4318", "example.com:4317", "0.0.0.0:4318"} {
		if _, err := NewSender(SenderOptions{Endpoint: endpoint}); err == nil {
			t.Errorf("%s: accepted", endpoint)
		}
	}
	if _, err := NewSender(SenderOptions{Endpoint: "127.0.0.1:4318"}); err != nil {
		t.Errorf("127.0.0.1: %v", err)
	}
}
