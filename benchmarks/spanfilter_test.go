package benchmarks

import (
	"context"
	"encoding/binary"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/filterprocessor"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/featuregate"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/svc/svc-collector/svcspanfilterprocessor"
)

// knownScopeRegexp is the svc default filter's known-scope list written as a user would write it
// in OTTL: a prefix followed by the end or ".", plus "ai" exactly.
const knownScopeRegexp = `^(svc-sdk|agent_framework|autogen-core|haystack|langsmith|litellm|openinference|pydantic-ai|` +
	`strands-agents|vllm|opentelemetry\\.instrumentation\\.(agno|alephalpha|anthropic|aws_bedrock|bedrock|cohere|` +
	`crewai|gemini|google_genai|google_generativeai|groq|haystack|langchain|llamaindex|mistralai|ollama|openai|` +
	`openai_agents|openai_v2|replicate|sagemaker|together|transformers|vertex_ai|vertexai|voyageai|watsonx|writer))(\\..*)?$`

// ottlDropCondition drops what the svc default filter does not keep: not the svc-sdk scope, not a
// known scope, and no attribute name starting with "gen_ai.". The attribute test needs OTTL's
// lambdas (feature gate ottl.functions.enableLambda, alpha in v0.161.0).
var ottlDropCondition = `not (instrumentation_scope.name == "ai" or IsMatch(instrumentation_scope.name, "` +
	knownScopeRegexp + `") or Any(span.attributes, (k, _) => HasPrefix(k, "gen_ai.")))`

