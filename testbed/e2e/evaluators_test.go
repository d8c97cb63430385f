package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc/svc-collector/testbed/collector"
)

// The evaluators of distribution/examples/evaluators.yaml on a workload with slow calls, invalid
// JSON output, errors, refusals and an expensive call: exactly the expected scores on the
// expected observations, read back through the v3 scores API; resending the same spans adds
// no score.
func TestEvaluatorsScoreLiveObservations(t *testing.T) {
	g := startGateway(t, gatewayOptions{configs: []string{
		collector.DefaultConfig(),
		filepath.Join(collector.RepoRoot(), "distribution", "examples", "evaluators.yaml"),
	}})
	ctx := context.Background()

	recorded := tracetest.NewInMemoryExporter()
	app := sdktrace.NewTracerProvider(sdktrace.WithSyncer(recorded))
	tracer := app.Tracer("example.com/travel-agent")
	start := time.Now().Add(-time.Minute)
	spanIDs := map[string]string{}
	call := func(parent context.Context, name string, d time.Duration, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
		c, span := tracer.Start(parent, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
		id := span.SpanContext().SpanID()
		spanIDs[name] = hex.EncodeToString(id[:])
		return c, &endAt{Span: span, end: start.Add(d)}
	}
	generation := func(model string) attribute.KeyValue { return attribute.String("gen_ai.request.model", model) }
	jsonFormat := attribute.String("svc.observation.metadata.response_format", "json")

	root, agent := call(ctx, "agent", 12*time.Second, attribute.String("gen_ai.operation.name", "invoke_agent"))
	_, s := call(root, "chat slow", 6*time.Second, generation("gpt-4o"), jsonFormat,
		attribute.String("svc.observation.output", `{"plan":["fly","hotel"]}`))
	s.End()
	_, s = call(root, "chat bad json", time.Second, generation("gpt-4o"), jsonFormat,
		attribute.String("svc.observation.output", `{"plan":["fly",`))
	s.End()
	_, s = call(root, "chat refusal", time.Second, generation("gpt-4o-mini"),
		attribute.String("svc.observation.output", "I'm sorry, but I can't help with booking that."))
	s.End()
	_, s = call(root, "chat expensive", 2*time.Second, generation("o3"), attribute.Float64("gen_ai.usage.cost", 0.08),
		attribute.String("svc.observation.output", "Here is the itinerary."))
	s.End()
	_, s = call(root, "book hotel", 3*time.Second, attribute.String("gen_ai.operation.name", "execute_tool"))
	s.SetStatus(codes.Error, "hotel API returned 503")
	s.End()
	agent.End()
	spans := recorded.GetSpans().Snapshots()
	traceID := spans[0].SpanContext().TraceID()
	traceHex := hex.EncodeToString(traceID[:])

	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(g.collector.OTLPHTTPEndpoint), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = exp.Shutdown(ctx) }()
	if err := exp.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}

	want := []string{
		"chat bad json/json_output=0",
		"chat refusal/refusal=1",
		"chat slow/json_output=1",
		"chat slow/slow_generation=1",
		"book hotel/error=1",
		"trace/cost_guard=1",
	}
	sort.Strings(want)
	g.waitForScores(t, len(want))
	g.waitForSpans(t, len(spans))
	byID := map[string]string{"": "trace"}
	for name, id := range spanIDs {
		byID[id] = name
	}
	read := func() ([]string, map[string]string) {
		var got []string
		comments := map[string]string{}
		for _, sc := range g.readScores(t, url.Values{"traceId": {traceHex}}) {
			obs := ""
			if sc.ObservationID != nil {
				obs = *sc.ObservationID
			}
			key := fmt.Sprintf("%s/%s=%v", byID[obs], sc.Name, sc.Value)
			got = append(got, key)
			if sc.Comment != nil {
				comments[key] = *sc.Comment
			}
			if sc.DataType != "BOOLEAN" {
				t.Errorf("%s: data type %s, want BOOLEAN", key, sc.DataType)
			}
		}
		sort.Strings(got)
		return got, comments
	}
	got, comments := read()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("scores\n got %v\nwant %v", got, want)
	}
	if c := comments["chat slow/slow_generation=1"]; c != "chat slow (gpt-4o) took 6 s" {
		t.Errorf("slow_generation comment %q", c)
	}

	// The same spans again (a client retry): the same score ids, no new score.
	before := g.platform.Stats().ScoresReceived
	if err := exp.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := g.platform.WaitUntil(waitCtx, func() bool { return g.platform.Stats().ScoresReceived >= before+len(want) }); err != nil {
		t.Fatalf("the resent spans' scores did not arrive: %v (stats %+v)", err, g.platform.Stats())
	}
	if n := g.platform.Stats().UniqueScores; n != len(want) {
		t.Errorf("%d distinct scores after the resend, want %d", n, len(want))
	}
	if got, _ := read(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("scores after the resend\n got %v\nwant %v", got, want)
	}
}

// endAt ends a span at a given time, so that the workload has slow calls without waiting.
type endAt struct {
	trace.Span
	end time.Time
}

func (s *endAt) End(...trace.SpanEndOption) { s.Span.End(trace.WithTimestamp(s.end)) }
