package svcspanfilterprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// decideOne runs the filter of cfg on a single span.
func decideOne(t *testing.T, cfg *Config, s testSpan) decision {
	t.Helper()
	require.NoError(t, cfg.Validate())
	f := newSpanFilter(cfg)
	ss := batch(s).ResourceSpans().At(0).ScopeSpans().At(0)
	var v scopeVerdict
	f.forScope(ss.Scope(), &v)
	return f.decide(&v, ss.Spans().At(0))
}

func TestDecide(t *testing.T) {
	sampledOut := pcommon.TraceID{15: 0xff, 14: 0xff, 13: 0xff, 12: 0xff, 11: 0xff, 10: 0xff, 9: 0xff, 8: 0xff}
	tests := []struct {
		name   string
		config func(*Config)
		span   testSpan
		want   decision
	}{
		{name: "svc-sdk scope", span: testSpan{scope: "svc-sdk"}, want: keptSvcSDKScope},
		{name: "svc-sdk sub-scope is a known scope", span: testSpan{scope: "svc-sdk.tracing"}, want: keptKnownScope},
		{name: "known scope", span: testSpan{scope: "pydantic-ai"}, want: keptKnownScope},
		{name: "ai exactly", span: testSpan{scope: "ai"}, want: keptKnownScope},
		{name: "ai sub-scope is not known", span: testSpan{scope: "ai.telemetry"}, want: droppedNotGenAI},
		{name: "gen_ai. attribute", span: testSpan{scope: "x", attrs: map[string]any{"http.method": "GET", "gen_ai.usage.input_tokens": 3}}, want: keptGenAIAttribute},
		{name: "gen_ai_custom attribute", span: testSpan{scope: "x", attrs: map[string]any{"gen_ai_custom": 1}}, want: droppedNotGenAI},
		{name: "gen_ai. resource-like value does not count", span: testSpan{scope: "x", attrs: map[string]any{"note": "gen_ai.system"}}, want: droppedNotGenAI},
		{name: "no scope, no attribute", span: testSpan{scope: ""}, want: droppedNotGenAI},
		// Beyond the svc SDKs' filter: OpenInference JS scopes, and openinference.span.kind anywhere.
		{name: "openinference JS openai scope", span: testSpan{scope: "@arizeai/openinference-instrumentation-openai"}, want: keptKnownScope},
		{name: "openinference JS langchain scope", span: testSpan{scope: "@arizeai/openinference-instrumentation-langchain"}, want: keptKnownScope},
		{name: "openinference JS core is no instrumentation", span: testSpan{scope: "@arizeai/openinference-core"}, want: droppedNotGenAI},
		{name: "openinference python scope", span: testSpan{scope: "openinference.instrumentation.openai"}, want: keptKnownScope},
		{name: "openinference.span.kind in any scope", span: testSpan{scope: "my-agent", attrs: map[string]any{"openinference.span.kind": "CHAIN"}}, want: keptGenAIAttribute},
		{name: "other openinference attributes alone do not count", span: testSpan{scope: "my-agent", attrs: map[string]any{"llm.model_name": "m", "input.value": "hi"}}, want: droppedNotGenAI},
		{
			name: "drop scope narrows the openinference JS default",
			config: func(c *Config) {
				c.Drop.InstrumentationScopes = []string{"@arizeai/openinference-instrumentation-langchain"}
			},
			span: testSpan{scope: "@arizeai/openinference-instrumentation-langchain", attrs: map[string]any{"openinference.span.kind": "CHAIN"}}, want: droppedDropRule,
		},
		{
			name:   "drop span name narrows openinference.span.kind",
			config: func(c *Config) { c.Drop.SpanNames = []string{"RunnableSequence"} },
			span:   testSpan{name: "RunnableSequence", scope: "my-agent", attrs: map[string]any{"openinference.span.kind": "CHAIN"}}, want: droppedDropRule,
		},
		{
			name:   "drop attribute prefix narrows openinference.span.kind",
			config: func(c *Config) { c.Drop.AttributePrefixes = []string{"openinference.span.kind"} },
			span:   testSpan{scope: "@arizeai/openinference-instrumentation-openai", attrs: map[string]any{"openinference.span.kind": "LLM"}}, want: droppedDropRule,
		},
		{
			name:   "default off: openinference.span.kind alone is not kept",
			config: func(c *Config) { c.DefaultFilter = false; c.Keep.SpanNames = []string{"x"} },
			span:   testSpan{scope: "@arizeai/openinference-instrumentation-openai", attrs: map[string]any{"openinference.span.kind": "LLM"}}, want: droppedNotGenAI,
		},
		{
			name:   "keep scope",
			config: func(c *Config) { c.Keep.InstrumentationScopes = []string{"acme"} },
			span:   testSpan{scope: "acme.agents"}, want: keptKeepRule,
		},
		{
			name:   "keep attribute prefix",
			config: func(c *Config) { c.Keep.AttributePrefixes = []string{"llm."} },
			span:   testSpan{scope: "x", attrs: map[string]any{"llm.model": "m"}}, want: keptKeepRule,
		},
		{
			name:   "gen_ai. reported before a keep attribute",
			config: func(c *Config) { c.Keep.AttributePrefixes = []string{"llm."} },
			span:   testSpan{scope: "x", attrs: map[string]any{"llm.model": "m", "gen_ai.system": "s"}}, want: keptGenAIAttribute,
		},
		{
			name:   "keep span name",
			config: func(c *Config) { c.Keep.SpanNames = []string{"answer"} },
			span:   testSpan{name: "answer", scope: "x"}, want: keptKeepRule,
		},
		{
			name:   "gen_ai. reported before a keep span name",
			config: func(c *Config) { c.Keep.SpanNames = []string{"answer"} },
			span:   testSpan{name: "answer", scope: "x", attrs: genAIAttrs}, want: keptGenAIAttribute,
		},
		{
			name:   "gen_ai. reported before a keep scope",
			config: func(c *Config) { c.Keep.InstrumentationScopes = []string{"acme"} },
			span:   testSpan{scope: "acme", attrs: genAIAttrs}, want: keptGenAIAttribute,
		},
		{
			name:   "keep span name is exact",
			config: func(c *Config) { c.Keep.SpanNames = []string{"answer"} },
			span:   testSpan{name: "answer2", scope: "x"}, want: droppedNotGenAI,
		},
		{
			name:   "drop scope beats svc-sdk",
			config: func(c *Config) { c.Drop.InstrumentationScopes = []string{"svc-sdk"} },
			span:   testSpan{scope: "svc-sdk"}, want: droppedDropRule,
		},
		{
			name:   "drop attribute beats gen_ai.",
			config: func(c *Config) { c.Drop.AttributePrefixes = []string{"gen_ai.prompt"} },
			span:   testSpan{scope: "openinference", attrs: map[string]any{"gen_ai.prompt.0": "hi"}}, want: droppedDropRule,
		},
		{
			name:   "drop span name beats keep span name",
			config: func(c *Config) { c.Keep.SpanNames = []string{"ping"}; c.Drop.SpanNames = []string{"ping"} },
			span:   testSpan{name: "ping", scope: "x"}, want: droppedDropRule,
		},
		{
			name: "scope + span name drops in that scope",
			config: func(c *Config) {
				c.Drop.ScopeSpanNames = []ScopeSpanName{{InstrumentationScope: "litellm", SpanName: "raw_gen_ai_request"}}
			},
			span: testSpan{name: "raw_gen_ai_request", scope: "litellm.proxy"}, want: droppedDropRule,
		},
		{
			name: "scope + span name keeps the name in another scope",
			config: func(c *Config) {
				c.Drop.ScopeSpanNames = []ScopeSpanName{{InstrumentationScope: "litellm", SpanName: "raw_gen_ai_request"}}
			},
			span: testSpan{name: "raw_gen_ai_request", scope: "openinference", attrs: genAIAttrs}, want: keptKnownScope,
		},
		{
			name: "scope + span name keeps another name in the scope",
			config: func(c *Config) {
				c.Drop.ScopeSpanNames = []ScopeSpanName{{InstrumentationScope: "litellm", SpanName: "raw_gen_ai_request"}}
			},
			span: testSpan{name: "litellm_request", scope: "litellm"}, want: keptKnownScope,
		},
		{
			name:   "sampled out",
			config: func(c *Config) { c.SampleRate = 0.5 },
			span:   testSpan{scope: "svc-sdk", trace: sampledOut}, want: droppedSampledOut,
		},
		{
			name:   "sampled out but an experiment item",
			config: func(c *Config) { c.SampleRate = 0.5 },
			span:   testSpan{scope: "svc-sdk", trace: sampledOut, attrs: map[string]any{"svc.experiment.id": "e1"}}, want: keptSvcSDKScope,
		},
		{
			name:   "sampled out but in the sdk-experiment environment",
			config: func(c *Config) { c.SampleRate = 0.5 },
			span:   testSpan{scope: "x", trace: sampledOut, attrs: map[string]any{"gen_ai.system": "s", "svc.environment": "sdk-experiment"}}, want: keptGenAIAttribute,
		},
		{
			name:   "another environment is sampled",
			config: func(c *Config) { c.SampleRate = 0.5 },
			span:   testSpan{scope: "svc-sdk", trace: sampledOut, attrs: map[string]any{"svc.environment": "production"}}, want: droppedSampledOut,
		},
		{
			name:   "experiment spans still need a keep rule",
			config: func(c *Config) { c.SampleRate = 0.5 },
			span:   testSpan{scope: "x", trace: sampledOut, attrs: map[string]any{"svc.experiment.id": "e1"}}, want: droppedNotGenAI,
		},
		{
			name:   "experiment spans still obey drop rules",
			config: func(c *Config) { c.Drop.SpanNames = []string{"noise"} },
			span:   testSpan{name: "noise", scope: "svc-sdk", attrs: map[string]any{"svc.experiment.id": "e1"}}, want: droppedDropRule,
		},
		{
			name:   "default off",
			config: func(c *Config) { c.DefaultFilter = false; c.Keep.SpanNames = []string{"x"} },
			span:   testSpan{scope: "svc-sdk", attrs: genAIAttrs}, want: droppedNotGenAI,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			if tt.config != nil {
				tt.config(cfg)
			}
			if tt.span.name == "" {
				tt.span.name = "span"
			}
			got := decideOne(t, cfg, tt.span)
			assert.Equal(t, tt.want.reason(), got.reason())
		})
	}
}

