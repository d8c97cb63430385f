package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/readapi"
	"github.com/svc/svc-collector/testbed/workload"
)

func TestScoresFromEvaluationEvents(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tp := g.tracerProvider(t, "support-agent")
	ctx := context.Background()

	// An application's agent traces: a gen_ai.evaluation.result with a value and one with a
	// label on the answer span, and a trace-level svc.score on the agent span.
	var sent []workload.AgentTrace
	wantScores := 0
	for seed := range uint64(3) {
		at := workload.EmitAgentTrace(ctx, tp, workload.AgentOptions{Seed: seed + 1, Evaluations: true})
		sent = append(sent, at)
		wantScores += at.Scores
	}
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	// The same application's evaluator reports through the OpenTelemetry logs API: one result
	// about the first trace's planning span, and one run-level score.
	lp := g.loggerProvider(t)
	logger := lp.Logger("example.com/evaluator")
	plan := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: sent[0].TraceID, SpanID: sent[0].GenAISpans[workload.SpanPlan], TraceFlags: trace.FlagsSampled,
	}))
	var rec otellog.Record
	rec.SetEventName("gen_ai.evaluation.result")
	rec.SetTimestamp(time.Now())
	rec.AddAttributes(
		attribute.String("gen_ai.evaluation.name", "plan_quality"),
		attribute.Float64("gen_ai.evaluation.score.value", 0.5),
		attribute.String("gen_ai.evaluation.explanation", "one redundant tool call"),
	)
	logger.Emit(plan, rec)
	var run otellog.Record
	run.SetEventName("svc.score")
	run.AddAttributes(
		attribute.String("svc.score.name", "run_accuracy"),
		attribute.Float64("svc.score.value", 0.93),
		attribute.String("svc.score.dataset_run_id", "run-qa-v3"),
	)
	logger.Emit(ctx, run)
	if err := lp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	wantScores += 2

	g.waitForScores(t, wantScores)
	// Spans and scores travel separate pipelines, so the spans may land after the scores.
	genAISpans := 0
	for _, at := range sent {
		genAISpans += len(at.GenAISpans)
	}
	g.waitForSpans(t, genAISpans)

	for i, at := range sent {
		traceID := hex.EncodeToString(at.TraceID[:])
		answer := at.GenAISpans[workload.SpanAnswer]
		answerID := hex.EncodeToString(answer[:])
		got := map[string]readapi.Score{}
		for _, sc := range g.readScores(t, url.Values{"traceId": {traceID}}) {
			got[sc.Name] = sc
		}
		wantNames := []string{"relevance", "tone", "resolved"}
		if i == 0 {
			wantNames = append(wantNames, "plan_quality")
		}
		if len(got) != len(wantNames) {
			t.Errorf("trace %s: scores %v, want %v", traceID, scoreNames(got), wantNames)
		}

		relevance := got["relevance"]
		if derefOrEmpty(relevance.ObservationID) != answerID || relevance.DataType != "NUMERIC" ||
			derefOrEmpty(relevance.Comment) != "The answer addresses the order status question." {
			t.Errorf("trace %s: relevance %+v, want a NUMERIC score of observation %s with the explanation as comment", traceID, relevance, answerID)
		}
		if v, ok := relevance.Value.(float64); !ok || v < 0.6 || v >= 1 {
			t.Errorf("trace %s: relevance value %v", traceID, relevance.Value)
		}
		tone := got["tone"]
		if derefOrEmpty(tone.ObservationID) != answerID || tone.DataType != "CATEGORICAL" || (tone.Value != "friendly" && tone.Value != "neutral") {
			t.Errorf("trace %s: tone %+v, want the label as a CATEGORICAL score of observation %s", traceID, tone, answerID)
		}
		resolved := got["resolved"]
		if resolved.ObservationID != nil || resolved.DataType != "BOOLEAN" || resolved.Value != 1.0 {
			t.Errorf("trace %s: resolved %+v, want a trace-level BOOLEAN score of 1", traceID, resolved)
		}
		// The observations the scores name are the spans the platform stored for this trace.
		if _, ok := g.platform.Observation(traceID, answerID); !ok {
			t.Errorf("trace %s: the scored observation %s is not on the platform", traceID, answerID)
		}
		for name, sc := range got {
			if derefOrEmpty(sc.TraceID) != traceID {
				t.Errorf("score %s is attached to trace %q, want %s", name, derefOrEmpty(sc.TraceID), traceID)
			}
			if _, err := time.Parse(time.RFC3339Nano, sc.Timestamp); err != nil {
				t.Errorf("score %s: timestamp %q: %v", name, sc.Timestamp, err)
			}
		}
		if i == 0 {
			planID := sent[0].GenAISpans[workload.SpanPlan]
			pq := got["plan_quality"]
			if derefOrEmpty(pq.ObservationID) != hex.EncodeToString(planID[:]) || pq.Value != 0.5 || derefOrEmpty(pq.Comment) != "one redundant tool call" {
				t.Errorf("plan_quality %+v, want 0.5 on observation %x", pq, planID)
			}
		}
	}

	runScores := g.readScores(t, url.Values{"name": {"run_accuracy"}})
	if len(runScores) != 1 || runScores[0].TraceID != nil || runScores[0].Value != 0.93 || derefOrEmpty(runScores[0].DatasetRunID) != "run-qa-v3" {
		t.Errorf("run-level scores %+v, want one run_accuracy of 0.93 of run run-qa-v3, without trace", runScores)
	}

	// Every score arrived once: the ids the connector derived are distinct and not resent.
	stats := g.platform.Stats()
	if stats.UniqueScores != wantScores || stats.ScoresReceived != wantScores || stats.ScoresRejected != 0 {
		t.Errorf("platform saw %d scores (%d unique, %d rejected), want %d once each",
			stats.ScoresReceived, stats.UniqueScores, stats.ScoresRejected, wantScores)
	}
}

