package svcspanfilterprocessor

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/svc/svc-collector/pkg/svcattr"
	"go.opentelemetry.io/collector/pdata/pcommon"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Scopes of the test spans.
const (
	scopeSDK        = "svc-sdk"
	scopeOpenAI     = "opentelemetry.instrumentation.openai"
	scopeLiteLLM    = "litellm"
	scopeHTTPServer = "io.opentelemetry.http.server"
	scopeHTTPClient = "io.opentelemetry.http.client"
	scopeDB         = "io.opentelemetry.sql"
	scopeMyApp      = "my-app"
)

var genAIAttrs = map[string]any{"gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o"}

// goldenCase runs batches through the processor (with time passing between them where a case
// needs it), checks the tree the platform would receive, and compares the output with a golden file.
type goldenCase struct {
	name   string
	config func(*Config)
	steps  func(h *harness)
	// wantTree: delivered span name → parent span name ("" for a root). Spans not listed must not
	// be delivered.
	wantTree map[string]string
	// wantOriginalParent: delivered span name → the parent name recorded in
	// svc.original_parent_span_id. Re-parented spans must be listed; the others must not carry it.
	wantOriginalParent map[string]string
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			if tc.config != nil {
				tc.config(cfg)
			}
			h := newHarness(t, cfg)
			tc.steps(h)
			assert.Zero(t, int(h.p.mem.HeldSpans()), "spans still wait for their parent at the end of the case")
			h.shutdown()

			assert.Equal(t, tc.wantTree, h.tree(), "trees differ (span → parent)")
			for name, span := range h.delivered() {
				got, has := span.Attributes().Get(svcattr.OriginalParentSpanID)
				want, wantHas := tc.wantOriginalParent[name]
				if !assert.Equal(t, wantHas, has, "span %q: has %s", name, svcattr.OriginalParentSpanID) || !has {
					continue
				}
				id := idOf(want)
				assert.Equal(t, fmt.Sprintf("%x", id[:]), got.Str(), "span %q: original parent", name)
			}
			assertGolden(t, path.Join(tc.name, "input.json"), canonical(h.inputs))
			assertGolden(t, path.Join(tc.name, "output.json"), canonical(h.sink.AllTraces()))
		})
	}
}

