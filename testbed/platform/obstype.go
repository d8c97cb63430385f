package platform

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
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

// explicitTypes are the values of svc.observation.type the platform knows (lower case only).
var explicitTypes = map[string]string{
	"span": TypeSpan, "generation": TypeGeneration, "event": TypeEvent, "embedding": TypeEmbedding,
	"agent": TypeAgent, "tool": TypeTool, "chain": TypeChain, "retriever": TypeRetriever,
	"guardrail": TypeGuardrail, "evaluator": TypeEvaluator,
}

// openInferenceKinds map openinference.span.kind.
var openInferenceKinds = map[string]string{
	"LLM": TypeGeneration, "CHAIN": TypeChain, "RETRIEVER": TypeRetriever, "EMBEDDING": TypeEmbedding,
	"AGENT": TypeAgent, "TOOL": TypeTool, "GUARDRAIL": TypeGuardrail, "EVALUATOR": TypeEvaluator,
}

// genAIOperations map gen_ai.operation.name.
var genAIOperations = map[string]string{
	"chat": TypeGeneration, "completion": TypeGeneration, "text_completion": TypeGeneration,
	"generate_content": TypeGeneration, "generate": TypeGeneration, "embeddings": TypeEmbedding,
	"invoke_agent": TypeAgent, "create_agent": TypeAgent, "execute_tool": TypeTool,
}

// vercelGenerations are the Vercel AI SDK operations that make a GENERATION when a model key is set.
var vercelGenerations = []string{"ai.generateText.do", "ai.streamText.do", "ai.generateObject.do", "ai.streamObject.do"}

// modelKeys make a span a GENERATION by themselves (§5 step 10).
var modelKeys = []string{"svc.observation.model.name", "gen_ai.request.model", "gen_ai.response.model", "llm.model_name", "model"}

// observationType is §5: the first mapper that returns a type; an unmapped value falls through.
func observationType(sp spanView) string {
	attrs := sp.attrs
	if sp.scopeName == sdkScope && strings.EqualFold(attrString(sp.resource, "telemetry.sdk.language"), "python") &&
		attrString(attrs, attrObservationType) == "span" && oldPythonSDK(sp.scopeVersion) && hasGenerationKey(attrs) {
		return TypeGeneration // step 0: Python SDK ≤ 3.3 wrote generations as spans
	}
	if t, ok := explicitTypes[attrString(attrs, attrObservationType)]; ok {
		return t
	}
	if t, ok := openInferenceKinds[attrString(attrs, "openinference.span.kind")]; ok {
		return t
	}
	if t, ok := genAIOperations[attrString(attrs, attrOperationName)]; ok {
		return t
	}
	if t, ok := explicitTypes[strings.ToLower(attrString(attrs, "genkit:metadata:subtype"))]; ok {
		return t
	}
	op := attrString(attrs, "operation.name")
	if op == "" {
		op = attrString(attrs, "ai.operationId")
	}
	if op != "" {
		for _, prefix := range vercelGenerations {
			if strings.HasPrefix(op, prefix) && hasAnyTruthy(attrs, append([]string{"ai.model.id"}, modelKeys...)...) {
				return TypeGeneration
			}
		}
		if (strings.HasPrefix(op, "ai.embed.doEmbed") || strings.HasPrefix(op, "ai.embedMany.doEmbed")) &&
			hasAnyTruthy(attrs, append([]string{"ai.model.id"}, modelKeys...)...) {
			return TypeEmbedding
		}
		if strings.HasPrefix(op, "ai.toolCall") {
			return TypeTool
		}
	}
	if hasAnyTruthy(attrs, "gen_ai.tool.name", "gen_ai.tool.call.id") {
		return TypeTool
	}
	if hasPrefixKey(attrs, "flue.tool.") {
		return TypeTool
	}
	if hasPrefixKey(attrs, "flue.task.") {
		return TypeAgent
	}
	if hasAnyTruthy(attrs, modelKeys...) {
		return TypeGeneration
	}
	return TypeSpan
}

// oldPythonSDK: a scope version ≤ 3.3, or none.
func oldPythonSDK(version string) bool {
	if version == "" {
		return true
	}
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		return false
	}
	minor := 0
	if len(parts) > 1 {
		m, err := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
		if err == nil {
			minor = m
		}
	}
	return major < 3 || (major == 3 && minor <= 3)
}

func hasGenerationKey(attrs pcommon.Map) bool {
	for name := range attrs.All() {
		if strings.HasPrefix(name, "svc.observation.model.") || strings.HasPrefix(name, "svc.observation.prompt.") ||
			name == "svc.observation.usage_details" || name == "svc.observation.cost_details" || name == "svc.observation.completion_start_time" {
			return true
		}
	}
	return false
}

func hasPrefixKey(attrs pcommon.Map, prefix string) bool {
	for name := range attrs.All() {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
