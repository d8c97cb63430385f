package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"slices"

	"github.com/svc/svc-collector/pkg/scopematch"
	"github.com/svc/svc-collector/pkg/svcattr"
)

// knownScope is one entry of the known LLM instrumentation scopes.
type knownScope struct {
	name string
	// rule is how name matches (scopematch.Boundary unless said otherwise: a scope equal to name,
	// or starting with name + ".").
	rule scopematch.Rule
}

// openTelemetryInstrumentationPrefix starts the scope names of the OpenLLMetry / OpenTelemetry
// GenAI instrumentations; the known ones follow it in knownScopes.
const openTelemetryInstrumentationPrefix = "opentelemetry.instrumentation."

// openInferenceJSPrefix starts the scope names of the OpenInference JavaScript instrumentations,
// `@arizeai/openinference-instrumentation-<library>`. The svc SDKs' list has only the Python name
// `openinference`; the gateway keeps the JS ones too (README, "Known instrumentation scopes").
const openInferenceJSPrefix = "@arizeai/openinference-instrumentation-"

// knownScopes is the one table of instrumentation scopes whose spans the default filter keeps: the
// svc platform's own SDKs' list, and after it what the gateway keeps beyond it. Add a scope here and
// nowhere else (the README's list of known scopes is checked against this table by
// TestReadmeListsKnownScopes).
var knownScopes = slices.Concat([]knownScope{
	{name: svcattr.SDKScopeName},         // the svc SDKs themselves
	{name: "agent_framework"},            // Microsoft Agent Framework
	{name: "autogen-core"},               // AutoGen
	{name: "ai", rule: scopematch.Exact}, // Vercel AI SDK (scope name is exactly "ai")
	{name: "haystack"},                   // Haystack
	{name: "langsmith"},                  // LangSmith OpenTelemetry export
	{name: "litellm"},                    // LiteLLM
	{name: "openinference"},              // Arize OpenInference instrumentations
	{name: "pydantic-ai"},                // Pydantic AI
	{name: "strands-agents"},             // Strands Agents
	{name: "vllm"},                       // vLLM
}, openTelemetryInstrumentations(
	"agno", "alephalpha", "anthropic", "aws_bedrock", "bedrock", "cohere", "crewai", "gemini",
	"google_genai", "google_generativeai", "groq", "haystack", "langchain", "llamaindex", "mistralai",
	"ollama", "openai", "openai_agents", "openai_v2", "replicate", "sagemaker", "together",
	"transformers", "vertex_ai", "vertexai", "voyageai", "watsonx", "writer",
), []knownScope{
	// Beyond the SDKs' list.
	{name: openInferenceJSPrefix, rule: scopematch.Prefix}, // OpenInference JS
})

func openTelemetryInstrumentations(libraries ...string) []knownScope {
	scopes := make([]knownScope, len(libraries))
	for i, l := range libraries {
		scopes[i] = knownScope{name: openTelemetryInstrumentationPrefix + l}
	}
	return scopes
}

// defaultScopes matches knownScopes.
var defaultScopes = func() *scopematch.Matcher {
	m := &scopematch.Matcher{}
	for _, s := range knownScopes {
		m.Add(s.name, s.rule)
	}
	return m
}()

// newScopeMatcher matches the scopes of a keep or drop rule, boundary-aware; nil when there are none.
func newScopeMatcher(names []string) *scopematch.Matcher {
	if len(names) == 0 {
		return nil
	}
	return scopematch.New(scopematch.Boundary, names...)
}