func goldenCases() []goldenCase {
	return []goldenCase{
		{
			name: "default_filter",
			steps: func(h *harness) {
				h.consume(
					testSpan{name: "svc-sdk generation", scope: scopeSDK},
					testSpan{name: "openai chat", scope: scopeOpenAI},
					testSpan{name: "hand-made llm call", scope: scopeMyApp, attrs: genAIAttrs},
					testSpan{name: "GET /orders", scope: scopeHTTPServer, attrs: map[string]any{"http.request.method": "GET"}},
					testSpan{name: "SELECT orders", scope: scopeDB, attrs: map[string]any{"db.system": "postgresql"}},
				)
			},
			wantTree: map[string]string{"svc-sdk generation": "", "openai chat": "", "hand-made llm call": ""},
		},
		{
			// docs/contract.md §8: only names starting with `gen_ai.` (with the dot) are GenAI.
			name: "gen_ai_dot_vs_gen_ai_custom",
			steps: func(h *harness) {
				h.consume(
					testSpan{name: "gen_ai.dot", scope: scopeMyApp, attrs: map[string]any{"gen_ai.operation.name": "chat"}},
					testSpan{name: "gen_ai_custom", scope: scopeMyApp, attrs: map[string]any{"gen_ai_custom": "x", "gen_aix.y": 1}},
					testSpan{name: "bare gen_ai", scope: scopeMyApp, attrs: map[string]any{"gen_ai": true}},
				)
			},
			wantTree: map[string]string{"gen_ai.dot": ""},
		},
		{
			name:  "known_scopes",
			steps: func(h *harness) { h.consume(knownScopeSpans()...) },
			wantTree: func() map[string]string {
				want := map[string]string{}
				for _, s := range knownScopes {
					want["span of "+s.name] = ""
					if !s.exactOnly {
						want["span of "+s.name+".sub"] = ""
					}
				}
				return want
			}(),
		},
		{
			name: "keep_rules",
			config: func(cfg *Config) {
				cfg.Keep.InstrumentationScopes = []string{"my-company.agents"}
				cfg.Keep.AttributePrefixes = []string{"llm."}
				cfg.Keep.SpanNames = []string{"checkout-assistant"}
			},
			steps: func(h *harness) {
				h.consume(
					testSpan{name: "by scope", scope: "my-company.agents"},
					testSpan{name: "by sub-scope", scope: "my-company.agents.planner"},
					testSpan{name: "scope without boundary", scope: "my-company.agentsx"},
					testSpan{name: "by attribute prefix", scope: scopeMyApp, attrs: map[string]any{"llm.model": "m"}},
					testSpan{name: "checkout-assistant", scope: scopeMyApp},
					testSpan{name: "other", scope: scopeMyApp, attrs: map[string]any{"llmx": 1}},
					testSpan{name: "default still on", scope: scopeSDK},
				)
			},
			wantTree: map[string]string{"by scope": "", "by sub-scope": "", "by attribute prefix": "", "checkout-assistant": "", "default still on": ""},
		},
		{
			name: "default_filter_off",
			config: func(cfg *Config) {
				cfg.DefaultFilter = false
				cfg.Keep.InstrumentationScopes = []string{"my-company.agents"}
			},
			steps: func(h *harness) {
				h.consume(
					testSpan{name: "kept by rule", scope: "my-company.agents"},
					testSpan{name: "svc-sdk span", scope: scopeSDK},
					testSpan{name: "gen_ai span", scope: scopeMyApp, attrs: genAIAttrs},
					testSpan{name: "openai span", scope: scopeOpenAI},
				)
			},
			wantTree: map[string]string{"kept by rule": ""},
		},
		{
			name: "drop_rules_win",
			config: func(cfg *Config) {
				cfg.Keep.SpanNames = []string{"kept by name but dropped by attribute"}
				cfg.Drop.InstrumentationScopes = []string{"openinference"}
				cfg.Drop.AttributePrefixes = []string{"internal.debug."}
				cfg.Drop.SpanNames = []string{"health-check"}
			},
			steps: func(h *harness) {
				h.consume(
					testSpan{name: "openinference span", scope: "openinference.instrumentation.openai", attrs: genAIAttrs},
					testSpan{name: "debug llm", scope: scopeSDK, attrs: map[string]any{"internal.debug.prompt": "x"}},
					testSpan{name: "health-check", scope: scopeSDK},
					testSpan{name: "kept by name but dropped by attribute", scope: scopeMyApp, attrs: map[string]any{"internal.debug.x": 1}},
					testSpan{name: "untouched llm", scope: scopeSDK},
				)
			},
			wantTree: map[string]string{"untouched llm": ""},
		},
		{
			// The litellm / raw_gen_ai_request pair: only that span name in only that scope.
			name: "drop_scope_span_name",
			config: func(cfg *Config) {
				cfg.Drop.ScopeSpanNames = []ScopeSpanName{{InstrumentationScope: scopeLiteLLM, SpanName: "raw_gen_ai_request"}}
			},
			steps: func(h *harness) {
				h.consume(
					testSpan{name: "litellm_request", scope: scopeLiteLLM},
					testSpan{name: "raw_gen_ai_request", scope: scopeLiteLLM, parent: "litellm_request", attrs: genAIAttrs},
					testSpan{name: "openai chat", scope: scopeOpenAI, parent: "raw_gen_ai_request", attrs: genAIAttrs},
				)
			},
			wantTree:           map[string]string{"litellm_request": "", "openai chat": "litellm_request"},
			wantOriginalParent: map[string]string{"openai chat": "raw_gen_ai_request"},
		},
		{
			name:   "sampling_matches_sdk",
			config: func(cfg *Config) { cfg.SampleRate = 0.5 },
			steps: func(h *harness) {
				var spans []testSpan
				for i, id := range samplingTraceIDs() {
					spans = append(spans, testSpan{name: fmt.Sprintf("llm %02d", i), scope: scopeSDK, trace: id})
				}
				h.consume(spans...)
			},
			wantTree: func() map[string]string {
				want := map[string]string{}
				sampler := sdktrace.TraceIDRatioBased(0.5)
				for i, id := range samplingTraceIDs() {
					res := sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: trace.TraceID(id)})
					if res.Decision == sdktrace.RecordAndSample {
						want[fmt.Sprintf("llm %02d", i)] = ""
					}
				}
				return want
			}(),
		},
		{
			// docs/contract.md §9: experiments must not be sampled; the trace below is sampled out at any rate < 1.
			name:   "experiments_never_sampled",
			config: func(cfg *Config) { cfg.SampleRate = 0.01 },
			steps: func(h *harness) {
				out := pcommon.TraceID{0xcc, 8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff}
				h.consume(
					testSpan{name: "experiment item", scope: scopeSDK, trace: out, attrs: map[string]any{"svc.experiment.item.version": "v3"}},
					testSpan{name: "experiment task", scope: scopeSDK, trace: out, parent: "experiment item", attrs: map[string]any{"svc.environment": "sdk-experiment"}},
					testSpan{name: "production llm", scope: scopeSDK, trace: out, parent: "experiment item", attrs: map[string]any{"svc.environment": "production"}},
					testSpan{name: "experiment http", scope: scopeHTTPClient, trace: out, parent: "experiment task", attrs: map[string]any{"svc.environment": "sdk-experiment"}},
				)
			},
			// Per trace (issue 16.2): the item marks the trace, so its production span is kept too.
			wantTree: map[string]string{"experiment item": "", "experiment task": "experiment item", "production llm": "experiment item"},
		},
		{
			// The child arrives first, then its dropped parent, then the kept grandparent.
			name: "reparent_parent_dropped_grandparent_kept_across_batches",
			steps: func(h *harness) {
				h.consume(testSpan{name: "llm call", scope: scopeOpenAI, parent: "POST /v1/chat"})
				h.consume(testSpan{name: "POST /v1/chat", scope: scopeHTTPClient, parent: "agent"})
				h.consume(testSpan{name: "agent", scope: scopeSDK})
			},
			wantTree:           map[string]string{"llm call": "agent", "agent": ""},
			wantOriginalParent: map[string]string{"llm call": "POST /v1/chat"},
		},
		{
			name: "reparent_whole_chain_dropped",
			steps: func(h *harness) {
				h.consume(testSpan{name: "llm call", scope: scopeOpenAI, parent: "handler"})
				h.consume(
					testSpan{name: "handler", scope: scopeMyApp, parent: "GET /ask"},
					testSpan{name: "GET /ask", scope: scopeHTTPServer},
				)
			},
			wantTree:           map[string]string{"llm call": ""},
			wantOriginalParent: map[string]string{"llm call": "handler"},
		},
		{
			name: "reparent_parent_arrives_after_child",
			steps: func(h *harness) {
				h.consume(testSpan{name: "tool call", scope: scopeSDK, parent: "agent"})
				h.consume(testSpan{name: "agent", scope: scopeSDK})
			},
			wantTree: map[string]string{"tool call": "agent", "agent": ""},
		},
		{
			// The trace's memory resolves a late child at once, without a wait.
			name: "reparent_late_child_resolved_from_memory",
			steps: func(h *harness) {
				h.consume(
					testSpan{name: "agent", scope: scopeSDK},
					testSpan{name: "GET /weather", scope: scopeHTTPClient, parent: "agent"},
				)
				h.consume(testSpan{name: "late llm call", scope: scopeOpenAI, parent: "GET /weather"})
				require.Contains(h.t, h.delivered(), "late llm call", "the late child must not wait")
			},
			wantTree:           map[string]string{"agent": "", "late llm call": "agent"},
			wantOriginalParent: map[string]string{"late llm call": "GET /weather"},
		},
		{
			// The parent lives in a service that does not send to this gateway: rule 1, the span keeps
			// its parent id (the platform joins it if the parent ever arrives there).
			name: "parent_never_arrives_keeps_parent_after_wait",
			steps: func(h *harness) {
				h.consume(testSpan{name: "llm call", scope: scopeSDK, parentID: idOf("remote caller")})
				h.advance(defaultWaitDuration - time.Millisecond)
				require.Empty(h.t, h.delivered(), "released before the wait ended")
				h.advance(time.Millisecond)
			},
			wantTree: map[string]string{"llm call": "<" + hexID("remote caller") + ">"},
		},
		{
			// A dropped HTTP span of a tool ends after its kept child was delivered: a connector.
			name: "connector_for_dropped_parent_ending_late",
			steps: func(h *harness) {
				h.consume(testSpan{name: "agent", scope: scopeSDK})
				h.consume(testSpan{name: "chat", scope: scopeOpenAI, parent: "GET /tool", attrs: genAIAttrs})
				h.advance(defaultWaitDuration)
				h.consume(testSpan{name: "GET /tool", scope: scopeHTTPClient, parent: "agent", attrs: map[string]any{"http.request.method": "GET"}})
			},
			wantTree: map[string]string{"agent": "", "chat": "GET /tool", "GET /tool": "agent"},
		},
		{
			// The item marks its (sampled-out) trace as an experiment: spans after it are kept, the span
			// sampled out before it stays dropped.
			name:   "experiment_marks_trace",
			config: func(cfg *Config) { cfg.SampleRate = 0.01 },
			steps: func(h *harness) {
				out := pcommon.TraceID{0xcc, 8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff}
				h.consume(testSpan{name: "sampled out before", scope: scopeSDK, trace: out})
				h.consume(testSpan{name: "experiment item", scope: scopeSDK, trace: out, parent: "sampled out before", attrs: map[string]any{"svc.experiment.id": "e1"}})
				h.consume(testSpan{name: "task llm", scope: scopeOpenAI, trace: out, parent: "experiment item", attrs: genAIAttrs})
			},
			wantTree:           map[string]string{"experiment item": "", "task llm": "experiment item"},
			wantOriginalParent: map[string]string{"experiment item": "sampled out before"},
		},
		{
			// An agent trace in one batch, as the end-to-end test sends it.
			name: "agent_trace_one_batch",
			steps: func(h *harness) {
				h.consume(agentTrace(defaultTraceID)...)
			},
			wantTree: map[string]string{
				"agent run":       "",
				"plan":            "agent run",
				"chat gpt-4o":     "plan",
				"tool get_order":  "agent run",
				"chat gpt-4o (2)": "agent run",
			},
			wantOriginalParent: map[string]string{"agent run": "POST /support", "chat gpt-4o": "POST /v1/chat/completions"},
		},
	}
}