func scoreNames(m map[string]readapi.Score) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// 250 scores that reach the gateway in one OTLP request leave it as three requests of 100,
// 100 and 50 scores (docs/contract.md §11: at most 100 per request).
func TestScoresArriveInBatchesOfAtMost100(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tp := g.tracerProvider(t, "support-agent")
	ctx := context.Background()

	const spans, eventsPerSpan = 125, 2
	tracer := tp.Tracer("opentelemetry.instrumentation.openai")
	ctx, root := tracer.Start(ctx, "invoke_agent batch-evaluator",
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "invoke_agent")))
	for i := range spans - 1 {
		_, span := tracer.Start(ctx, "chat gpt-4o", trace.WithAttributes(attribute.String("gen_ai.operation.name", "chat")))
		for e := range eventsPerSpan {
			span.AddEvent("gen_ai.evaluation.result", trace.WithAttributes(
				attribute.String("gen_ai.evaluation.name", fmt.Sprintf("check_%d", e)),
				attribute.Float64("gen_ai.evaluation.score.value", float64(i%10)/10),
			))
		}
		span.End()
	}
	for e := range eventsPerSpan {
		root.AddEvent("svc.score", trace.WithAttributes(
			attribute.String("svc.score.name", fmt.Sprintf("overall_%d", e)),
			attribute.Float64("svc.score.value", 1),
			attribute.String("svc.score.target", "trace"),
		))
	}
	root.End()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	const want = spans * eventsPerSpan
	g.waitForScores(t, want)

	var sizes []int
	for _, r := range g.platform.Requests(platform.EndpointScores) {
		if r.Status != http.StatusOK {
			t.Errorf("scores request answered %d: %s", r.Status, r.Error)
		}
		sizes = append(sizes, r.Scores)
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{50, 100, 100}) {
		t.Errorf("scores requests carried %v scores, want 100, 100 and 50", sizes)
	}
	if stats := g.platform.Stats(); stats.UniqueScores != want || stats.ScoresReceived != want {
		t.Errorf("platform saw %d scores, %d unique; want %d once each", stats.ScoresReceived, stats.UniqueScores, want)
	}
	traceID := root.SpanContext().TraceID()
	if n := len(g.platform.Scores(platform.ScoreFilter{TraceID: hex.EncodeToString(traceID[:])})); n != want {
		t.Errorf("%d scores attached to the trace, want %d", n, want)
	}
}

// An application (or a proxy) that resends the same spans must not create the scores twice:
// the connector derives the same id for the same event, and the platform replaces the score.
func TestScoresOfResentSpansAreNotDuplicated(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	ctx := context.Background()

	recorded := tracetest.NewInMemoryExporter()
	app := sdktrace.NewTracerProvider(sdktrace.WithSyncer(recorded))
	sent := workload.EmitAgentTrace(ctx, app, workload.AgentOptions{Seed: 42, Evaluations: true})
	spans := recorded.GetSpans().Snapshots()

	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(g.collector.OTLPHTTPEndpoint), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = exp.Shutdown(ctx) }()
	for range 2 {
		if err := exp.ExportSpans(ctx, spans); err != nil {
			t.Fatal(err)
		}
	}

	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := g.platform.WaitUntil(waitCtx, func() bool { return g.platform.Stats().ScoresReceived >= 2*sent.Scores }); err != nil {
		t.Fatalf("both deliveries did not arrive: %v (stats %+v)", err, g.platform.Stats())
	}
	stats := g.platform.Stats()
	if stats.UniqueScores != sent.Scores {
		t.Errorf("%d distinct scores after sending %d scoring events twice, want %d", stats.UniqueScores, sent.Scores, sent.Scores)
	}
	for _, sc := range g.platform.Scores(platform.ScoreFilter{TraceID: hex.EncodeToString(sent.TraceID[:])}) {
		if sc.Deliveries != 2 || sc.IDGenerated {
			t.Errorf("score %s (%s): %d deliveries, id generated by the platform %v; want 2 deliveries of the connector's id",
				sc.ID, sc.Name, sc.Deliveries, sc.IDGenerated)
		}
	}
}
