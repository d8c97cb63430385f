package observation

import (
	"encoding/json"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// ioSpan is a span of the given scope with attributes and events (name → attributes).
type ioSpan struct {
	scope  string
	attrs  map[string]any
	events []ioEvent
}

type ioEvent struct {
	name  string
	attrs map[string]any
}

func (s ioSpan) view(t *testing.T) View {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(s.scope)
	span := ss.Spans().AppendEmpty()
	span.SetName("span")
	if err := span.Attributes().FromRaw(s.attrs); err != nil {
		t.Fatal(err)
	}
	for _, e := range s.events {
		ev := span.Events().AppendEmpty()
		ev.SetName(e.name)
		if err := ev.Attributes().FromRaw(e.attrs); err != nil {
			t.Fatal(err)
		}
	}
	return NewView(span, rs.Resource(), ss.Scope())
}

// sameJSON compares two texts as JSON when both are JSON, else as text.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// One case per convention of the platform's input/output order, with the attribute shapes the
// instrumentations send: the raw input and output the platform shows, and the text the checks
// read.
func TestInputOutputPerConvention(t *testing.T) {
	vercelPrompt := `[{"role":"system","content":"Answer in JSON."},{"role":"user","content":[{"type":"text","text":"Capital of France?"}]}]`
	genAIIn := `[{"role":"user","parts":[{"type":"text","content":"How do I pick a lock?"}]}]`
	genAIOut := `[{"role":"assistant","parts":[{"type":"text","content":"I'm sorry, but I can't help with that."}],"finish_reason":"stop"}]`
	tests := []struct {
		name              string
		span              ioSpan
		in, out           string
		inText, outText   string
		noInput, noOutput bool
	}{
		{name: "svc SDK", span: ioSpan{scope: "svc-sdk", attrs: map[string]any{
			"svc.observation.input": `{"question":"hi"}`, "svc.observation.output": "hello",
			"gen_ai.input.messages": genAIIn}},
			in: `{"question":"hi"}`, out: "hello", inText: `{"question":"hi"}`, outText: "hello"},
		{name: "svc SDK: one side set, the other stays empty", span: ioSpan{scope: "svc-sdk", attrs: map[string]any{
			"svc.observation.output": "hello", "gen_ai.input.messages": genAIIn}},
			noInput: true, out: "hello", outText: "hello"},
		{name: "Vercel AI SDK doGenerate, JSON text", span: ioSpan{scope: "ai", attrs: map[string]any{
			"ai.operationId": "ai.generateText.doGenerate", "operation.name": "ai.generateText.doGenerate",
			"ai.model.id": "gpt-4o-mini", "ai.model.provider": "openai.chat", "gen_ai.system": "openai.chat",
			"gen_ai.request.model": "gpt-4o-mini", "ai.prompt.messages": vercelPrompt,
			"ai.response.text": `{"capital":"Paris"}`, "ai.response.finishReason": "stop",
			"ai.usage.promptTokens": int64(20), "ai.usage.completionTokens": int64(8)}},
			in: vercelPrompt, out: `{"capital":"Paris"}`, inText: "Answer in JSON.\nCapital of France?", outText: `{"capital":"Paris"}`},
		{name: "Vercel AI SDK outer span", span: ioSpan{scope: "ai", attrs: map[string]any{
			"ai.operationId": "ai.generateText", "ai.prompt": `{"prompt":"Capital of France?"}`, "ai.response.text": "Paris."}},
			in: `{"prompt":"Capital of France?"}`, out: "Paris.", inText: `{"prompt":"Capital of France?"}`, outText: "Paris."},
		{name: "Vercel AI SDK text and tool calls", span: ioSpan{scope: "ai", attrs: map[string]any{
			"ai.prompt.messages": vercelPrompt, "ai.response.text": "Let me look.",
			"ai.response.toolCalls": `[{"toolCallType":"function","toolCallId":"call_1","toolName":"weather","args":"{\"city\":\"Paris\"}"}]`}},
			in:      vercelPrompt,
			out:     `{"content":"Let me look.","role":"assistant","tool_calls":[{"args":"{\"city\":\"Paris\"}","toolCallId":"call_1","toolCallType":"function","toolName":"weather"}]}`,
			inText:  "Answer in JSON.\nCapital of France?",
			outText: "Let me look."},
		{name: "Vercel AI SDK object", span: ioSpan{scope: "ai", attrs: map[string]any{
			"ai.operationId": "ai.generateObject.doGenerate", "ai.prompt.messages": vercelPrompt, "ai.response.object": `{"text":"x","role_hint":1}`}},
			in: vercelPrompt, out: `{"text":"x","role_hint":1}`, inText: "Answer in JSON.\nCapital of France?", outText: `{"text":"x","role_hint":1}`},
		{name: "Vercel AI SDK: a side it lacks from the GenAI messages", span: ioSpan{scope: "ai", attrs: map[string]any{
			"ai.response.text": "Paris.", "gen_ai.input.messages": genAIIn}},
			in: genAIIn, out: "Paris.", inText: "How do I pick a lock?", outText: "Paris."},
		{name: "ai attributes outside scope ai are not read", span: ioSpan{scope: "other", attrs: map[string]any{
			"ai.response.text": "Paris."}}, noInput: true, noOutput: true},
		{name: "GenAI semconv JSON on the span (official openai instrumentation), a refusal", span: ioSpan{
			scope: "@opentelemetry/instrumentation-openai", attrs: map[string]any{
				"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
				"gen_ai.input.messages": genAIIn, "gen_ai.output.messages": genAIOut}},
			in: genAIIn, out: genAIOut, inText: "How do I pick a lock?", outText: "I'm sorry, but I can't help with that."},
		{name: "GenAI system instructions first", span: ioSpan{scope: "x", attrs: map[string]any{
			"gen_ai.system_instructions": `[{"type":"text","content":"Be terse."}]`, "gen_ai.input.messages": genAIIn}},
			in:     `[{"role":"system","parts":[{"type":"text","content":"Be terse."}]},{"role":"user","parts":[{"type":"text","content":"How do I pick a lock?"}]}]`,
			inText: "Be terse.\nHow do I pick a lock?", noOutput: true},
		{name: "GenAI operation details event", span: ioSpan{scope: "x", events: []ioEvent{{
			name: "gen_ai.client.inference.operation.details", attrs: map[string]any{
				"gen_ai.input.messages": genAIIn, "gen_ai.output.messages": genAIOut}}}},
			in: genAIIn, out: genAIOut, inText: "How do I pick a lock?", outText: "I'm sorry, but I can't help with that."},
		{name: "GenAI message and choice events", span: ioSpan{scope: "opentelemetry.instrumentation.openai_v2", events: []ioEvent{
			{name: "gen_ai.system.message", attrs: map[string]any{"content": "Be terse."}},
			{name: "gen_ai.user.message", attrs: map[string]any{"content": "Capital of France?"}},
			{name: "gen_ai.choice", attrs: map[string]any{"index": int64(0), "finish_reason": "stop",
				"message": `{"role":"assistant","content":"Paris."}`}}}},
			in:  `[{"content":"Be terse.","role":"system"},{"content":"Capital of France?","role":"user"}]`,
			out: `{"finish_reason":"stop","index":0,"message":"{\"role\":\"assistant\",\"content\":\"Paris.\"}"}`, inText: "Be terse.\nCapital of France?", outText: "Paris."},
		{name: "GenAI content events", span: ioSpan{scope: "x", events: []ioEvent{
			{name: "gen_ai.content.prompt", attrs: map[string]any{"gen_ai.prompt": "Capital of France?"}},
			{name: "gen_ai.content.completion", attrs: map[string]any{"gen_ai.completion": "Paris."}}}},
			in: "Capital of France?", out: "Paris.", inText: "Capital of France?", outText: "Paris."},
		{name: "MLflow", span: ioSpan{scope: "mlflow", attrs: map[string]any{
			"mlflow.spanInputs": `{"messages":[{"role":"user","content":"hi"}]}`, "mlflow.spanOutputs": `"hello"`}},
			in: `{"messages":[{"role":"user","content":"hi"}]}`, out: `"hello"`, inText: `{"messages":[{"role":"user","content":"hi"}]}`, outText: `"hello"`},
		{name: "OpenLLMetry entity", span: ioSpan{scope: "traceloop", attrs: map[string]any{
			"traceloop.entity.input": `{"inputs":{"q":"hi"}}`, "traceloop.entity.output": `{"outputs":"hello"}`}},
			in: `{"inputs":{"q":"hi"}}`, out: `{"outputs":"hello"}`, inText: `{"inputs":{"q":"hi"}}`, outText: `{"outputs":"hello"}`},
		{name: "OpenInference values before its indexed messages", span: ioSpan{scope: "openinference.instrumentation.openai", attrs: map[string]any{
			"openinference.span.kind": "LLM", "input.value": `{"messages":[{"role":"user","content":"hi"}]}`, "output.value": "hello",
			"llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "hi"}},
			in: `{"messages":[{"role":"user","content":"hi"}]}`, out: "hello", inText: `{"messages":[{"role":"user","content":"hi"}]}`, outText: "hello"},
		{name: "OpenInference indexed messages", span: ioSpan{scope: "openinference.instrumentation.openai", attrs: map[string]any{
			"llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "hi",
			"llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "hello"}},
			in: `[{"message":{"content":"hi","role":"user"}}]`, out: `[{"message":{"content":"hello","role":"assistant"}}]`, inText: "hi", outText: "hello"},
		{name: "OpenLLMetry indexed prompt and completion", span: ioSpan{scope: "opentelemetry.instrumentation.openai", attrs: map[string]any{
			"gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "Be terse.",
			"gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "Capital of France?",
			"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "I cannot answer that.",
			"gen_ai.completion.0.finish_reason": "stop"}},
			in:     `[{"content":"Be terse.","role":"system"},{"content":"Capital of France?","role":"user"}]`,
			out:    `[{"content":"I cannot answer that.","finish_reason":"stop","role":"assistant"}]`,
			inText: "Be terse.\nCapital of France?", outText: "I cannot answer that."},
		{name: "pydantic-ai", span: ioSpan{scope: "pydantic-ai", attrs: map[string]any{
			"pydantic_ai.all_messages": `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`, "final_result": "hello"}},
			in: `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`, out: "hello", inText: "hi", outText: "hello"},
		{name: "tool arguments and response", span: ioSpan{scope: "x", attrs: map[string]any{
			"tool_arguments": `{"city":"Paris"}`, "tool_response": `{"temp":21}`}},
			in: `{"city":"Paris"}`, out: `{"temp":21}`, inText: `{"city":"Paris"}`, outText: `{"temp":21}`},
		{name: "GenAI tool call", span: ioSpan{scope: "x", attrs: map[string]any{
			"gen_ai.tool.name": "weather", "gen_ai.tool.call.arguments": `{"city":"Paris"}`, "gen_ai.tool.call.result": "21"}},
			in: `{"city":"Paris"}`, out: "21", inText: `{"city":"Paris"}`, outText: "21"},
		{name: "genkit decides for its scope", span: ioSpan{scope: "genkit-tracer", attrs: map[string]any{
			"genkit:output": `"Paris."`, "gen_ai.input.messages": genAIIn}},
			noInput: true, out: "Paris.", outText: "Paris."},
		{name: "messages with only a tool call have no text", span: ioSpan{scope: "x", attrs: map[string]any{
			"gen_ai.output.messages": `[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"weather","arguments":{"city":"Paris"}}]}]`}},
			noInput: true, out: `[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"weather","arguments":{"city":"Paris"}}]}]`, outText: ""},
		{name: "OpenAI chat refusal field", span: ioSpan{scope: "x", attrs: map[string]any{
			"output.value": `{"role":"assistant","content":null,"refusal":"I can't help with that."}`}},
			noInput: true, out: `{"role":"assistant","content":null,"refusal":"I can't help with that."}`, outText: "I can't help with that."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.span.view(t)
			in, hasIn := v.Input()
			out, hasOut := v.Output()
			if hasIn == tt.noInput || !sameJSON(in, tt.in) {
				t.Errorf("input %q (%v), want %q", in, hasIn, tt.in)
			}
			if hasOut == tt.noOutput || !sameJSON(out, tt.out) {
				t.Errorf("output %q (%v), want %q", out, hasOut, tt.out)
			}
			if text, _ := v.InputText(); text != tt.inText {
				t.Errorf("input text %q, want %q", text, tt.inText)
			}
			if text, _ := v.OutputText(); text != tt.outText {
				t.Errorf("output text %q, want %q", text, tt.outText)
			}
		})
	}
}

// The platform's fields beside input and output, for the Vercel AI SDK and OpenInference shapes.
func TestFieldsPerConvention(t *testing.T) {
	vercel := ioSpan{scope: "ai", attrs: map[string]any{
		"ai.operationId": "ai.generateText.doGenerate", "ai.telemetry.functionId": "answer",
		"ai.model.id": "gpt-4o-mini", "gen_ai.request.model": "gpt-4o-mini-req",
		"ai.usage.inputTokens": int64(100), "ai.usage.outputTokens": int64(40), "ai.usage.cachedInputTokens": int64(30),
		"ai.usage.reasoningTokens":     int64(10),
		"ai.telemetry.metadata.userId": "u-7", "ai.telemetry.metadata.sessionId": "s-9",
		"ai.telemetry.metadata.response_format": "json"}}.view(t)
	if vercel.Name() != "answer:ai.generateText.doGenerate" || vercel.Model() != "gpt-4o-mini" || vercel.Type() != TypeGeneration {
		t.Errorf("name %q model %q type %q", vercel.Name(), vercel.Model(), vercel.Type())
	}
	if in, out, total, ok := vercel.Usage(); !ok || in != 70 || out != 30 || total != 140 {
		t.Errorf("usage %v %v %v %v: input minus cached, output minus reasoning, total every token", in, out, total, ok)
	}
	if vercel.UserID() != "u-7" || vercel.SessionID() != "s-9" {
		t.Errorf("user %q session %q", vercel.UserID(), vercel.SessionID())
	}
	if f, ok := vercel.Metadata("response_format"); !ok || f != "json" {
		t.Errorf("metadata from ai.telemetry.metadata: %v %v", f, ok)
	}
	if _, ok := vercel.Metadata("userId"); ok {
		t.Error("userId is the trace's user, not metadata")
	}
	agent := ioSpan{scope: "x", attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "m",
		"gen_ai.usage.input_tokens": int64(5)}}.view(t)
	if agent.Model() != "" || agent.Type() != TypeAgent {
		t.Errorf("agent: model %q type %q", agent.Model(), agent.Type())
	}
	if _, _, _, ok := agent.Usage(); ok {
		t.Error("agent spans have no usage")
	}
	levels := ioSpan{scope: "x", attrs: map[string]any{"svc.observation.level": "warn", "svc.observation.status_message": "slow"}}.view(t)
	if levels.Level() != LevelWarning || levels.StatusMessage() != "slow" {
		t.Errorf("level %q status %q", levels.Level(), levels.StatusMessage())
	}
	blob := ioSpan{scope: "x", attrs: map[string]any{"svc.observation.metadata": `{"tier":"gold","limits":{"rpm":60}}`,
		"svc.observation.metadata.tier": "platinum", "deployment.environment.name": "Prod"}}.view(t)
	if x, _ := blob.Metadata("tier"); x != "platinum" {
		t.Errorf("a per-key value beats the blob: %v", x)
	}
	if x, _ := blob.Metadata("limits.rpm"); x != float64(60) {
		t.Errorf("blob member: %v", x)
	}
	if blob.Environment() != "prod" {
		t.Errorf("environment %q", blob.Environment())
	}
	for env, want := range map[string]string{"svc-staging": "staging", "has space": DefaultEnvironment, "UPPER_ok-1": "upper_ok-1"} {
		if got := normalEnvironment(env); got != want {
			t.Errorf("environment %q → %q, want %q", env, got, want)
		}
	}
}
