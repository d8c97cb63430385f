package genaicontent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestIsContentRecord(t *testing.T) {
	tests := []struct {
		name      string
		eventName string // the record's EventName field
		attr      string // its event.name attribute
		want      Kind
		ok        bool
	}{
		{name: "JS: attribute only", attr: "gen_ai.user.message", want: KindUserMessage, ok: true},
		{name: "Python: field only", eventName: "gen_ai.system.message", want: KindSystemMessage, ok: true},
		{name: "assistant", eventName: "gen_ai.assistant.message", want: KindAssistantMessage, ok: true},
		{name: "tool", attr: "gen_ai.tool.message", want: KindToolMessage, ok: true},
		{name: "choice", attr: "gen_ai.choice", want: KindChoice, ok: true},
		{name: "details", eventName: "gen_ai.client.inference.operation.details", want: KindOperationDetails, ok: true},
		{name: "field wins over attribute", eventName: "gen_ai.choice", attr: "gen_ai.user.message", want: KindChoice, ok: true},
		{name: "evaluation results stay scores", eventName: "gen_ai.evaluation.result"},
		{name: "evaluation result by attribute", attr: "gen_ai.evaluation.result"},
		{name: "svc.score", eventName: "svc.score"},
		{name: "plain log line"},
		{name: "similar name", attr: "gen_ai.user.messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr := plog.NewLogRecord()
			lr.SetEventName(tt.eventName)
			if tt.attr != "" {
				lr.Attributes().PutStr("event.name", tt.attr)
			}
			kind, ok := IsContentRecord(lr)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, kind)
			var c Content
			assert.Equal(t, tt.ok, c.Add(lr), "Add takes exactly the content records")
			assert.Equal(t, !tt.ok, c.Empty())
		})
	}
}

func TestIsCandidate(t *testing.T) {
	tests := []struct {
		name   string
		scope  string
		attrs  map[string]any
		events []string
		extra  []string
		want   bool
	}{
		{name: "carries its content as gen_ai.content.* span events", scope: "opentelemetry.instrumentation.openai_v2",
			attrs: map[string]any{"gen_ai.operation.name": "chat"}, events: []string{"gen_ai.content.prompt", "gen_ai.content.completion"}},
		{name: "carries content events on the span", scope: "opentelemetry.instrumentation.openai_v2",
			attrs: map[string]any{"gen_ai.operation.name": "chat"}, events: []string{"gen_ai.user.message", "gen_ai.choice"}},
		{name: "other span events are no content", scope: "opentelemetry.instrumentation.openai_v2",
			attrs: map[string]any{"gen_ai.operation.name": "chat"}, events: []string{"exception"}, want: true},
		{name: "python openai-v2 chat without content", scope: "opentelemetry.instrumentation.openai_v2",
			attrs: map[string]any{"gen_ai.operation.name": "chat"}, want: true},
		{name: "JS chat", scope: "@opentelemetry/instrumentation-openai",
			attrs: map[string]any{"gen_ai.operation.name": "chat"}, want: true},
		{name: "system instructions alone are not content", scope: "@opentelemetry/instrumentation-openai",
			attrs: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.system_instructions": "Be brief."}, want: true},
		{name: "text completion", scope: "opentelemetry.instrumentation.openai_v2",
			attrs: map[string]any{"gen_ai.operation.name": "text_completion"}, want: true},
		{name: "generate_content", scope: "opentelemetry.instrumentation.google_genai",
			attrs: map[string]any{"gen_ai.operation.name": "generate_content"}, want: true},
		{name: "sub-scope", scope: "opentelemetry.instrumentation.openai_v2.responses",
			attrs: map[string]any{"gen_ai.operation.name": "chat"}, want: true},
		{name: "carries input messages", scope: "opentelemetry.instrumentation.openai_v2",
			attrs: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.input.messages": `[{"role":"user","parts":[]}]`}},
		{name: "carries output messages", scope: "opentelemetry.instrumentation.openai_v2",
			attrs: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.output.messages": `[{"role":"assistant","parts":[]}]`}},
		{name: "carries OpenLLMetry prompts", scope: "opentelemetry.instrumentation.vertexai",
			attrs: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.prompt.0.content": "hi"}},
		{name: "empty messages do not count", scope: "opentelemetry.instrumentation.openai_v2",
			attrs: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[]"}, want: true},
		{name: "embeddings have no content", scope: "opentelemetry.instrumentation.openai_v2",
			attrs: map[string]any{"gen_ai.operation.name": "embeddings"}},
		{name: "tool execution", scope: "opentelemetry.instrumentation.openai_v2",
			attrs: map[string]any{"gen_ai.operation.name": "execute_tool"}},
		{name: "no operation", scope: "opentelemetry.instrumentation.openai_v2", attrs: map[string]any{}},
		{name: "scope that puts content on spans", scope: "opentelemetry.instrumentation.openai",
			attrs: map[string]any{"gen_ai.operation.name": "chat"}},
		{name: "boundary: prefix without dot", scope: "opentelemetry.instrumentation.openai_v2x",
			attrs: map[string]any{"gen_ai.operation.name": "chat"}},
		{name: "extra scope from config", scope: "my-company.llm", extra: []string{"my-company.llm"},
			attrs: map[string]any{"gen_ai.operation.name": "chat"}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scope := pcommon.NewInstrumentationScope()
			scope.SetName(tt.scope)
			span := ptrace.NewSpan()
			_ = span.Attributes().FromRaw(tt.attrs)
			for _, e := range tt.events {
				span.Events().AppendEmpty().SetName(e)
			}
			got := NewCandidates(tt.extra).IsCandidate(pcommon.NewResource(), scope, span)
			assert.Equal(t, tt.want, got)
			if tt.extra == nil {
				assert.Equal(t, tt.want, IsCandidate(pcommon.NewResource(), scope, span))
			}
		})
	}
}

func TestContentCompleteness(t *testing.T) {
	user := plog.NewLogRecord()
	user.Attributes().PutStr("event.name", "gen_ai.user.message")
	_ = user.Body().SetEmptyMap().FromRaw(map[string]any{"content": "hi"})
	choice := plog.NewLogRecord()
	choice.Attributes().PutStr("event.name", "gen_ai.choice")
	_ = choice.Body().SetEmptyMap().FromRaw(map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"content": "hello"}})

	var c Content
	assert.False(t, c.HasOutput())
	c.Add(user)
	assert.True(t, c.HasInput())
	assert.False(t, c.HasOutput(), "input alone does not complete a call")
	c.Add(choice)
	assert.True(t, c.HasOutput())
	assert.Positive(t, c.Bytes())

	// A choice sent again (a client's retry) replaces the earlier copy instead of adding a message.
	c.Add(choice)
	out, _ := c.outputMessages()
	assert.Len(t, out, 1)

	var nilContent *Content
	assert.True(t, nilContent.Empty())
	assert.False(t, Apply(ptrace.NewSpan(), nilContent))
}
