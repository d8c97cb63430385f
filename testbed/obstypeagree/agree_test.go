// Package obstypeagree holds the gateway's reading of the platform's observation-type rules
// (pkg/observation, used by the svcevaluator connector) against the local platform's
// (testbed/platform), which is written from the rules by itself: the same mistake would have to be
// made twice to pass. The cases are the rules of docs/contract.md §14.3, each with the span that
// takes it and the spans that must fall through it.
package obstypeagree

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/observation"
	"github.com/svc/svc-collector/testbed/platform"
)

type span struct {
	scope, scopeVersion string
	language            string // resource telemetry.sdk.language
	attrs               map[string]any
}

func TestObservationTypeAgrees(t *testing.T) {
	const sdk = "svc-sdk"
	py := func(version string, attrs map[string]any) span {
		return span{scope: sdk, scopeVersion: version, language: "python", attrs: attrs}
	}
	a := func(attrs map[string]any) span { return span{scope: "any", attrs: attrs} }
	generationKey := map[string]any{"svc.observation.type": "span", "svc.observation.model.name": "gpt-4o"}

	tests := []struct {
		name string
		span span
		want string
	}{
		// 0: old Python SDK "span" with a generation field.
		{"0 python 3.3 span with model", py("3.3.0", generationKey), platform.TypeGeneration},
		{"0 python without version", py("", generationKey), platform.TypeGeneration},
		{"0 python 2.60", py("2.60.1", generationKey), platform.TypeGeneration},
		{"0 usage_details", py("3.1", map[string]any{"svc.observation.type": "span", "svc.observation.usage_details": `{"input":1}`}), platform.TypeGeneration},
		{"0 cost_details", py("3.1", map[string]any{"svc.observation.type": "span", "svc.observation.cost_details": `{"total":1}`}), platform.TypeGeneration},
		{"0 completion_start_time", py("3.1", map[string]any{"svc.observation.type": "span", "svc.observation.completion_start_time": "2025-01-01T00:00:00Z"}), platform.TypeGeneration},
		{"0 prompt", py("3.1", map[string]any{"svc.observation.type": "span", "svc.observation.prompt.name": "p"}), platform.TypeGeneration},
		{"0 python 3.4 stays a span", py("3.4.0", generationKey), platform.TypeSpan},
		{"0 python 4 stays a span", py("4.0.1", generationKey), platform.TypeSpan},
		{"0 js sdk stays a span", span{scope: sdk, scopeVersion: "3.0", language: "nodejs", attrs: generationKey}, platform.TypeSpan},
		{"0 other scope stays a span", span{scope: "svc-sdk-extra", scopeVersion: "3.0", language: "python", attrs: generationKey}, platform.TypeSpan},
		{"0 python span without generation field", py("3.0", map[string]any{"svc.observation.type": "span"}), platform.TypeSpan},
		{"0 python generation key on a tool", py("3.0", map[string]any{"svc.observation.type": "tool", "svc.observation.model.name": "m"}), platform.TypeTool},

		// 1: svc.observation.type, lower case only.
		{"1 span", a(map[string]any{"svc.observation.type": "span"}), platform.TypeSpan},
		{"1 generation", a(map[string]any{"svc.observation.type": "generation"}), platform.TypeGeneration},
		{"1 event", a(map[string]any{"svc.observation.type": "event"}), platform.TypeEvent},
		{"1 embedding", a(map[string]any{"svc.observation.type": "embedding"}), platform.TypeEmbedding},
		{"1 agent", a(map[string]any{"svc.observation.type": "agent"}), platform.TypeAgent},
		{"1 tool", a(map[string]any{"svc.observation.type": "tool"}), platform.TypeTool},
		{"1 chain", a(map[string]any{"svc.observation.type": "chain"}), platform.TypeChain},
		{"1 retriever", a(map[string]any{"svc.observation.type": "retriever"}), platform.TypeRetriever},
		{"1 guardrail", a(map[string]any{"svc.observation.type": "guardrail"}), platform.TypeGuardrail},
		{"1 evaluator", a(map[string]any{"svc.observation.type": "evaluator"}), platform.TypeEvaluator},
		{"1 upper case falls through", a(map[string]any{"svc.observation.type": "TOOL"}), platform.TypeSpan},
		{"1 unknown falls through to 2", a(map[string]any{"svc.observation.type": "step", "openinference.span.kind": "AGENT"}), platform.TypeAgent},
		{"1 wins over 2", a(map[string]any{"svc.observation.type": "chain", "openinference.span.kind": "LLM"}), platform.TypeChain},

		// 2: openinference.span.kind.
		{"2 LLM", a(map[string]any{"openinference.span.kind": "LLM"}), platform.TypeGeneration},
		{"2 CHAIN", a(map[string]any{"openinference.span.kind": "CHAIN"}), platform.TypeChain},
		{"2 RETRIEVER", a(map[string]any{"openinference.span.kind": "RETRIEVER"}), platform.TypeRetriever},
		{"2 EMBEDDING", a(map[string]any{"openinference.span.kind": "EMBEDDING"}), platform.TypeEmbedding},
		{"2 AGENT", a(map[string]any{"openinference.span.kind": "AGENT"}), platform.TypeAgent},
		{"2 TOOL", a(map[string]any{"openinference.span.kind": "TOOL"}), platform.TypeTool},
		{"2 GUARDRAIL", a(map[string]any{"openinference.span.kind": "GUARDRAIL"}), platform.TypeGuardrail},
		{"2 EVALUATOR", a(map[string]any{"openinference.span.kind": "EVALUATOR"}), platform.TypeEvaluator},
		{"2 unknown falls through to 3", a(map[string]any{"openinference.span.kind": "RERANKER", "gen_ai.operation.name": "chat"}), platform.TypeGeneration},
		{"2 wins over 3", a(map[string]any{"openinference.span.kind": "TOOL", "gen_ai.operation.name": "chat"}), platform.TypeTool},

		// 3: gen_ai.operation.name.
		{"3 chat", a(map[string]any{"gen_ai.operation.name": "chat"}), platform.TypeGeneration},
		{"3 completion", a(map[string]any{"gen_ai.operation.name": "completion"}), platform.TypeGeneration},
		{"3 text_completion", a(map[string]any{"gen_ai.operation.name": "text_completion"}), platform.TypeGeneration},
		{"3 generate_content", a(map[string]any{"gen_ai.operation.name": "generate_content"}), platform.TypeGeneration},
		{"3 generate", a(map[string]any{"gen_ai.operation.name": "generate"}), platform.TypeGeneration},
		{"3 embeddings", a(map[string]any{"gen_ai.operation.name": "embeddings"}), platform.TypeEmbedding},
		{"3 invoke_agent", a(map[string]any{"gen_ai.operation.name": "invoke_agent"}), platform.TypeAgent},
		{"3 create_agent", a(map[string]any{"gen_ai.operation.name": "create_agent"}), platform.TypeAgent},
		{"3 execute_tool", a(map[string]any{"gen_ai.operation.name": "execute_tool"}), platform.TypeTool},
		{"3 invoke_agent with a model", a(map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "gpt-4o"}), platform.TypeAgent},
		{"3 unknown falls through to 10", a(map[string]any{"gen_ai.operation.name": "agent_step", "gen_ai.request.model": "gpt-4o"}), platform.TypeGeneration},

		// 4: genkit:metadata:subtype (the action kinds that are one type each).
		{"4 model", a(map[string]any{"genkit:metadata:subtype": "model"}), platform.TypeGeneration},
		{"4 tool", a(map[string]any{"genkit:metadata:subtype": "tool"}), platform.TypeTool},
		{"4 embedder", a(map[string]any{"genkit:metadata:subtype": "embedder"}), platform.TypeEmbedding},
		{"4 retriever", a(map[string]any{"genkit:metadata:subtype": "retriever"}), platform.TypeRetriever},
		{"4 flow falls through", a(map[string]any{"genkit:metadata:subtype": "flow"}), platform.TypeSpan},

		// 5, 6: the Vercel AI SDK's operations, a model call only with a model key.
		{"5 generateText.doGenerate", a(map[string]any{"ai.operationId": "ai.generateText.doGenerate", "ai.model.id": "gpt-4o"}), platform.TypeGeneration},
		{"5 streamText.doStream", a(map[string]any{"ai.operationId": "ai.streamText.doStream", "ai.model.id": "gpt-4o"}), platform.TypeGeneration},
		{"5 generateObject.doGenerate", a(map[string]any{"ai.operationId": "ai.generateObject.doGenerate", "gen_ai.request.model": "gpt-4o"}), platform.TypeGeneration},
		{"5 streamObject.doStream", a(map[string]any{"ai.operationId": "ai.streamObject.doStream", "ai.model.id": "gpt-4o"}), platform.TypeGeneration},
		{"5 operation.name with function id", a(map[string]any{"operation.name": "ai.generateText.doGenerate my-fn", "ai.model.id": "gpt-4o"}), platform.TypeGeneration},
		{"5 embed.doEmbed", a(map[string]any{"ai.operationId": "ai.embed.doEmbed", "ai.model.id": "text-embedding-3-small"}), platform.TypeEmbedding},
		{"5 embedMany.doEmbed", a(map[string]any{"operation.name": "ai.embedMany.doEmbed", "ai.model.id": "text-embedding-3-small"}), platform.TypeEmbedding},
		{"5 doGenerate without model", a(map[string]any{"ai.operationId": "ai.generateText.doGenerate"}), platform.TypeSpan},
		{"5 doEmbed without model", a(map[string]any{"ai.operationId": "ai.embed.doEmbed"}), platform.TypeSpan},
		{"5 outer generateText is not a model call", a(map[string]any{"ai.operationId": "ai.generateText", "ai.model.id": "gpt-4o"}), platform.TypeSpan},
		{"6 toolCall", a(map[string]any{"ai.operationId": "ai.toolCall", "ai.toolCall.name": "search"}), platform.TypeTool},
		{"6 toolCall in operation.name", a(map[string]any{"operation.name": "ai.toolCall my-fn"}), platform.TypeTool},

		// 7: a truthy tool name or call id.
		{"7 tool name", a(map[string]any{"gen_ai.tool.name": "search"}), platform.TypeTool},
		{"7 tool call id", a(map[string]any{"gen_ai.tool.call.id": "call-1"}), platform.TypeTool},
		{"7 empty tool name", a(map[string]any{"gen_ai.tool.name": ""}), platform.TypeSpan},
		{"7 wins over 10", a(map[string]any{"gen_ai.tool.name": "search", "gen_ai.request.model": "gpt-4o"}), platform.TypeTool},

		// 8: flue.
		{"8 flue tool", a(map[string]any{"flue.tool.name": "grep"}), platform.TypeTool},
		{"8 flue task", a(map[string]any{"flue.task.id": "t1"}), platform.TypeAgent},
		{"8 flue task wins over 10", a(map[string]any{"flue.task.id": "t1", "model": "m"}), platform.TypeAgent},

		// 10: a truthy model key.
		{"10 svc.observation.model.name", a(map[string]any{"svc.observation.model.name": "m"}), platform.TypeGeneration},
		{"10 gen_ai.request.model", a(map[string]any{"gen_ai.request.model": "m"}), platform.TypeGeneration},
		{"10 gen_ai.response.model", a(map[string]any{"gen_ai.response.model": "m"}), platform.TypeGeneration},
		{"10 llm.model_name", a(map[string]any{"llm.model_name": "m"}), platform.TypeGeneration},
		{"10 model", a(map[string]any{"model": "m"}), platform.TypeGeneration},
		{"10 model false", a(map[string]any{"model": false}), platform.TypeSpan},
		{"10 model 0", a(map[string]any{"model": int64(0)}), platform.TypeSpan},
		{"10 model empty", a(map[string]any{"model": ""}), platform.TypeSpan},

		// Else SPAN.
		{"no rule", a(map[string]any{"http.method": "GET"}), platform.TypeSpan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, scope, sp := build(t, tt.span)
			local := platform.ObservationType(res, scope, sp)
			view := observation.NewView(sp, res, scope)
			gateway := view.Type()
			if local != tt.want || gateway != tt.want {
				t.Errorf("local platform %s, gateway (pkg/observation) %s; the rules give %s", local, gateway, tt.want)
			}
		})
	}
}

func build(t *testing.T, s span) (pcommon.Resource, pcommon.InstrumentationScope, ptrace.Span) {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	if s.language != "" {
		rs.Resource().Attributes().PutStr("telemetry.sdk.language", s.language)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(s.scope)
	ss.Scope().SetVersion(s.scopeVersion)
	sp := ss.Spans().AppendEmpty()
	sp.SetName("span")
	if err := sp.Attributes().FromRaw(s.attrs); err != nil {
		t.Fatal(err)
	}
	return rs.Resource(), ss.Scope(), sp
}
