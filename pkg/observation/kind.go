package observation

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/svcattr"
)

// Observation types.
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

// declaredTypes are the values of svc.observation.type the platform takes (lower case only).
var declaredTypes = map[string]string{
	"span": TypeSpan, "generation": TypeGeneration, "event": TypeEvent, "embedding": TypeEmbedding,
	"agent": TypeAgent, "tool": TypeTool, "chain": TypeChain, "retriever": TypeRetriever,
	"guardrail": TypeGuardrail, "evaluator": TypeEvaluator,
}

// openInferenceKinds maps openinference.span.kind.
var openInferenceKinds = map[string]string{
	"LLM": TypeGeneration, "CHAIN": TypeChain, "RETRIEVER": TypeRetriever, "EMBEDDING": TypeEmbedding,
	"AGENT": TypeAgent, "TOOL": TypeTool, "GUARDRAIL": TypeGuardrail, "EVALUATOR": TypeEvaluator,
}

// genAIOperations maps gen_ai.operation.name.
var genAIOperations = map[string]string{
	"chat": TypeGeneration, "completion": TypeGeneration, "text_completion": TypeGeneration,
	"generate_content": TypeGeneration, "generate": TypeGeneration, "embeddings": TypeEmbedding,
	"invoke_agent": TypeAgent, "create_agent": TypeAgent, "execute_tool": TypeTool,
}

// genkitSubtypes maps genkit:metadata:subtype.
var genkitSubtypes = map[string]string{
	"model": TypeGeneration, "tool": TypeTool, "embedder": TypeEmbedding, "retriever": TypeRetriever,
}

// modelKeys make a span a GENERATION when nothing before decided (the last mapper).
var modelKeys = []string{"svc.observation.model.name", AttrRequestModel, AttrResponseModel, "llm.model_name", "model"}

// legacyGenerationKeys: an old Python SDK "span" carrying one of these was a generation.
var legacyGenerationKeys = []string{"svc.observation.model.", "svc.observation.usage_details", "svc.observation.cost_details",
	"svc.observation.completion_start_time", "svc.observation.prompt."}

// Type is the observation type, by the platform's mappers in order; the first that returns a
// type wins, an unmapped value falls through, and a span no mapper types is a SPAN.
func (v *View) Type() string {
	attrs := v.Span.Attributes()
	if t, ok := legacyPythonGeneration(v); ok {
		return t
	}
	if t, ok := declaredTypes[v.str(svcattr.ObservationType)]; ok {
		return t
	}
	if t, ok := openInferenceKinds[v.str("openinference.span.kind")]; ok {
		return t
	}
	if t, ok := genAIOperations[v.str(AttrOperationName)]; ok {
		return t
	}
	if t, ok := genkitSubtypes[v.str("genkit:metadata:subtype")]; ok {
		return t
	}
	if op := v.vercelOperation(); strings.HasPrefix(op, "ai.") {
		hasModel := v.str("ai.model.id") != "" || v.str(AttrRequestModel) != ""
		for _, gen := range []string{"ai.generateText.do", "ai.streamText.do", "ai.generateObject.do", "ai.streamObject.do"} {
			if strings.HasPrefix(op, gen) && hasModel {
				return TypeGeneration
			}
		}
		if (strings.HasPrefix(op, "ai.embed.doEmbed") || strings.HasPrefix(op, "ai.embedMany.doEmbed")) && hasModel {
			return TypeEmbedding
		}
		if strings.HasPrefix(op, "ai.toolCall") {
			return TypeTool
		}
	}
	if v.truthy("gen_ai.tool.name") || v.truthy("gen_ai.tool.call.id") {
		return TypeTool
	}
	for k := range attrs.All() {
		if strings.HasPrefix(k, "flue.tool.") {
			return TypeTool
		}
		if strings.HasPrefix(k, "flue.task.") {
			return TypeAgent
		}
	}
	for _, k := range modelKeys {
		if v.truthy(k) {
			return TypeGeneration
		}
	}
	return TypeSpan
}

// vercelOperation is the Vercel AI SDK operation: ai.operationId, else operation.name (which may
// carry the function id after a space).
func (v *View) vercelOperation() string {
	if op := v.str("ai.operationId"); op != "" {
		return op
	}
	op, _, _ := strings.Cut(v.str("operation.name"), " ")
	return op
}

// legacyPythonGeneration: spans of the Python SDK up to 3.3 typed "span" that carry generation
// fields were generations.
func legacyPythonGeneration(v *View) (string, bool) {
	if v.Scope.Name() != svcattr.SDKScopeName || v.str(svcattr.ObservationType) != "span" {
		return "", false
	}
	if lang, ok := v.Resource.Attributes().Get(svcattr.TelemetrySDKLanguage); !ok || lang.AsString() != "python" {
		return "", false
	}
	if ver := v.Scope.Version(); ver != "" && !versionAtMost(ver, 3, 3) {
		return "", false
	}
	for k := range v.Span.Attributes().All() {
		for _, p := range legacyGenerationKeys {
			if strings.HasPrefix(k, p) {
				return TypeGeneration, true
			}
		}
	}
	return "", false
}

// versionAtMost reports whether a "major.minor…" version is at most major.minor.
func versionAtMost(version string, major, minor int) bool {
	var ma, mi int
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	for i, p := range parts[:min(2, len(parts))] {
		n := 0
		for _, c := range p {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int(c-'0')
		}
		if i == 0 {
			ma = n
		} else {
			mi = n
		}
	}
	return ma < major || ma == major && mi <= minor
}

// str is a span attribute as a string ("" when absent).
func (v *View) str(key string) string {
	a, ok := v.Span.Attributes().Get(key)
	if !ok {
		return ""
	}
	if a.Type() == pcommon.ValueTypeStr {
		return a.Str()
	}
	return a.AsString()
}

// truthy: set and not empty, 0 or false.
func (v *View) truthy(key string) bool {
	a, ok := v.Span.Attributes().Get(key)
	if !ok {
		return false
	}
	switch a.Type() {
	case pcommon.ValueTypeStr:
		return a.Str() != ""
	case pcommon.ValueTypeInt:
		return a.Int() != 0
	case pcommon.ValueTypeDouble:
		return a.Double() != 0
	case pcommon.ValueTypeBool:
		return a.Bool()
	case pcommon.ValueTypeEmpty:
		return false
	}
	return true
}
