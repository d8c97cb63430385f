package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"slices"

	"github.com/svc/svc-collector/pkg/scopematch"
	"github.com/svc/svc-collector/pkg/svcattr"
)

// knownScope is a known LLM instrumentation scope, matched by scopematch.Boundary unless rule says otherwise.
type knownScope struct {
	name string
	rule scopematch.Rule
}

// The scopes of the OpenLLMetry / OpenTelemetry GenAI instrumentations, and of the OpenInference
// JavaScript ones (the svc SDKs' list has only the Python `openinference`), start with these.
const (
	openTelemetryInstrumentationPrefix = "opentelemetry.instrumentation."
	openInferenceJSPrefix              = "@arizeai/openinference-instrumentation-"
)

// knownScopes is the one table of scopes whose spans the default filter keeps: the svc SDKs' list,
// then what the gateway keeps beyond it. TestReadmeListsKnownScopes checks the README against it.
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

var defaultScopes = func() *scopematch.Matcher {
	m := &scopematch.Matcher{}
	for _, s := range knownScopes {
		m.Add(s.name, s.rule)
	}
	return m
}()
