package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
)

// samplingOverlay adds online evaluators to the default config: one NUMERIC score per
// observation, taking the sampling decision of the svcsampling extension like the span filter and
// the svcscore connector.
const samplingOverlay = `yaml:
connectors:
  svcevaluator:
    sampling: svcsampling
    evaluators:
      - name: latency_seconds
        check: {latency: {}}
        score: {data_type: numeric}
service:
  pipelines:
    traces:
      exporters: [svc, svcevaluator]
    logs/scores:
      receivers: [svcscore, svcevaluator]
`

// TestSamplingKeepsSpanScoresAndEvaluatorScoresTogether: with SVC_SAMPLE_RATE=0.5, set once (the
// svcsampling extension), every trace is kept or dropped whole: its span on the platform, the
// score of its span's svc.score event (svcscore connector) and its evaluator's score
// (svcevaluator connector), all or none. An experiment trace the rate samples out is kept whole,
// a child span that arrives in a later request included.
func TestSamplingKeepsSpanScoresAndEvaluatorScoresTogether(t *testing.T) {
	g := startGateway(t, gatewayOptions{
		env:     []string{"SVC_SAMPLE_RATE=0.5"},
		configs: []string{collector.DefaultConfig(), samplingOverlay},
	})
	endpoint := "http://" + g.collector.OTLPHTTPEndpoint + "/v1/traces"

	// Plain traces: one GenAI span each, with a score event.
	const plain = 40
	var plainTraces []pcommon.TraceID
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for range plain {
		tid := randomTraceID()
		plainTraces = append(plainTraces, tid)
		scoredGenAISpan(spans, tid, pcommon.SpanID{}, nil)
	}
	postSampledTraces(t, endpoint, td)

	// Experiment traces the rate samples out (the low 64 bits of the trace id at or above 2^63):
	// the root marks the experiment; its child comes in a later request, without the mark.
	const experiments = 5
	var experimentTraces []pcommon.TraceID
	roots := map[pcommon.TraceID]pcommon.SpanID{}
	td = ptrace.NewTraces()
	spans = td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for range experiments {
		tid := randomTraceID()
		tid[8] |= 0x80
		experimentTraces = append(experimentTraces, tid)
		roots[tid] = scoredGenAISpan(spans, tid, pcommon.SpanID{}, map[string]string{"svc.experiment.id": "exp-1", "svc.experiment.item.id": "item-1"})
	}
	postSampledTraces(t, endpoint, td)
	time.Sleep(500 * time.Millisecond)
	td = ptrace.NewTraces()
	spans = td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for _, tid := range experimentTraces {
		scoredGenAISpan(spans, tid, roots[tid], nil)
	}
	postSampledTraces(t, endpoint, td)

	// What the rate keeps, by the OpenTelemetry rule: low 64 bits >> 1 below 0.5 * 2^63.
	keptPlain := 0
	for _, tid := range plainTraces {
		if tid[8]&0x80 == 0 {
			keptPlain++
		}
	}
	if keptPlain == 0 || keptPlain == plain {
		t.Fatalf("the random trace ids give %d of %d kept: no mix to test", keptPlain, plain)
	}
	wantSpans := keptPlain + 2*experiments
	g.waitForSpans(t, wantSpans)
	g.waitForScores(t, 2*wantSpans)
	time.Sleep(2 * time.Second) // anything wrongly kept has time to arrive too

	type kept struct{ spans, scores, evaluations int }
	count := func(tid pcommon.TraceID) kept {
		id := hex.EncodeToString(tid[:])
		return kept{
			spans:       len(g.platform.ObservationsByTrace(id)),
			scores:      len(g.platform.Scores(platform.ScoreFilter{TraceID: id, Name: "quality"})),
			evaluations: len(g.platform.Scores(platform.ScoreFilter{TraceID: id, Name: "latency_seconds"})),
		}
	}
	for _, tid := range plainTraces {
		want := kept{}
		if tid[8]&0x80 == 0 {
			want = kept{1, 1, 1}
		}
		if got := count(tid); got != want {
			t.Errorf("trace %x: %d spans, %d scores, %d evaluator scores; want %d each", tid, got.spans, got.scores, got.evaluations, want.spans)
		}
	}
	for _, tid := range experimentTraces {
		if got := count(tid); got != (kept{2, 2, 2}) {
			t.Errorf("experiment trace %x: %d spans, %d scores, %d evaluator scores; want 2 each", tid, got.spans, got.scores, got.evaluations)
		}
	}
	t.Logf("sample rate 0.5: %d of %d plain traces kept whole, %d dropped whole; %d sampled-out experiment traces kept whole (a child in a later request)",
		keptPlain, plain, plain-keptPlain, experiments)
}

func randomTraceID() pcommon.TraceID {
	var tid pcommon.TraceID
	_, _ = rand.Read(tid[:])
	return tid
}

// scoredGenAISpan appends a GenAI span of the trace (a root when parent is empty) with one
// svc.score event, and returns its id.
func scoredGenAISpan(spans ptrace.SpanSlice, tid pcommon.TraceID, parent pcommon.SpanID, attrs map[string]string) pcommon.SpanID {
	var sid pcommon.SpanID
	_, _ = rand.Read(sid[:])
	now := time.Now()
	span := spans.AppendEmpty()
	span.SetTraceID(tid)
	span.SetSpanID(sid)
	span.SetParentSpanID(parent)
	span.SetName("chat gpt-4o")
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-1500 * time.Millisecond)))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
	span.Attributes().PutStr("gen_ai.operation.name", "chat")
	span.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
	for k, v := range attrs {
		span.Attributes().PutStr(k, v)
	}
	ev := span.Events().AppendEmpty()
	ev.SetName("svc.score")
	ev.SetTimestamp(pcommon.NewTimestampFromTime(now))
	ev.Attributes().PutStr("svc.score.name", "quality")
	ev.Attributes().PutDouble("svc.score.value", 0.9)
	return sid
}

// postSampledTraces sends one OTLP/HTTP request and requires the gateway to accept it.
func postSampledTraces(t *testing.T, endpoint string, td ptrace.Traces) {
	t.Helper()
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(endpoint, "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatal(fmt.Errorf("the gateway answered %s", resp.Status))
	}
}
