package benchmarks

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcevaluatorconnector"
	"github.com/svc/svc-collector/svcspanfilterprocessor"
)

// The evaluator benchmark: the gateway's span path (svcspanfilter → svcmetadata with masking)
// on the metadata benchmark's batch of generations, without evaluators and with the five
// evaluators of distribution/examples/evaluators.yaml reading the same spans (the collector's
// fan-out hands a non-mutating connector the exporter's data, so running them one after the
// other is what the pipeline does). CPU per span: compare the two sub-benchmarks' ns/op.

const generationsFilter = `[{"type":"string","column":"type","operator":"=","value":"GENERATION"}]`

func evaluatorsConfig(tb testing.TB, refusalRegexp bool) *svcevaluatorconnector.Config {
	cfg := svcevaluatorconnector.NewFactory().CreateDefaultConfig().(*svcevaluatorconnector.Config)
	// Without the regexp, the refusal evaluator is an output length check: the evaluators'
	// own cost apart from RE2 scanning 4 KB of output.
	refusal := map[string]any{"name": "refusal", "filter": generationsFilter,
		"check": map[string]any{"output_length": map[string]any{"below": 10}}}
	if refusalRegexp {
		refusal = map[string]any{"name": "refusal", "filter": generationsFilter,
			"check": map[string]any{"output_matches": `(?i)^\W*(I'm sorry|I am sorry|I apologi[sz]e|I can't|I cannot|I won't|I'm unable|I am unable)\b`},
			"score": map[string]any{"only_when_true": true}}
	}
	loadConfig(tb, cfg, map[string]any{"evaluators": []any{
		map[string]any{"name": "slow_generation", "filter": generationsFilter,
			"check": map[string]any{"latency": map[string]any{"above": 5}},
			"score": map[string]any{"comment": "{{name}} ({{model}}) took {{measure}} s", "only_when_true": true}},
		map[string]any{"name": "json_output", "filter": `[{"type":"string","column":"type","operator":"=","value":"GENERATION"},{"type":"string","column":"metadata.feature","operator":"=","value":"checkout-assistant"}]`,
			"check": map[string]any{"json_output": true}},
		refusal,
		map[string]any{"name": "error", "check": map[string]any{"error": true}, "score": map[string]any{"only_when_true": true}},
		map[string]any{"name": "cost_guard", "check": map[string]any{"tokens": map[string]any{"above": 500}},
			"score": map[string]any{"target": "trace", "only_when_true": true}},
	}})
	return cfg
}

func newSvcEvaluator(tb testing.TB, refusalRegexp bool) consumer.Traces {
	f := svcevaluatorconnector.NewFactory()
	c, err := f.CreateTracesToLogs(context.Background(), connectortest.NewNopSettings(f.Type()), evaluatorsConfig(tb, refusalRegexp), consumertest.NewNop())
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	return c
}

// both hands each batch to the exporter's stand-in and then to the evaluators.
type both struct{ first, second consumer.Traces }

func (b both) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (b both) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if err := b.first.ConsumeTraces(ctx, td); err != nil {
		return err
	}
	return b.second.ConsumeTraces(ctx, td)
}

func BenchmarkEvaluators(b *testing.B) {
	for _, tc := range []struct {
		name                  string
		evaluators, withRegex bool
	}{{"pipeline", false, false}, {"pipeline+5evaluators", true, false}, {"pipeline+5evaluators_regexp", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			var tail consumer.Traces = consumertest.NewNop()
			if tc.evaluators {
				tail = both{consumertest.NewNop(), newSvcEvaluator(b, tc.withRegex)}
			}
			meta := newSvcMetadata(b, tail)
			filter := newSvcSpanFilterTo(b, meta)
			src := metadataBatch()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				td := ptrace.NewTraces()
				src.CopyTo(td)
				if err := filter.ConsumeTraces(ctx, td); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*metadataSpansPerBatch), "ns/span")
		})
	}
}

// BenchmarkEvaluatorsAlone is the evaluators' own cost on the batch as the span path hands it
// over (after svcspanfilter and svcmetadata): the difference the pipeline benchmark measures,
// without the pipeline's noise.
func BenchmarkEvaluatorsAlone(b *testing.B) {
	for _, tc := range []struct {
		name      string
		withRegex bool
	}{{"5evaluators", false}, {"5evaluators_regexp", true}} {
		b.Run(tc.name, func(b *testing.B) {
			sink := &consumertest.TracesSink{}
			meta := newSvcMetadata(b, sink)
			if err := newSvcSpanFilterTo(b, meta).ConsumeTraces(context.Background(), metadataBatch()); err != nil {
				b.Fatal(err)
			}
			if sink.SpanCount() != metadataSpansPerBatch {
				b.Fatalf("%d spans came out of the span path, want %d", sink.SpanCount(), metadataSpansPerBatch)
			}
			batch := sink.AllTraces()[0]
			ev := newSvcEvaluator(b, tc.withRegex)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := ev.ConsumeTraces(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*metadataSpansPerBatch), "ns/span")
		})
	}
}

// The evaluators make the scores the cookbook promises on the benchmark's batch: the benchmark
// measures real work.
func TestEvaluatorsBenchmarkScores(t *testing.T) {
	sink := &consumertest.LogsSink{}
	f := svcevaluatorconnector.NewFactory()
	c, err := f.CreateTracesToLogs(context.Background(), connectortest.NewNopSettings(f.Type()), evaluatorsConfig(t, true), sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ConsumeTraces(context.Background(), metadataBatch()); err != nil {
		t.Fatal(err)
	}
	// 10 generations: json_output (prose output, 0) and cost_guard (812 tokens) on each.
	if n := sink.LogRecordCount(); n != 2*metadataSpansPerBatch {
		t.Errorf("%d scores, want %d", n, 2*metadataSpansPerBatch)
	}
}

// newSvcSpanFilterTo is the span filter with its default config in front of next.
func newSvcSpanFilterTo(tb testing.TB, next consumer.Traces) consumer.Traces {
	f := svcspanfilterprocessor.NewFactory()
	return createTraces(tb, f, f.CreateDefaultConfig(), next)
}