// The keep and drop rules' scopes match boundary-aware (pkg/scopematch has the matcher's table).
func TestRuleScopesMatchBoundaryAware(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.DefaultFilter = false
	cfg.Keep.InstrumentationScopes = []string{"acme", "org.team.agents"}
	cfg.Drop.InstrumentationScopes = []string{"acme", "org.team.agents"}
	f := newSpanFilter(cfg)
	for scope, want := range map[string]bool{
		"acme":                true,
		"acme.sub.deeper":     true,
		"acmex":               false,
		"acme-sub":            false,
		"org.team.agents.x":   true,
		"org.team":            false,
		"org.team.agentsmith": false,
		"x.acme":              false,
	} {
		assert.Equal(t, want, f.keep.scopes.Match(scope), "keep scope %q", scope)
		assert.Equal(t, want, f.drop.scopes.Match(scope), "drop scope %q", scope)
	}
	none := newSpanFilter(createDefaultConfig().(*Config))
	assert.False(t, none.keep.scopes.Match("acme"), "no rules match nothing")
	assert.False(t, none.drop.scopes.Match("acme"), "no rules match nothing")
}

// The default filter decides each span without allocating: it is on the path of every span.
func TestDefaultFilterDoesNotAllocate(t *testing.T) {
	f := newSpanFilter(createDefaultConfig().(*Config))
	td := realisticBatch()
	var v scopeVerdict
	allocs := testing.AllocsPerRun(100, func() {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				f.forScope(sss.At(j).Scope(), &v)
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					f.decide(&v, spans.At(k))
				}
			}
		}
	})
	assert.Zero(t, allocs)
}

// realisticBatch has spans with 20-40 attributes, GenAI and not, as an instrumented agent sends them.
func realisticBatch() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	for _, scope := range []string{"io.opentelemetry.http.client", "opentelemetry.instrumentation.openai", "my-app"} {
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(scope)
		for i := range 10 {
			s := ss.Spans().AppendEmpty()
			s.SetName("span")
			for a := range 20 + i*2 {
				s.Attributes().PutStr("app.attribute."+string(rune('a'+a)), "value")
			}
			if scope == "my-app" && i%2 == 0 {
				s.Attributes().PutStr("gen_ai.system", "openai")
			}
		}
	}
	return td
}

// decide is the per-span decision of a span on its own (the trace's experiment flag aside).
func (f *spanFilter) decide(v *scopeVerdict, span ptrace.Span) decision {
	reason, d := f.judge(v, span, time.Time{})
	if d.Verdict == tracememory.KeepIfExperiment && !d.MarksExperiment {
		return droppedSampledOut
	}
	return reason
}
