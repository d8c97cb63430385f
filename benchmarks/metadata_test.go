package benchmarks

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/redactionprocessor"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/svc/svc-collector/svcmetadataprocessor"
)

// The metadata benchmark: a span with 10 metadata keys of mixed types and 4 KB of input and
// output, masking on (e-mail, card numbers, API keys, one masked key), through svcmetadata and
// through the nearest contrib pipeline: transform (OTTL statements that quote strings and
// stringify other values, key by key, since OTTL cannot iterate a prefix) followed by redaction
// (the same three patterns as blocked values, the key as a blocked key pattern).

const metadataSpansPerBatch = 10

// Patterns as close as redaction can take them to the builtin rules of svcmetadata.
var contribBlockedValues = []string{
	`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`,
	`\b(?:4\d{3}|5[1-5]\d{2}|2[2-7]\d{2}|3[0-9]\d{2}|6(?:011|5\d{2}))(?:[ -]?\d){9,15}\b`,
	`\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,})`,
}

// metadataBatch builds the benchmark batch: spans of a third-party instrumentation.
func metadataBatch() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("my-app/llm")
	input := messagesJSON(4096)
	output := proseText(4096)
	for i := range metadataSpansPerBatch {
		span := ss.Spans().AppendEmpty()
		span.SetName("chat gpt-4o")
		span.SetTraceID([16]byte{1, 2, 3, byte(i)})
		span.SetSpanID([8]byte{1, byte(i)})
		a := span.Attributes()
		a.PutStr("gen_ai.operation.name", "chat")
		a.PutStr("gen_ai.request.model", "gpt-4o")
		a.PutInt("gen_ai.usage.input_tokens", 812)
		a.PutStr("svc.observation.input", input)
		a.PutStr("svc.observation.output", output)
		a.PutStr("svc.observation.metadata.env", "prod")
		a.PutStr("svc.observation.metadata.region", "eu-west-1")
		a.PutStr("svc.observation.metadata.user", "jane.doe@example.com")
		a.PutStr("svc.observation.metadata.feature", "checkout-assistant")
		a.PutStr("svc.observation.metadata.password", "hunter2")
		a.PutInt("svc.observation.metadata.attempt", 2)
		a.PutInt("svc.observation.metadata.card", 4111111111111111)
		a.PutDouble("svc.observation.metadata.temperature", 0.7)
		a.PutBool("svc.observation.metadata.cached", false)
		limits := a.PutEmptyMap("svc.observation.metadata.limits")
		limits.PutInt("rpm", 60)
		limits.PutStr("tier", "gold")
	}
	return td
}

// messagesJSON is a chat messages array of about n bytes with one e-mail address in it.
func messagesJSON(n int) string {
	var b strings.Builder
	b.WriteString(`[{"role":"system","content":"You are a helpful shopping assistant."},{"role":"user","content":"Hi, I am jane.doe@example.com. `)
	for b.Len() < n-40 {
		b.WriteString("Please compare the two offers in my basket and tell me which is cheaper. ")
	}
	b.WriteString(`"}]`)
	return b.String()
}

// proseText is about n bytes of plain text with one e-mail address and one API key in it.
func proseText(n int) string {
	var b strings.Builder
	b.WriteString("Sure. I have sent the summary to jane.doe@example.com using key sk-proj-abcdefghijklmnopqrstuvwx. ")
	for b.Len() < n {
		b.WriteString("The first offer costs 12.99 per month and the second one 119 per year, which is cheaper. ")
	}
	return b.String()
}

func newSvcMetadata(tb testing.TB, next consumer.Traces) processor.Traces {
	f := svcmetadataprocessor.NewFactory()
	cfg := f.CreateDefaultConfig()
	loadConfig(tb, cfg, map[string]any{
		"masking": map[string]any{
			"builtin_rules": []any{"email", "card_number", "api_key"},
			"keys":          []any{"password"},
		},
	})
	return createTraces(tb, f, cfg, next)
}