// agentTrace is an agent behind an HTTP endpoint, calling an LLM through HTTP, a tool that reads a
// database, and a second LLM call. Only the GenAI spans are for the platform.
func agentTrace(traceID pcommon.TraceID) []testSpan {
	return []testSpan{
		{name: "chat gpt-4o", scope: scopeOpenAI, parent: "POST /v1/chat/completions", trace: traceID, attrs: genAIAttrs},
		{name: "POST /v1/chat/completions", scope: scopeHTTPClient, parent: "plan", trace: traceID},
		{name: "plan", scope: scopeSDK, parent: "agent run", trace: traceID},
		{name: "SELECT orders", scope: scopeDB, parent: "GET /orders/42", trace: traceID},
		{name: "GET /orders/42", scope: scopeHTTPClient, parent: "tool get_order", trace: traceID},
		{name: "tool get_order", scope: scopeMyApp, parent: "agent run", trace: traceID, attrs: map[string]any{"gen_ai.tool.name": "get_order"}},
		{name: "chat gpt-4o (2)", scope: scopeMyApp, parent: "agent run", trace: traceID, attrs: genAIAttrs},
		{name: "agent run", scope: scopeSDK, parent: "POST /support", trace: traceID},
		{name: "POST /support", scope: scopeHTTPServer, trace: traceID},
	}
}