func newSvcSpanFilter(b testing.TB) processor.Traces {
	factory := svcspanfilterprocessor.NewFactory()
	proc, err := factory.CreateTraces(context.Background(), processortest.NewNopSettings(factory.Type()),
		factory.CreateDefaultConfig(), consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	return proc
}

func newOTTLFilter(b testing.TB) processor.Traces {
	if err := featuregate.GlobalRegistry().Set("ottl.functions.enableLambda", true); err != nil {
		b.Fatal(err)
	}
	factory := filterprocessor.NewFactory()
	cfg := factory.CreateDefaultConfig()
	conf := confmap.NewFromStringMap(map[string]any{
		"error_mode": "propagate",
		"traces":     map[string]any{"span": []any{ottlDropCondition}},
	})
	if err := conf.Unmarshal(cfg); err != nil {
		b.Fatal(err)
	}
	if err := confmap.Validate(cfg); err != nil {
		b.Fatal(err)
	}
	proc, err := factory.CreateTraces(context.Background(), processortest.NewNopSettings(factory.Type()), cfg, consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	return proc
}

// agentTraceSpans is one trace of an agent behind an HTTP endpoint: 24 spans, 9 of them GenAI (the
// agent, 4 LLM calls, 4 tools); each span has 20-40 attributes.
type benchSpan struct {
	name, scope, parent string
	attrs               int  // total attributes on the span
	genAI               bool // whether some attribute names start with gen_ai.
}

func agentTraceSpans() []benchSpan {
	spans := []benchSpan{
		{name: "POST /support", scope: "io.opentelemetry.http.server", attrs: 25},
		{name: "agent run", scope: "svc-sdk", parent: "POST /support", attrs: 30},
	}
	for i := range 4 {
		llm := fmt.Sprintf("chat %d", i)
		spans = append(spans,
			benchSpan{name: llm, scope: "opentelemetry.instrumentation.openai", parent: "agent run", attrs: 36, genAI: true},
			benchSpan{name: "POST /v1/chat/completions " + llm, scope: "io.opentelemetry.http.client", parent: llm, attrs: 25},
		)
		step := fmt.Sprintf("step %d", i)
		tool := fmt.Sprintf("tool %d", i)
		if i < 2 {
			spans = append(spans, benchSpan{name: step, scope: "my-app", parent: "agent run", attrs: 22})
		} else {
			step = "agent run"
		}
		spans = append(spans,
			benchSpan{name: tool, scope: "my-app", parent: step, attrs: 28, genAI: true},
			benchSpan{name: "SELECT 1 " + tool, scope: "io.opentelemetry.sql", parent: tool, attrs: 20},
			benchSpan{name: "SELECT 2 " + tool, scope: "io.opentelemetry.sql", parent: tool, attrs: 20},
		)
	}
	return spans
}

func spanIDOf(trace int, name string) pcommon.SpanID {
	var id pcommon.SpanID
	h := uint64(14695981039346656037)
	for _, c := range []byte(name) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	binary.BigEndian.PutUint64(id[:], h^uint64(trace))
	return id
}

// realisticBatch has `traces` agent traces, grouped by scope as an SDK's exporter sends them.
func realisticBatch(traces int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "support-agent")
	rs.Resource().Attributes().PutStr("telemetry.sdk.language", "go")
	scopes := map[string]ptrace.ScopeSpans{}
	for t := range traces {
		var traceID pcommon.TraceID
		binary.BigEndian.PutUint64(traceID[8:], uint64(t+1)*0x9e3779b97f4a7c15)
		for _, s := range agentTraceSpans() {
			ss, ok := scopes[s.scope]
			if !ok {
				ss = rs.ScopeSpans().AppendEmpty()
				ss.Scope().SetName(s.scope)
				scopes[s.scope] = ss
			}
			span := ss.Spans().AppendEmpty()
			span.SetName(s.name)
			span.SetTraceID(traceID)
			span.SetSpanID(spanIDOf(t, s.name))
			if s.parent != "" {
				span.SetParentSpanID(spanIDOf(t, s.parent))
			}
			attrs := span.Attributes()
			if s.genAI {
				attrs.PutStr("gen_ai.system", "openai")
				attrs.PutStr("gen_ai.request.model", "gpt-4o")
				attrs.PutInt("gen_ai.usage.input_tokens", 812)
			}
			// Non-GenAI attributes first in the remaining slots, as instrumentations put them.
			for a := attrs.Len(); a < s.attrs; a++ {
				attrs.PutStr(fmt.Sprintf("app.detail.%02d", a), "some value of moderate length")
			}
			if s.genAI {
				// Move the gen_ai. ones to the end: the worst case for a scan.
				genAI := pcommon.NewMap()
				attrs.CopyTo(genAI)
				attrs.RemoveIf(func(k string, _ pcommon.Value) bool { return strings.HasPrefix(k, "gen_ai.") })
				genAI.RemoveIf(func(k string, _ pcommon.Value) bool { return !strings.HasPrefix(k, "gen_ai.") })
				for k, v := range genAI.All() {
					v.CopyTo(attrs.PutEmpty(k))
				}
			}
		}
	}
	return td
}

// withFreshTraceIDs gives every trace of the copy a new id, as a gateway sees new traces all the time.
func withFreshTraceIDs(src ptrace.Traces, round uint64) ptrace.Traces {
	td := ptrace.NewTraces()
	src.CopyTo(td)
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				id := spans.At(k).TraceID()
				binary.BigEndian.PutUint64(id[:8], round)
				spans.At(k).SetTraceID(id)
			}
		}
	}
	return td
}

const benchTraces = 20 // 480 spans per batch

// BenchmarkSpanFilter compares the svcspanfilter processor's default filter (with its trace
// integrity on, as it always is) with contrib's filterprocessor making the same keep/drop decision
// in OTTL, on the same batches of realistic spans in the same run.
func BenchmarkSpanFilter(b *testing.B) {
	for _, bc := range []struct {
		name string
		new  func(testing.TB) processor.Traces
	}{
		{name: "svcspanfilter", new: newSvcSpanFilter},
		{name: "filterprocessor_ottl", new: newOTTLFilter},
	} {
		b.Run(bc.name, func(b *testing.B) {
			proc := bc.new(b)
			if err := proc.Start(context.Background(), componenttest.NewNopHost()); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = proc.Shutdown(context.Background()) }()
			measureTraces(b, proc, realisticBatch(benchTraces))
		})
	}
}

