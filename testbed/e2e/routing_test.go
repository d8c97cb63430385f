package e2e

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
)

// TestProjectRoutingByResourceAttribute runs distribution/examples/project-routing.yaml: spans,
// span-event scores and log-event scores of each service reach the project its `svc.project`
// resource attribute names, with that project's keys; a service naming no project reaches none.
func TestProjectRoutingByResourceAttribute(t *testing.T) {
	ps := startProjects(t, teamA, teamB)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := collector.Start(ctx, collector.Options{
		Binary:  collectorBinary(t),
		Configs: []string{collectorExample("project-routing.yaml")},
		Sets:    []string{"service::telemetry::logs::level=debug"},
		Env: []string{"SVC_ENDPOINT=" + ps.URL(),
			"SVC_TEAM_A_PUBLIC_KEY=" + teamA.PublicKey, "SVC_TEAM_A_SECRET_KEY=" + teamA.SecretKey,
			"SVC_TEAM_B_PUBLIC_KEY=" + teamB.PublicKey, "SVC_TEAM_B_SECRET_KEY=" + teamB.SecretKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Stop()
		assertNoSecrets(t, c.Logs(), teamA, teamB)
		if t.Failed() {
			t.Logf("collector output:\n%s", c.Logs())
		}
	})

	projects := map[string]platform.ProjectKeys{"team-a": teamA, "team-b": teamB, "": {PublicKey: "no-project"}}
	want := map[string]sent{}
	for name, keys := range projects {
		var attrs []attribute.KeyValue
		if name != "" {
			attrs = append(attrs, attribute.String("svc.project", name))
		}
		app := newAppWithHeaders(t, c, keys, nil, false, attrs...)
		s, err := app.emit(t, uint64(len(name)*1000+len(keys.PublicKey)), 3)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// One evaluation result as a log event, about the first trace's agent span.
		var tid string
		for id := range s.spans {
			tid = id
			break
		}
		emitEvaluationLog(t, c, nil, tid, s.spans[tid][0], attrs...)
		s.scores++
		want[keys.PublicKey] = s
	}
	for _, keys := range []platform.ProjectKeys{teamA, teamB} {
		waitDelivered(t, ps.Project(keys.PublicKey), want[keys.PublicKey], 60*time.Second)
	}
	time.Sleep(time.Second) // anything misrouted would have arrived by now
	for _, keys := range []platform.ProjectKeys{teamA, teamB} {
		assertHoldsExactly(t, ps, keys, want[keys.PublicKey])
	}
}

// emitEvaluationLog sends one gen_ai.evaluation.result log event about span spanHex of trace
// traceHex, from a service with the resource attributes attrs, with headers on the request.
func emitEvaluationLog(t *testing.T, c *collector.Process, headers map[string]string, traceHex, spanHex string, attrs ...attribute.KeyValue) {
	t.Helper()
	exp, err := otlploghttp.New(context.Background(), otlploghttp.WithEndpoint(c.OTLPHTTPEndpoint), otlploghttp.WithInsecure(),
		otlploghttp.WithHeaders(headers), otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(resource.NewSchemaless(attrs...)),
		sdklog.WithProcessor(sdklog.NewBatchProcessor(exp, sdklog.WithExportInterval(time.Hour))))
	defer func() { _ = lp.Shutdown(context.Background()) }()
	var tid trace.TraceID
	var sid trace.SpanID
	if _, err := hex.Decode(tid[:], []byte(traceHex)); err != nil {
		t.Fatal(err)
	}
	if _, err := hex.Decode(sid[:], []byte(spanHex)); err != nil {
		t.Fatal(err)
	}
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	var rec otellog.Record
	rec.SetEventName("gen_ai.evaluation.result")
	rec.SetTimestamp(time.Now())
	rec.AddAttributes(attribute.String("gen_ai.evaluation.name", "routing_check"), attribute.Float64("gen_ai.evaluation.score.value", 1))
	lp.Logger("example.com/evaluator").Emit(ctx, rec)
	if err := lp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
}