// knownScopeSpans has a span for every known scope and sub-scope, and spans of look-alike scopes
// that the boundary-aware match must not take.
func knownScopeSpans() []testSpan {
	var spans []testSpan
	for _, s := range knownScopes {
		spans = append(spans, testSpan{name: "span of " + s.name, scope: s.name})
		spans = append(spans, testSpan{name: "span of " + s.name + ".sub", scope: s.name + ".sub"})
		spans = append(spans, testSpan{name: "span of " + s.name + "x", scope: s.name + "x"})
	}
	for _, scope := range []string{"opentelemetry.instrumentation", "opentelemetry.instrumentation.requests", "litellm-proxy", "sdk"} {
		spans = append(spans, testSpan{name: "span of " + scope, scope: scope})
	}
	return spans
}

// samplingTraceIDs are random trace ids, fixed by the seed.
func samplingTraceIDs() []pcommon.TraceID {
	rng := rand.New(rand.NewPCG(7, 7))
	ids := make([]pcommon.TraceID, 16)
	for i := range ids {
		binary.BigEndian.PutUint64(ids[i][:8], rng.Uint64())
		binary.BigEndian.PutUint64(ids[i][8:], rng.Uint64())
	}
	return ids
}

// The filter must agree with the SDK sampler on far more ids than a golden file can show.
func TestSamplingAgreesWithSDKOnManyTraces(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, rate := range []float64{0.001, 0.1, 0.5, 0.9} {
		cfg := createDefaultConfig().(*Config)
		cfg.SampleRate = rate
		f := newSpanFilter(cfg)
		sampler := sdktrace.TraceIDRatioBased(rate)
		td := batch(testSpan{name: "llm", scope: scopeMyApp, attrs: genAIAttrs})
		span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		var v scopeVerdict
		f.forScope(td.ResourceSpans().At(0).ScopeSpans().At(0).Scope(), &v)
		for range 20_000 {
			var id pcommon.TraceID
			binary.BigEndian.PutUint64(id[:8], rng.Uint64())
			binary.BigEndian.PutUint64(id[8:], rng.Uint64())
			span.SetTraceID(id)
			sdkKeeps := sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: trace.TraceID(id)}).Decision == sdktrace.RecordAndSample
			got := f.decide(&v, span)
			require.Equal(t, sdkKeeps, got.kept(), "rate %v trace %s: decision %s", rate, id, got.reason())
		}
	}
}
