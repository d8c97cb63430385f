package platform

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Observation types the platform assigns (docs/contract.md §14.3).
const (
	TypeSpan       = "SPAN"
	TypeGeneration = "GENERATION"
	TypeEvent      = "EVENT"
	TypeEmbedding  = "EMBEDDING"
	TypeAgent      = "AGENT"
	TypeTool       = "TOOL"
	TypeChain      = "CHAIN"
	TypeRetriever  = "RETRIEVER"
	TypeGuardrail  = "GUARDRAIL"
	TypeEvaluator  = "EVALUATOR"
)

// ObservationType is the type the platform gives a span: the mappers of the platform's
// observation-type rules (docs/contract.md §14.3), tried in order. Exported for the test that
// holds the gateway's reading of the same rules against this one (testbed/obstypeagree).
func ObservationType(resource pcommon.Resource, scope pcommon.InstrumentationScope, span ptrace.Span) string {
	return observationType(spanView{span: span, attrs: span.Attributes(), resource: resource.Attributes(),
		scopeName: scope.Name(), scopeVersion: scope.Version(), scopeAttrs: scope.Attributes()})
}

// typeMapper is one rule: a type, or "" to let the next rule try (an unmapped value falls through).
type typeMapper func(sp spanView) string

// typeMappers in the platform's order; the first to return a type wins, none gives SPAN.
var typeMappers = []typeMapper{
	pythonSDKGeneration, // 0
	declaredType,        // 1
	openInferenceKind,   // 2
	genAIOperation,      // 3
	genkitSubtype,       // 4
	vercelOperation,     // 5, 6
	toolKeys,            // 7
	flueKeys,            // 8
	// 9, livekit-agents span names: the rule names the scope, not the span names it maps; the
	// workload sends no livekit-agents spans, so the local platform has no rule for them.
	modelKeyGeneration, // 10
}

func observationType(sp spanView) string {
	for _, m := range typeMappers {
		if t := m(sp); t != "" {
			return t
		}
	}
	return TypeSpan
}

// Rule 0: the Python SDK up to 3.3 sent generations as "span" observations with generation fields.
func pythonSDKGeneration(sp spanView) string {
	if sp.scopeName != sdkScope || attrString(sp.resource, "telemetry.sdk.language") != "python" ||
		attrString(sp.attrs, attrObservationType) != "span" || !scopeVersionAtMost33(sp.scopeVersion) {
		return ""
	}
	for name := range sp.attrs.All() {
		rest, ok := strings.CutPrefix(name, "svc.observation.")
		if !ok {
			continue
		}
		if strings.HasPrefix(rest, "model.") || strings.HasPrefix(rest, "prompt.") ||
			rest == "usage_details" || rest == "cost_details" || rest == "completion_start_time" {
			return TypeGeneration
		}
	}
	return ""
}

// scopeVersionAtMost33: no version, or a major.minor of at most 3.3 (patch and suffixes ignored).
func scopeVersionAtMost33(version string) bool {
	if version == "" {
		return true
	}
	fields := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	major, err := strconv.Atoi(leadingDigits(fields[0]))
	if err != nil {
		return false
	}
	minor := 0
	if len(fields) > 1 {
		if m, err := strconv.Atoi(leadingDigits(fields[1])); err == nil {
			minor = m
		}
	}
	return major < 3 || major == 3 && minor <= 3
}

func leadingDigits(s string) string {
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	return s[:end]
}

// Rule 1: svc.observation.type, in lower case only.
func declaredType(sp spanView) string {
	switch v := attrString(sp.attrs, attrObservationType); v {
	case "span", "generation", "event", "embedding", "agent", "tool", "chain", "retriever", "guardrail", "evaluator":
		return strings.ToUpper(v)
	}
	return ""
}

// Rule 2: openinference.span.kind; LLM is a generation, the other kinds are the type of their name.
func openInferenceKind(sp spanView) string {
	switch v := attrString(sp.attrs, "openinference.span.kind"); v {
	case "LLM":
		return TypeGeneration
	case "CHAIN", "RETRIEVER", "EMBEDDING", "AGENT", "TOOL", "GUARDRAIL", "EVALUATOR":
		return v
	}
	return ""
}

// Rule 3: gen_ai.operation.name.
func genAIOperation(sp spanView) string {
	switch attrString(sp.attrs, attrOperationName) {
	case "chat", "completion", "text_completion", "generate_content", "generate":
		return TypeGeneration
	case "embeddings":
		return TypeEmbedding
	case "invoke_agent", "create_agent":
		return TypeAgent
	case "execute_tool":
		return TypeTool
	}
	return ""
}

// Rule 4: genkit:metadata:subtype. The rule names the attribute, not its values; the local platform
// maps the Genkit action kinds that are one observation type each.
func genkitSubtype(sp spanView) string {
	switch attrString(sp.attrs, "genkit:metadata:subtype") {
	case "model":
		return TypeGeneration
	case "tool":
		return TypeTool
	case "embedder":
		return TypeEmbedding
	case "retriever":
		return TypeRetriever
	}
	return ""
}

// Rules 5 and 6: the Vercel AI SDK's operation, as the prefix of operation.name (which may go on
// with the function id) or as ai.operationId. A model call is a generation or an embedding only
// with a model key; ai.toolCall is a tool.
func vercelOperation(sp spanView) string {
	ops := []string{attrString(sp.attrs, "operation.name"), attrString(sp.attrs, "ai.operationId")}
	isOp := func(prefixes ...string) bool {
		for _, op := range ops {
			for _, p := range prefixes {
				if op != "" && strings.HasPrefix(op, p) {
					return true
				}
			}
		}
		return false
	}
	if hasAnyTruthy(sp.attrs, vercelModelKeys...) {
		if isOp("ai.generateText.do", "ai.streamText.do", "ai.generateObject.do", "ai.streamObject.do") {
			return TypeGeneration
		}
		if isOp("ai.embed.doEmbed", "ai.embedMany.doEmbed") {
			return TypeEmbedding
		}
	}
	if isOp("ai.toolCall") {
		return TypeTool
	}
	return ""
}

// vercelModelKeys: "a model key" read as any source of the observation's model field.
var vercelModelKeys = []string{"svc.observation.model.name", "gen_ai.response.model", "ai.model.id",
	"gen_ai.request.model", "llm.response.model", "llm.model_name", "model"}

// Rule 7: a truthy tool name or tool call id.
func toolKeys(sp spanView) string {
	if hasAnyTruthy(sp.attrs, "gen_ai.tool.name", "gen_ai.tool.call.id") {
		return TypeTool
	}
	return ""
}

// Rule 8: flue's keys; a tool key wins over a task key on the same span.
func flueKeys(sp spanView) string {
	task := false
	for name := range sp.attrs.All() {
		if strings.HasPrefix(name, "flue.tool.") {
			return TypeTool
		}
		task = task || strings.HasPrefix(name, "flue.task.")
	}
	if task {
		return TypeAgent
	}
	return ""
}

// Rule 10: a truthy model key makes a generation.
func modelKeyGeneration(sp spanView) string {
	if hasAnyTruthy(sp.attrs, "svc.observation.model.name", "gen_ai.request.model", "gen_ai.response.model", "llm.model_name", "model") {
		return TypeGeneration
	}
	return ""
}