// measureTraces runs proc over fresh-trace copies of src and reports ns and allocations per span.
func measureTraces(b *testing.B, proc processor.Traces, src ptrace.Traces) {
	b.Helper()
	spansPerBatch := src.SpanCount()

	const chunk = 32 // batches copied with the timer stopped, then processed with it running
	var mallocs uint64
	var ms runtime.MemStats
	round := uint64(0)
	b.ResetTimer()
	b.StopTimer()
	for done := 0; done < b.N; {
		n := min(chunk, b.N-done)
		batches := make([]ptrace.Traces, n)
		for i := range batches {
			round++
			batches[i] = withFreshTraceIDs(src, round)
		}
		// The copies' garbage is collected here, so that the timed part pays only for its own.
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		b.StartTimer()
		for _, td := range batches {
			if err := proc.ConsumeTraces(context.Background(), td); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - before
		done += n
	}
	spans := float64(b.N) * float64(spansPerBatch)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/spans, "ns/span")
	b.ReportMetric(float64(mallocs)/spans, "allocs/span")
}

// The benchmark compares like with like only if both processors keep the same spans.
func TestSpanFilterAndOTTLKeepTheSameSpans(t *testing.T) {
	keptNames := func(proc processor.Traces, sink *consumertest.TracesSink) []string {
		t.Helper()
		if err := proc.ConsumeTraces(context.Background(), realisticBatch(3)); err != nil {
			t.Fatal(err)
		}
		if err := proc.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, td := range sink.AllTraces() {
			rss := td.ResourceSpans()
			for i := 0; i < rss.Len(); i++ {
				sss := rss.At(i).ScopeSpans()
				for j := 0; j < sss.Len(); j++ {
					for k := 0; k < sss.At(j).Spans().Len(); k++ {
						s := sss.At(j).Spans().At(k)
						names = append(names, s.TraceID().String()+" "+s.Name())
					}
				}
			}
		}
		slices.Sort(names)
		return names
	}

	svcSink := new(consumertest.TracesSink)
	factory := svcspanfilterprocessor.NewFactory()
	svc, err := factory.CreateTraces(context.Background(), processortest.NewNopSettings(factory.Type()), factory.CreateDefaultConfig(), svcSink)
	if err != nil {
		t.Fatal(err)
	}
	ottlSink := new(consumertest.TracesSink)
	if err := featuregate.GlobalRegistry().Set("ottl.functions.enableLambda", true); err != nil {
		t.Fatal(err)
	}
	ff := filterprocessor.NewFactory()
	cfg := ff.CreateDefaultConfig()
	if err := confmap.NewFromStringMap(map[string]any{"traces": map[string]any{"span": []any{ottlDropCondition}}}).Unmarshal(cfg); err != nil {
		t.Fatal(err)
	}
	ottl, err := ff.CreateTraces(context.Background(), processortest.NewNopSettings(ff.Type()), cfg, ottlSink)
	if err != nil {
		t.Fatal(err)
	}

	svcKept, ottlKept := keptNames(svc, svcSink), keptNames(ottl, ottlSink)
	if len(svcKept) != 3*9 {
		t.Fatalf("svcspanfilter kept %d spans of 3 agent traces, want 27 (9 GenAI spans each): %v", len(svcKept), svcKept)
	}
	if !slices.Equal(svcKept, ottlKept) {
		t.Fatalf("the two processors keep different spans:\nsvcspanfilter: %v\nfilterprocessor: %v", svcKept, ottlKept)
	}
	if !regexp.MustCompile(strings.ReplaceAll(knownScopeRegexp, `\\`, `\`)).MatchString("openinference.instrumentation.openai") {
		t.Fatal("the OTTL scope regexp does not take a sub-scope of a known scope")
	}
}
