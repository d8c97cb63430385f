package genaicontent

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/scopematch"
)

// DefaultScopes are the instrumentation scopes known to send prompts and completions as log events
// instead of span attributes (when content capture is on). Their inference spans without content may
// wait for it; every other span is never delayed by the join. The one list: add a scope here, or in
// the `content_join.instrumentation_scopes` option. An entry matches a scope equal to it or starting
// with it followed by ".".
var DefaultScopes = []string{
	"opentelemetry.instrumentation.openai_v2",       // Python opentelemetry-instrumentation-openai-v2
	"@opentelemetry/instrumentation-openai",         // JS opentelemetry-js-contrib
	"@elastic/opentelemetry-instrumentation-openai", // JS, Elastic's distribution (the same events)
	"opentelemetry.instrumentation.google_genai",    // Python opentelemetry-instrumentation-google-genai
	"opentelemetry.instrumentation.vertexai",        // Python opentelemetry-instrumentation-vertexai
	"io.opentelemetry.openai-java-1.1",              // Java agent, openai-java instrumentation
}

// inferenceOperations are the gen_ai.operation.name values of a model call (the OpenAI Responses API
// is instrumented as `chat`).
var inferenceOperations = map[string]bool{
	"chat":             true,
	"text_completion":  true,
	"generate_content": true,
}

// Candidates decides which spans may still receive content from log records.
type Candidates struct {
	scopes *scopematch.Matcher
}

// NewCandidates returns the predicate over DefaultScopes plus extra scopes.
func NewCandidates(extra []string) *Candidates {
	m := scopematch.New(scopematch.Boundary, DefaultScopes...)
	for _, s := range extra {
		m.Add(s, scopematch.Boundary)
	}
	return &Candidates{scopes: m}
}

var defaultCandidates = NewCandidates(nil)

// IsCandidate is Candidates.IsCandidate over DefaultScopes.
func IsCandidate(resource pcommon.Resource, scope pcommon.InstrumentationScope, span ptrace.Span) bool {
	return defaultCandidates.IsCandidate(resource, scope, span)
}

// IsCandidate reports whether span may still receive content: a GenAI inference span (operation chat,
// text_completion or generate_content) of a scope that emits content events, carrying no content of
// its own (gen_ai.system_instructions alone does not count).
func (c *Candidates) IsCandidate(_ pcommon.Resource, scope pcommon.InstrumentationScope, span ptrace.Span) bool {
	return c.InScope(scope) && c.IsCandidateSpan(span)
}

// InScope reports whether spans of scope may be candidates at all: a caller with many spans of one
// scope asks once, then IsCandidateSpan for each span.
func (c *Candidates) InScope(scope pcommon.InstrumentationScope) bool {
	return c.matchScope(scope.Name())
}

// IsCandidateSpan is IsCandidate for a span of a scope for which InScope holds.
func (c *Candidates) IsCandidateSpan(span ptrace.Span) bool {
	// One pass over the attributes (this runs for every kept span of these scopes).
	inference, content := false, false
	span.Attributes().Range(func(k string, v pcommon.Value) bool {
		if len(k) < len(genAIPrefix) || k[:len(genAIPrefix)] != genAIPrefix {
			return true
		}
		if k == attrOperationName {
			inference = inferenceOperations[v.Str()]
			return inference
		}
		content = isContentAttribute(k, v)
		return !content
	})
	return inference && !content && !hasContentEvent(span)
}

// hasContentEvent reports whether the span carries its content as span events: the earlier GenAI
// conventions' gen_ai.content.prompt / gen_ai.content.completion (opentelemetry-instrumentation-
// openai-v2 2.0b0 wrote them), or the content events themselves recorded on the span. Such a span
// has its content and must not wait for log records.
func hasContentEvent(span ptrace.Span) bool {
	events := span.Events()
	for i := 0; i < events.Len(); i++ {
		switch name := events.At(i).Name(); name {
		case "gen_ai.content.prompt", "gen_ai.content.completion":
			return true
		default:
			if _, ok := kindByName[name]; ok {
				return true
			}
		}
	}
	return false
}

func (c *Candidates) matchScope(name string) bool { return c.scopes.Match(name) }