func newContribRedaction(tb testing.TB, next consumer.Traces) processor.Traces {
	rf := redactionprocessor.NewFactory()
	rcfg := rf.CreateDefaultConfig()
	loadConfig(tb, rcfg, map[string]any{
		"allow_all_keys":       true,
		"redact_all_types":     true,
		"blocked_values":       toAny(contribBlockedValues),
		"blocked_key_patterns": []any{`svc\.observation\.metadata\.password`},
		"summary":              "silent",
	})
	// The batch is a third-party instrumentation's: the platform stores its metadata as it arrives
	// (docs/contract.md §7), so the job both pipelines are compared on is masking alone; no OTTL
	// encoding statement belongs in the contrib pipeline.
	return createTraces(tb, rf, rcfg, next)
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func loadConfig(tb testing.TB, cfg component.Config, raw map[string]any) {
	tb.Helper()
	if err := confmap.NewFromStringMap(raw).Unmarshal(cfg); err != nil {
		tb.Fatal(err)
	}
	if err := confmap.Validate(cfg); err != nil {
		tb.Fatal(err)
	}
}

func createTraces(tb testing.TB, f processor.Factory, cfg component.Config, next consumer.Traces) processor.Traces {
	tb.Helper()
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(f.Type()), cfg, next)
	if err != nil {
		tb.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

// perSpan is what one benchmark measured, per span.
type perSpan struct{ ns, allocs, bytes float64 }

// runPerSpan feeds copies of batch to p. Copies are made in rounds of copiesPerRound with the
// timer stopped, so that neither copying nor the timer's own bookkeeping is measured.
func runPerSpan(b *testing.B, p processor.Traces, batch ptrace.Traces) perSpan {
	const copiesPerRound = 64
	ctx := context.Background()
	copies := make([]ptrace.Traces, copiesPerRound)
	var before, after runtime.MemStats
	var mallocs, allocBytes uint64
	b.ResetTimer()
	for done := 0; done < b.N; {
		b.StopTimer()
		n := min(copiesPerRound, b.N-done)
		for i := range n {
			copies[i] = ptrace.NewTraces()
			batch.CopyTo(copies[i])
		}
		runtime.ReadMemStats(&before)
		b.StartTimer()
		for i := range n {
			if err := p.ConsumeTraces(ctx, copies[i]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.ReadMemStats(&after)
		mallocs += after.Mallocs - before.Mallocs
		allocBytes += after.TotalAlloc - before.TotalAlloc
		done += n
		b.StartTimer()
	}
	b.StopTimer()
	spans := float64(b.N * metadataSpansPerBatch)
	r := perSpan{
		ns:     float64(b.Elapsed().Nanoseconds()) / spans,
		allocs: float64(mallocs) / spans,
		bytes:  float64(allocBytes) / spans,
	}
	b.ReportMetric(r.ns, "ns/span")
	b.ReportMetric(r.allocs, "allocs/span")
	b.ReportMetric(r.bytes, "B/span")
	return r
}

// BenchmarkMetadata runs svcmetadata and contrib redaction on the same batch, in the
// same run, and logs the ratio of svcmetadata to contrib.
func BenchmarkMetadata(b *testing.B) {
	batch := metadataBatch()
	var svc, contrib perSpan
	b.Run("svcmetadata", func(b *testing.B) {
		svc = runPerSpan(b, newSvcMetadata(b, consumertest.NewNop()), batch)
	})
	b.Run("contrib_redaction", func(b *testing.B) {
		contrib = runPerSpan(b, newContribRedaction(b, consumertest.NewNop()), batch)
	})
	if contrib.ns > 0 && contrib.allocs > 0 {
		b.Logf("svcmetadata / contrib redaction: time %.2fx, allocs %.2fx, bytes %.2fx",
			svc.ns/contrib.ns, svc.allocs/contrib.allocs, svc.bytes/contrib.bytes)
	}
}

// TestMetadataBenchmarkPipelinesMask checks that both pipelines of the benchmark do the work
// they are compared on: the e-mail is gone from input, output and metadata, and the
// third-party metadata keeps its raw value.
func TestMetadataBenchmarkPipelinesMask(t *testing.T) {
	for name, build := range map[string]func(testing.TB, consumer.Traces) processor.Traces{
		"svcmetadata":       newSvcMetadata,
		"contrib_redaction": newContribRedaction,
	} {
		t.Run(name, func(t *testing.T) {
			sink := new(consumertest.TracesSink)
			p := build(t, sink)
			if err := p.ConsumeTraces(context.Background(), metadataBatch()); err != nil {
				t.Fatal(err)
			}
			attrs := sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
			for k, v := range attrs.All() {
				if strings.Contains(v.AsString(), "jane.doe@example.com") {
					t.Errorf("%s still holds the e-mail address", k)
				}
			}
			// A third-party span's metadata reaches the platform as it arrived (not JSON-encoded).
			env, _ := attrs.Get("svc.observation.metadata.env")
			if env.Str() != "prod" {
				t.Errorf("env = %q, want the raw string prod", env.Str())
			}
		})
	}
}
