package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import "github.com/svc/svc-collector/pkg/svcattr"

// knownScope is one entry of the known LLM instrumentation scopes.
type knownScope struct {
	// name is matched boundary-aware: a scope equal to name, or starting with name + ".".
	name string
	// exactOnly entries match only a scope equal to name (`ai` would otherwise match far too much).
	exactOnly bool
}

// openTelemetryInstrumentationPrefix starts the scope names of the OpenLLMetry / OpenTelemetry
// GenAI instrumentations; the known ones follow it in knownScopes.
const openTelemetryInstrumentationPrefix = "opentelemetry.instrumentation."

// knownScopes is the one table of instrumentation scopes whose spans the default filter keeps, as the
// svc platform's own SDKs list them (docs/contract.md §8). Add a scope here and nowhere else (the README's
// list of known scopes is checked against this table by TestReadmeListsKnownScopes).
var knownScopes = []knownScope{
	{name: svcattr.SDKScopeName},  // the svc SDKs themselves
	{name: "agent_framework"},     // Microsoft Agent Framework
	{name: "autogen-core"},        // AutoGen
	{name: "ai", exactOnly: true}, // Vercel AI SDK (scope name is exactly "ai")
	{name: "haystack"},            // Haystack
	{name: "langsmith"},           // LangSmith OpenTelemetry export
	{name: "litellm"},             // LiteLLM
	{name: "openinference"},       // Arize OpenInference instrumentations
	{name: "pydantic-ai"},         // Pydantic AI
	{name: "strands-agents"},      // Strands Agents
	{name: "vllm"},                // vLLM
	{name: openTelemetryInstrumentationPrefix + "agno"},
	{name: openTelemetryInstrumentationPrefix + "alephalpha"},
	{name: openTelemetryInstrumentationPrefix + "anthropic"},
	{name: openTelemetryInstrumentationPrefix + "aws_bedrock"},
	{name: openTelemetryInstrumentationPrefix + "bedrock"},
	{name: openTelemetryInstrumentationPrefix + "cohere"},
	{name: openTelemetryInstrumentationPrefix + "crewai"},
	{name: openTelemetryInstrumentationPrefix + "gemini"},
	{name: openTelemetryInstrumentationPrefix + "google_genai"},
	{name: openTelemetryInstrumentationPrefix + "google_generativeai"},
	{name: openTelemetryInstrumentationPrefix + "groq"},
	{name: openTelemetryInstrumentationPrefix + "haystack"},
	{name: openTelemetryInstrumentationPrefix + "langchain"},
	{name: openTelemetryInstrumentationPrefix + "llamaindex"},
	{name: openTelemetryInstrumentationPrefix + "mistralai"},
	{name: openTelemetryInstrumentationPrefix + "ollama"},
	{name: openTelemetryInstrumentationPrefix + "openai"},
	{name: openTelemetryInstrumentationPrefix + "openai_agents"},
	{name: openTelemetryInstrumentationPrefix + "openai_v2"},
	{name: openTelemetryInstrumentationPrefix + "replicate"},
	{name: openTelemetryInstrumentationPrefix + "sagemaker"},
	{name: openTelemetryInstrumentationPrefix + "together"},
	{name: openTelemetryInstrumentationPrefix + "transformers"},
	{name: openTelemetryInstrumentationPrefix + "vertex_ai"},
	{name: openTelemetryInstrumentationPrefix + "vertexai"},
	{name: openTelemetryInstrumentationPrefix + "voyageai"},
	{name: openTelemetryInstrumentationPrefix + "watsonx"},
	{name: openTelemetryInstrumentationPrefix + "writer"},
}

// defaultScopes matches knownScopes.
var defaultScopes = func() scopeMatcher {
	m := scopeMatcher{}
	for _, s := range knownScopes {
		m.add(s.name, s.exactOnly)
	}
	return m
}()

// scopeMatcher answers boundary-aware scope matches with one map lookup per "." of the scope name,
// so the cost does not grow with the number of rules.
type scopeMatcher map[string]bool // name → exactOnly

func newScopeMatcher(names []string) scopeMatcher {
	if len(names) == 0 {
		return nil
	}
	m := scopeMatcher{}
	for _, n := range names {
		m.add(n, false)
	}
	return m
}

func (m scopeMatcher) add(name string, exactOnly bool) {
	if prev, ok := m[name]; ok {
		exactOnly = exactOnly && prev // a boundary-aware entry wins over an exact one
	}
	m[name] = exactOnly
}

// match reports whether scope equals an entry, or starts with an entry that is followed by ".".
func (m scopeMatcher) match(scope string) bool {
	if len(m) == 0 || scope == "" {
		return false
	}
	if _, ok := m[scope]; ok {
		return true
	}
	for i := 0; i < len(scope); i++ {
		if scope[i] != '.' {
			continue
		}
		if exactOnly, ok := m[scope[:i]]; ok && !exactOnly {
			return true
		}
	}
	return false
}
