package platform

import (
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Table-driven tests of the field rules of docs/contract.md §14 and §5.2, each on one span built in memory.

// spanIn is one span for records(): its attributes, resource, scope and events.
type spanIn struct {
	attrs    map[string]any
	resource map[string]any
	scope    string
	version  string
	name     string
	parent   string
	status   ptrace.StatusCode
	message  string
	events   []eventIn
}

type eventIn struct {
	name  string
	attrs map[string]any
}

func recordOf(t *testing.T, in spanIn) (Observation, traceEvent, string) {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	if err := rs.Resource().Attributes().FromRaw(in.resource); err != nil {
		t.Fatal(err)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(in.scope)
	ss.Scope().SetVersion(in.version)
	span := ss.Spans().AppendEmpty()
	if in.name == "" {
		in.name = "span name"
	}
	span.SetName(in.name)
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(testStart))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(testStart.Add(2 * time.Second)))
	span.Status().SetCode(in.status)
	span.Status().SetMessage(in.message)
	if err := span.Attributes().FromRaw(in.attrs); err != nil {
		t.Fatal(err)
	}
	for _, e := range in.events {
		ev := span.Events().AppendEmpty()
		ev.SetName(e.name)
		if err := ev.Attributes().FromRaw(e.attrs); err != nil {
			t.Fatal(err)
		}
	}
	sp := spanView{span: span, attrs: span.Attributes(), resource: rs.Resource().Attributes(), scopeName: in.scope,
		scopeVersion: in.version, scopeAttrs: ss.Scope().Attributes()}
	return records(sp, spanIDs{traceID: "t1", spanID: "s1", parentID: in.parent})
}

func TestRecordType(t *testing.T) {
	py := map[string]any{"telemetry.sdk.language": "python"}
	tests := []struct {
		name string
		in   spanIn
		want string
	}{
		{"nothing", spanIn{attrs: map[string]any{"http.method": "GET"}}, TypeSpan},
		{"explicit", spanIn{attrs: map[string]any{"svc.observation.type": "tool"}}, TypeTool},
		{"explicit beats model", spanIn{attrs: map[string]any{"svc.observation.type": "span", "gen_ai.request.model": "m"}}, TypeSpan},
		{"explicit upper case unmapped falls through", spanIn{attrs: map[string]any{"svc.observation.type": "TOOL"}}, TypeSpan},
		{"unknown explicit falls through to model", spanIn{attrs: map[string]any{"svc.observation.type": "llm", "model": "m"}}, TypeGeneration},
		{"python sdk 3.3 span with model", spanIn{resource: py, scope: "svc-sdk", version: "3.3.0",
			attrs: map[string]any{"svc.observation.type": "span", "svc.observation.model.name": "m"}}, TypeGeneration},
		{"python sdk without version, usage", spanIn{resource: py, scope: "svc-sdk",
			attrs: map[string]any{"svc.observation.type": "span", "svc.observation.usage_details": "{}"}}, TypeGeneration},
		{"python sdk 3.4 span stays span", spanIn{resource: py, scope: "svc-sdk", version: "3.4.0",
			attrs: map[string]any{"svc.observation.type": "span", "svc.observation.model.name": "m"}}, TypeSpan},
		{"openinference LLM", spanIn{attrs: map[string]any{"openinference.span.kind": "LLM"}}, TypeGeneration},
		{"openinference RETRIEVER", spanIn{attrs: map[string]any{"openinference.span.kind": "RETRIEVER"}}, TypeRetriever},
		{"openinference beats operation", spanIn{attrs: map[string]any{"openinference.span.kind": "CHAIN", "gen_ai.operation.name": "chat"}}, TypeChain},
		{"chat", spanIn{attrs: map[string]any{"gen_ai.operation.name": "chat"}}, TypeGeneration},
		{"generate", spanIn{attrs: map[string]any{"gen_ai.operation.name": "generate"}}, TypeGeneration},
		{"embeddings", spanIn{attrs: map[string]any{"gen_ai.operation.name": "embeddings"}}, TypeEmbedding},
		{"invoke_agent", spanIn{attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "m"}}, TypeAgent},
		{"execute_tool", spanIn{attrs: map[string]any{"gen_ai.operation.name": "execute_tool"}}, TypeTool},
		{"genkit subtype", spanIn{attrs: map[string]any{"genkit:metadata:subtype": "tool"}}, TypeTool},
		{"vercel doGenerate with model", spanIn{scope: "ai", attrs: map[string]any{"operation.name": "ai.generateText.doGenerate", "ai.model.id": "m"}}, TypeGeneration},
		{"vercel streamText parent without model key", spanIn{scope: "ai", attrs: map[string]any{"operation.name": "ai.streamText"}}, TypeSpan},
		{"vercel doEmbed", spanIn{scope: "ai", attrs: map[string]any{"ai.operationId": "ai.embedMany.doEmbed", "ai.model.id": "m"}}, TypeEmbedding},
		{"vercel toolCall", spanIn{scope: "ai", attrs: map[string]any{"operation.name": "ai.toolCall"}}, TypeTool},
		{"tool name", spanIn{attrs: map[string]any{"gen_ai.tool.name": "search"}}, TypeTool},
		{"empty tool name is not truthy", spanIn{attrs: map[string]any{"gen_ai.tool.name": ""}}, TypeSpan},
		{"flue tool", spanIn{attrs: map[string]any{"flue.tool.name": "x"}}, TypeTool},
		{"flue task", spanIn{attrs: map[string]any{"flue.task.id": "x"}}, TypeAgent},
		{"llm.model_name alone", spanIn{attrs: map[string]any{"llm.model_name": "m"}}, TypeGeneration},
		{"model key alone", spanIn{attrs: map[string]any{"model": "m"}}, TypeGeneration},
		{"response model alone", spanIn{attrs: map[string]any{"gen_ai.response.model": "m"}}, TypeGeneration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if o, _, _ := recordOf(t, tt.in); o.Type != tt.want {
				t.Errorf("type %q, want %q", o.Type, tt.want)
			}
		})
	}
}

func TestRecordNameEnvironmentVersionRelease(t *testing.T) {
	tests := []struct {
		name              string
		in                spanIn
		wantName, wantEnv string
		wantVersion       any
		wantRelease       string
	}{
		{"span name", spanIn{name: "chat"}, "chat", "default", nil, ""},
		{"tool name first", spanIn{name: "x", attrs: map[string]any{"gen_ai.tool.name": "search", "logfire.msg": "m"}}, "search", "default", nil, ""},
		{"logfire message", spanIn{name: "x", attrs: map[string]any{"logfire.msg": "hello"}}, "hello", "default", nil, ""},
		{"vercel operation id with function id", spanIn{name: "x", attrs: map[string]any{"ai.operationId": "ai.generateText", "ai.telemetry.functionId": "fn"}}, "fn:ai.generateText", "default", nil, ""},
		{"vercel tool call name", spanIn{name: "x", attrs: map[string]any{"ai.toolCall.name": "weather", "ai.operationId": "ai.toolCall"}}, "weather", "default", nil, ""},
		{"env from span", spanIn{attrs: map[string]any{"svc.environment": "Staging"}, resource: map[string]any{"svc.environment": "prod"}}, "span name", "staging", nil, ""},
		{"env from resource", spanIn{resource: map[string]any{"deployment.environment.name": "prod"}}, "span name", "prod", nil, ""},
		{"svc env beats deployment env on the resource", spanIn{attrs: map[string]any{"deployment.environment": "a"}, resource: map[string]any{"svc.environment": "b"}}, "span name", "b", nil, ""},
		{"svc- prefix stripped", spanIn{attrs: map[string]any{"svc.environment": "svc-prod"}}, "span name", "prod", nil, ""},
		{"invalid env", spanIn{attrs: map[string]any{"svc.environment": "my env"}}, "span name", "default", nil, ""},
		{"version from span", spanIn{attrs: map[string]any{"svc.version": "1.2"}, resource: map[string]any{"service.version": "9"}}, "span name", "default", "1.2", ""},
		{"version from resource", spanIn{resource: map[string]any{"service.version": "9.1"}}, "span name", "default", "9.1", ""},
		{"release span then resource", spanIn{resource: map[string]any{"svc.release": "r2"}}, "span name", "default", nil, "r2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, _ := recordOf(t, tt.in)
			if o.Name != tt.wantName || o.Environment != tt.wantEnv || !reflect.DeepEqual(o.Version, tt.wantVersion) || o.Release != tt.wantRelease {
				t.Errorf("name %q env %q version %#v release %q, want %q %q %#v %q", o.Name, o.Environment, o.Version, o.Release,
					tt.wantName, tt.wantEnv, tt.wantVersion, tt.wantRelease)
			}
		})
	}
}

func TestRecordLevelAndStatusMessage(t *testing.T) {
	tests := []struct {
		name        string
		in          spanIn
		wantLevel   string
		wantMessage string
	}{
		{"default", spanIn{}, LevelDefault, ""},
		{"error status", spanIn{status: ptrace.StatusCodeError, message: "boom"}, LevelError, "boom"},
		{"alias warn", spanIn{attrs: map[string]any{"svc.observation.level": "warn"}, status: ptrace.StatusCodeError}, LevelWarning, ""},
		{"alias verbose", spanIn{attrs: map[string]any{"svc.observation.level": "VERBOSE"}}, LevelDebug, ""},
		{"alias fatal", spanIn{attrs: map[string]any{"svc.observation.level": "Fatal"}}, LevelError, ""},
		{"alias success", spanIn{attrs: map[string]any{"svc.observation.level": "success"}, status: ptrace.StatusCodeError}, LevelDefault, ""},
		{"unknown level falls through", spanIn{attrs: map[string]any{"svc.observation.level": "loud"}, status: ptrace.StatusCodeError}, LevelError, ""},
		{"svc status message first", spanIn{attrs: map[string]any{"svc.observation.status_message": "mine"}, message: "otel"}, LevelDefault, "mine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, _ := recordOf(t, tt.in)
			if o.Level != tt.wantLevel || o.StatusMessage != tt.wantMessage {
				t.Errorf("level %q message %q, want %q %q", o.Level, o.StatusMessage, tt.wantLevel, tt.wantMessage)
			}
		})
	}
}

func TestRecordModelAndParameters(t *testing.T) {
	tests := []struct {
		name       string
		in         spanIn
		wantModel  string
		wantParams map[string]any
	}{
		{"svc model first", spanIn{attrs: map[string]any{"svc.observation.type": "generation", "svc.observation.model.name": "a", "gen_ai.response.model": "b"}}, "a", nil},
		{"response before request", spanIn{attrs: map[string]any{"gen_ai.request.model": "req", "gen_ai.response.model": "resp"}}, "resp", nil},
		{"vercel model id before request model", spanIn{scope: "ai", attrs: map[string]any{"operation.name": "ai.generateText.doGenerate", "ai.model.id": "v", "gen_ai.request.model": "req"}}, "v", nil},
		{"openinference", spanIn{attrs: map[string]any{"llm.model_name": "oi"}}, "oi", nil},
		{"agent operation has no model", spanIn{attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "m", "svc.observation.type": "agent"}}, "", nil},
		{"request parameters", spanIn{attrs: map[string]any{"gen_ai.request.model": "m", "gen_ai.request.temperature": 0.2,
			"gen_ai.request.max_tokens": int64(10), "gen_ai.request.stop_sequences": []any{"x"}}}, "m",
			map[string]any{"temperature": 0.2, "max_tokens": int64(10), "stop_sequences": `["x"]`}},
		{"svc parameters JSON", spanIn{attrs: map[string]any{"gen_ai.request.model": "m", "svc.observation.model.parameters": `{"temperature":1,"stream":true}`,
			"gen_ai.request.top_p": 0.5}}, "m", map[string]any{"temperature": 1.0, "stream": "true"}},
		{"vercel settings overlaid by svc parameters", spanIn{scope: "ai", attrs: map[string]any{"operation.name": "ai.generateText.doGenerate", "ai.model.id": "m",
			"ai.settings.maxRetries": int64(2), "ai.settings.temperature": 0.1, "svc.observation.model.parameters": `{"temperature":0.9}`}}, "m",
			map[string]any{"maxRetries": int64(2), "temperature": 0.9}},
		{"openinference invocation parameters", spanIn{attrs: map[string]any{"llm.model_name": "m", "llm.invocation_parameters": `{"temperature":0.3}`}}, "m",
			map[string]any{"temperature": 0.3}},
		{"span loses model and parameters", spanIn{attrs: map[string]any{"svc.observation.type": "span", "gen_ai.request.model": "m", "gen_ai.request.temperature": 0.2}}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, _ := recordOf(t, tt.in)
			if o.Model != tt.wantModel || !reflect.DeepEqual(o.ModelParameters, tt.wantParams) {
				t.Errorf("model %q params %#v, want %q %#v", o.Model, o.ModelParameters, tt.wantModel, tt.wantParams)
			}
		})
	}
}

func TestRecordUsageAndCost(t *testing.T) {
	gen := func(a map[string]any) map[string]any { a["gen_ai.request.model"] = "m"; return a }
	tests := []struct {
		name      string
		in        spanIn
		wantUsage map[string]int64
		wantCost  map[string]float64
	}{
		{"semconv", spanIn{attrs: gen(map[string]any{"gen_ai.usage.input_tokens": int64(10), "gen_ai.usage.output_tokens": int64(5)})},
			map[string]int64{"input": 10, "output": 5}, nil},
		{"subtractions", spanIn{attrs: gen(map[string]any{"gen_ai.usage.input_tokens": int64(100), "gen_ai.usage.cache_read_input_tokens": int64(30),
			"gen_ai.usage.cache_creation_input_tokens": int64(20), "gen_ai.usage.output_tokens": int64(50), "gen_ai.usage.reasoning_tokens": int64(10)})},
			map[string]int64{"input": 50, "output": 40, "input_cached_tokens": 30, "input_cache_creation": 20, "output_reasoning_tokens": 10}, nil},
		{"openinference token counts", spanIn{attrs: gen(map[string]any{"llm.token_count.prompt": int64(7), "llm.token_count.completion": int64(3), "llm.token_count.total": int64(10)})},
			map[string]int64{"input": 7, "output": 3, "total": 10}, nil},
		{"vercel usage", spanIn{scope: "ai", attrs: map[string]any{"operation.name": "ai.generateText.doGenerate", "ai.model.id": "m",
			"ai.usage.promptTokens": int64(8), "ai.usage.completionTokens": int64(2)}}, map[string]int64{"input": 8, "output": 2}, nil},
		{"svc usage details as sent", spanIn{attrs: gen(map[string]any{"svc.observation.usage_details": `{"input":4,"output":1,"cache":2,"bad":-1,"frac":1.5}`,
			"gen_ai.usage.input_tokens": int64(99)})}, map[string]int64{"input": 4, "output": 1, "cache": 2}, nil},
		{"svc usage details not an object", spanIn{attrs: gen(map[string]any{"svc.observation.usage_details": `[1]`, "gen_ai.usage.input_tokens": int64(99)})},
			map[string]int64{}, nil},
		{"svc usage details bad JSON goes on", spanIn{attrs: gen(map[string]any{"svc.observation.usage_details": `{x`, "gen_ai.usage.input_tokens": int64(9)})},
			map[string]int64{"input": 9}, nil},
		{"negative count dropped", spanIn{attrs: gen(map[string]any{"gen_ai.usage.input_tokens": int64(-1), "gen_ai.usage.output_tokens": int64(2)})},
			map[string]int64{"output": 2}, nil},
		{"cost details", spanIn{attrs: gen(map[string]any{"svc.observation.cost_details": `{"total":0.5,"bad":-1}`})}, nil, map[string]float64{"total": 0.5}},
		{"gen_ai cost", spanIn{attrs: gen(map[string]any{"gen_ai.usage.cost": 0.25})}, nil, map[string]float64{"total": 0.25}},
		{"openinference cost", spanIn{attrs: gen(map[string]any{"llm.cost.total": 0.1})}, nil, map[string]float64{"total": 0.1}},
		{"agent has no usage or cost", spanIn{attrs: map[string]any{"gen_ai.operation.name": "agent_step", "svc.observation.type": "agent",
			"gen_ai.usage.input_tokens": int64(1), "gen_ai.usage.cost": 1.0}}, nil, nil},
		{"span body has no usage", spanIn{attrs: map[string]any{"gen_ai.usage.input_tokens": int64(1)}}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, _ := recordOf(t, tt.in)
			if !reflect.DeepEqual(o.Usage, tt.wantUsage) || !reflect.DeepEqual(o.Cost, tt.wantCost) {
				t.Errorf("usage %#v cost %#v, want %#v %#v", o.Usage, o.Cost, tt.wantUsage, tt.wantCost)
			}
		})
	}
}

func TestRecordCompletionStartAndPrompt(t *testing.T) {
	at := func(d time.Duration) *time.Time { x := testStart.Add(d); return &x }
	gen := map[string]any{"svc.observation.type": "generation"}
	with := func(a map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range gen {
			out[k] = v
		}
		for k, v := range a {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name        string
		in          spanIn
		wantStart   *time.Time
		wantPrompt  string
		wantVersion any
		wantDropped string
	}{
		{"date", spanIn{attrs: with(map[string]any{"svc.observation.completion_start_time": "2025-03-01T12:00:00.5Z"})}, at(500 * time.Millisecond), "", nil, ""},
		{"JSON-quoted date", spanIn{attrs: with(map[string]any{"svc.observation.completion_start_time": `"2025-03-01T12:00:01Z"`})}, at(time.Second), "", nil, ""},
		{"vercel ms to first chunk", spanIn{attrs: with(map[string]any{"ai.response.msToFirstChunk": 250.0})}, at(250 * time.Millisecond), "", nil, ""},
		{"prompt", spanIn{attrs: with(map[string]any{"svc.observation.prompt.name": "p", "svc.observation.prompt.version": int64(3)})}, nil, "p", int64(3), ""},
		{"legacy prompt keys", spanIn{attrs: with(map[string]any{"svc.prompt.name": "q", "svc.prompt.version": int64(1)})}, nil, "q", int64(1), ""},
		{"vercel prompt JSON", spanIn{attrs: with(map[string]any{"ai.telemetry.metadata.svcPrompt": `{"name":"v","version":2}`})}, nil, "v", int64(2), ""},
		{"string version drops the observation", spanIn{attrs: with(map[string]any{"svc.observation.prompt.name": "p", "svc.observation.prompt.version": "3"})}, nil, "p", "3", "prompt version is not an integer"},
		{"name without version drops it", spanIn{attrs: with(map[string]any{"svc.observation.prompt.name": "p"})}, nil, "p", nil, "prompt name without version"},
		{"prompt only on generations", spanIn{attrs: map[string]any{"svc.observation.type": "tool", "svc.observation.prompt.name": "p"}}, nil, "", nil, ""},
		{"int version drops it", spanIn{attrs: map[string]any{"svc.version": int64(2)}}, nil, "", nil, "version is not a string"},
		{"int service.version drops it", spanIn{resource: map[string]any{"service.version": int64(2)}}, nil, "", nil, "version is not a string"},
		{"non-string status message drops it", spanIn{attrs: map[string]any{"svc.observation.status_message": int64(2)}}, nil, "", nil, "status message is not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, dropped := recordOf(t, tt.in)
			if !reflect.DeepEqual(o.CompletionStartTime, tt.wantStart) || o.PromptName != tt.wantPrompt ||
				!reflect.DeepEqual(o.PromptVersion, tt.wantVersion) || dropped != tt.wantDropped {
				t.Errorf("completion start %v prompt %q %#v dropped %q, want %v %q %#v %q", o.CompletionStartTime, o.PromptName,
					o.PromptVersion, dropped, tt.wantStart, tt.wantPrompt, tt.wantVersion, tt.wantDropped)
			}
		})
	}
}

func TestRecordInputOutput(t *testing.T) {
	semconv := map[string]any{"gen_ai.input.messages": `[{"role":"user","content":"hi"}]`, "gen_ai.output.messages": `[{"role":"assistant","content":"yo"}]`}
	tests := []struct {
		name    string
		in      spanIn
		wantIn  string
		wantOut string
	}{
		{"1: svc input only, output stays empty", spanIn{attrs: map[string]any{"svc.observation.input": "q", "gen_ai.output.messages": "o"}}, "q", ""},
		{"1: trace IO is not observation IO", spanIn{parent: "p", attrs: map[string]any{"svc.trace.input": "t", "input.value": "v"}}, "v", ""},
		{"2: genkit parsed", spanIn{scope: "genkit-tracer", attrs: map[string]any{"genkit:input": `{"a":1}`, "genkit:output": `"x"`, "input.value": "no"}}, `{"a":1}`, "x"},
		{"3: vercel prompt messages and text", spanIn{scope: "ai", attrs: map[string]any{"ai.prompt.messages": `[{"role":"user"}]`, "ai.response.text": "answer"}}, `[{"role":"user"}]`, "answer"},
		{"3: vercel text with tool calls", spanIn{scope: "ai", attrs: map[string]any{"ai.prompt": "p", "ai.response.text": "t", "ai.response.toolCalls": `[{"id":"1"}]`}},
			"p", `{"content":"t","role":"assistant","tool_calls":[{"id":"1"}]}`},
		{"3: vercel object output", spanIn{scope: "ai", attrs: map[string]any{"ai.prompt": "p", "ai.response.object": `{"k":1}`}}, "p", `{"k":1}`},
		{"3: vercel gaps from step 10", spanIn{scope: "ai", attrs: map[string]any{"ai.response.text": "t", "gen_ai.input.messages": "semconv in"}}, "semconv in", "t"},
		{"3: not in another scope", spanIn{scope: "other", attrs: map[string]any{"ai.prompt": "p", "input": "i"}}, "i", ""},
		{"5: operation details event", spanIn{events: []eventIn{{"gen_ai.client.inference.operation.details", semconv}}, attrs: map[string]any{"input.value": "no"}},
			`[{"role":"user","content":"hi"}]`, `[{"role":"assistant","content":"yo"}]`},
		{"6: message events and one choice", spanIn{events: []eventIn{
			{"gen_ai.system.message", map[string]any{"content": "sys"}},
			{"gen_ai.user.message", map[string]any{"content": "hi"}},
			{"gen_ai.choice", map[string]any{"index": int64(0), "finish_reason": "stop"}}}},
			`[{"content":"sys","role":"system"},{"content":"hi","role":"user"}]`, `{"finish_reason":"stop","index":0}`},
		{"7: content events", spanIn{events: []eventIn{{"gen_ai.content.prompt", map[string]any{"gen_ai.prompt": "P"}},
			{"gen_ai.content.completion", map[string]any{"gen_ai.completion": "C"}}}, attrs: map[string]any{"input.value": "no"}}, "P", "C"},
		{"8: traceloop before openinference", spanIn{attrs: map[string]any{"traceloop.entity.input": "a", "input.value": "b", "output.value": "c"}}, "a", ""},
		{"8: openinference", spanIn{attrs: map[string]any{"input.value": "b", "output.value": "c", "llm.input_messages.0.message.role": "user"}}, "b", "c"},
		{"8: mlflow", spanIn{attrs: map[string]any{"mlflow.spanInputs": "mi", "mlflow.spanOutputs": "mo"}}, "mi", "mo"},
		{"8: pydantic-ai only in its scope", spanIn{scope: "pydantic-ai", attrs: map[string]any{"pydantic_ai.all_messages": "m", "final_result": "r"}}, "m", "r"},
		{"8: tool arguments", spanIn{attrs: map[string]any{"tool_arguments": "a", "tool_response": "r"}}, "a", "r"},
		{"9: openllmetry indexed", spanIn{attrs: map[string]any{"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hi",
			"gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "again", "gen_ai.completion.0.content": "yo", "gen_ai.input.messages": "no"}},
			`[{"content":"hi","role":"user"},{"content":"again","role":"user"}]`, `[{"content":"yo"}]`},
		{"9: plain gen_ai.prompt as is", spanIn{attrs: map[string]any{"gen_ai.prompt": "whole", "gen_ai.completion": "done"}}, "whole", "done"},
		{"9: openinference messages", spanIn{attrs: map[string]any{"llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "hi"}},
			`[{"message":{"content":"hi","role":"user"}}]`, ""},
		{"10: semconv messages as sent", spanIn{attrs: semconv}, `[{"role":"user","content":"hi"}]`, `[{"role":"assistant","content":"yo"}]`},
		{"10: system instructions prepended", spanIn{attrs: map[string]any{"gen_ai.system_instructions": `[{"type":"text","content":"be brief"}]`,
			"gen_ai.input.messages": `[{"role":"user","content":"hi"}]`}},
			`[{"content":[{"content":"be brief","type":"text"}],"role":"system"},{"content":"hi","role":"user"}]`, ""},
		{"10: tool call arguments", spanIn{attrs: map[string]any{"gen_ai.tool.call.arguments": `{"q":1}`, "gen_ai.tool.call.result": "r"}}, `{"q":1}`, "r"},
		{"none", spanIn{attrs: map[string]any{"x": "y"}}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, _ := recordOf(t, tt.in)
			if o.Input != tt.wantIn || o.Output != tt.wantOut {
				t.Errorf("input %q output %q, want %q %q", o.Input, o.Output, tt.wantIn, tt.wantOut)
			}
		})
	}
}

func TestRecordMetadata(t *testing.T) {
	tests := []struct {
		name      string
		in        spanIn
		want      map[string]any // user keys, without the system keys
		wantTrace map[string]any
	}{
		{"prefixed values as sent, read back JSON-parsed", spanIn{attrs: map[string]any{
			"svc.observation.metadata.env": "prod", "svc.observation.metadata.quoted": `"prod"`, "svc.observation.metadata.n": int64(5),
			"svc.observation.metadata.s5": "5", "svc.observation.metadata.f": 0.5, "svc.observation.metadata.b": true,
			"svc.observation.metadata.list": []any{"a", int64(1)}, "svc.observation.metadata.json": `{"a":1}`}},
			map[string]any{"env": "prod", "quoted": "prod", "n": 5.0, "s5": 5.0, "f": 0.5, "b": true, "list": []any{"a", 1.0}, "json": map[string]any{"a": 1.0}}, nil},
		{"kvlist value is its OTLP wrapper's JSON", spanIn{attrs: map[string]any{"svc.observation.metadata.m": map[string]any{"k": "v"}}},
			map[string]any{"m": map[string]any{"kvlistValue": map[string]any{"values": []any{map[string]any{"key": "k", "value": map[string]any{"stringValue": "v"}}}}}}, nil},
		{"blob parsed and flattened, prefixed keys win", spanIn{attrs: map[string]any{
			"svc.observation.metadata": `{"plan":{"tier":"gold","seats":3},"env":"blob"}`, "svc.observation.metadata.env": "key"}},
			map[string]any{"plan.tier": "gold", "plan.seats": 3.0, "env": "key"}, nil},
		{"array blob gives index keys", spanIn{attrs: map[string]any{"svc.observation.metadata": `["x","y"]`}}, map[string]any{"0": "x", "1": "y"}, nil},
		{"primitive blob dropped", spanIn{attrs: map[string]any{"svc.observation.metadata": `5`}}, map[string]any{}, nil},
		{"svc.metadata when the blob is falsy, keys to both", spanIn{attrs: map[string]any{"svc.metadata": `{"a":1}`, "svc.metadata.b": "2"}},
			map[string]any{"a": 1.0, "b": 2.0}, map[string]any{"a": 1.0, "b": 2.0}},
		{"vercel keys, the four exclusions", spanIn{scope: "ai", attrs: map[string]any{"ai.telemetry.metadata.team": "x",
			"ai.telemetry.metadata.userId": "u", "ai.telemetry.metadata.sessionId": "s", "ai.telemetry.metadata.tags": []any{"t"},
			"ai.telemetry.metadata.svcPrompt": `{"name":"p"}`}}, map[string]any{"team": "x"}, map[string]any{"team": "x"}},
		{"svc_* keys stay in metadata", spanIn{attrs: map[string]any{"svc.observation.metadata.svc_user_id": "u"}}, map[string]any{"svc_user_id": "u"}, nil},
		{"trace metadata", spanIn{attrs: map[string]any{"svc.trace.metadata.tenant": "acme"}}, map[string]any{}, map[string]any{"tenant": "acme"}},
		{"resource trace metadata in the observation", spanIn{resource: map[string]any{"svc.trace.metadata.region": "eu"}}, map[string]any{"region": "eu"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, _ := recordOf(t, tt.in)
			user := map[string]any{}
			for k, v := range o.Metadata {
				if !isSystemKey(k) {
					user[k] = v
				}
			}
			if !reflect.DeepEqual(user, tt.want) {
				t.Errorf("metadata\n got %#v\nwant %#v", user, tt.want)
			}
			if !reflect.DeepEqual(o.TraceMetadata, tt.wantTrace) {
				t.Errorf("trace metadata\n got %#v\nwant %#v", o.TraceMetadata, tt.wantTrace)
			}
		})
	}
}

func isSystemKey(k string) bool {
	for _, p := range []string{"attributes.", "resourceAttributes.", "scope."} {
		if len(k) >= len(p) && k[:len(p)] == p {
			return true
		}
	}
	return false
}

func TestRecordSystemMetadata(t *testing.T) {
	in := spanIn{scope: "lib", version: "1.0", resource: map[string]any{"service.name": "svc"}, attrs: map[string]any{
		"gen_ai.request.model": "m", "gen_ai.request.max_tokens": int64(10), "gen_ai.input.messages": "io key",
		"svc.observation.metadata.k": "v", "svc.trace.metadata.t": "v", "ai.telemetry.metadata.a": "v", "svc.metadata.s": "kept"}}
	o, _, _ := recordOf(t, in)
	want := map[string]any{
		"attributes.gen_ai.request.model": "m", "attributes.gen_ai.request.max_tokens": 10.0, "attributes.svc.metadata.s": "kept",
		"resourceAttributes.service.name": "svc", "scope.name": "lib",
		// "1.0" reads back as the number 1: the read API parses every value that parses as JSON.
		"scope.version": 1.0,
	}
	for k, w := range want {
		if g, ok := o.Metadata[k]; !ok || !reflect.DeepEqual(g, w) {
			t.Errorf("metadata[%q] = %#v, want %#v", k, g, w)
		}
	}
	for _, absent := range []string{"attributes.gen_ai.input.messages", "attributes.svc.observation.metadata.k", "attributes.svc.trace.metadata.t", "attributes.ai.telemetry.metadata.a"} {
		if _, ok := o.Metadata[absent]; ok {
			t.Errorf("metadata has %q", absent)
		}
	}
	in.scope = "svc-sdk"
	o, _, _ = recordOf(t, in)
	for k := range o.Metadata {
		if len(k) > 11 && k[:11] == "attributes." {
			t.Errorf("svc-sdk span has %q", k)
		}
	}
}

func TestRecordTraceFields(t *testing.T) {
	tests := []struct {
		name        string
		in          spanIn
		wantKind    string
		wantUser    string
		wantSession string
		wantTags    []string
		wantPublic  bool
		wantName    string
		wantIn      string
	}{
		{"root: name, IO", spanIn{name: "root", attrs: map[string]any{"input.value": "i"}}, traceEventRoot, "", "", nil, false, "root", "i"},
		{"root: trace name and trace IO first", spanIn{name: "root", attrs: map[string]any{"svc.trace.name": "T", "svc.trace.input": "ti", "input.value": "i"}},
			traceEventRoot, "", "", nil, false, "T", "ti"},
		{"as_root", spanIn{parent: "p", attrs: map[string]any{"svc.internal.as_root": "true"}}, traceEventRoot, "", "", nil, false, "span name", ""},
		{"user order", spanIn{attrs: map[string]any{"user.id": "b", "svc.user.id": "a", "ai.telemetry.metadata.userId": "c"}}, traceEventRoot, "a", "", nil, false, "span name", ""},
		{"user from vercel metadata", spanIn{parent: "p", attrs: map[string]any{"ai.telemetry.metadata.userId": "u"}}, traceEventUpdate, "u", "", nil, false, "", ""},
		{"user from svc_user_id, non-string encoded", spanIn{parent: "p", attrs: map[string]any{"svc.observation.metadata.svc_user_id": int64(7)}}, traceEventUpdate, "7", "", nil, false, "", ""},
		{"session from conversation id", spanIn{attrs: map[string]any{"gen_ai.conversation.id": "c"}}, traceEventRoot, "", "c", nil, false, "span name", ""},
		{"conversation id alone makes no update", spanIn{parent: "p", attrs: map[string]any{"gen_ai.conversation.id": "c"}}, traceEventShallow, "", "", nil, false, "", ""},
		{"session from vercel", spanIn{parent: "p", attrs: map[string]any{"ai.telemetry.metadata.sessionId": "s"}}, traceEventUpdate, "", "s", nil, false, "", ""},
		{"tags JSON", spanIn{attrs: map[string]any{"svc.trace.tags": `["a","b"]`}}, traceEventRoot, "", "", []string{"a", "b"}, false, "span name", ""},
		{"tags comma split", spanIn{attrs: map[string]any{"svc.tags": "a, b"}}, traceEventRoot, "", "", []string{"a", "b"}, false, "span name", ""},
		{"tags list from vercel", spanIn{parent: "p", attrs: map[string]any{"ai.telemetry.metadata.tags": []any{"x"}}}, traceEventUpdate, "", "", []string{"x"}, false, "", ""},
		{"tags from tag.tags", spanIn{attrs: map[string]any{"tag.tags": []any{"y"}}}, traceEventRoot, "", "", []string{"y"}, false, "span name", ""},
		{"public string", spanIn{attrs: map[string]any{"svc.trace.public": "true"}}, traceEventRoot, "", "", nil, true, "span name", ""},
		{"public alone makes no update", spanIn{parent: "p", attrs: map[string]any{"svc.public": true}}, traceEventShallow, "", "", nil, false, "", ""},
		{"update: trace IO only", spanIn{parent: "p", attrs: map[string]any{"svc.trace.output": "o", "input.value": "i"}}, traceEventUpdate, "", "", nil, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ev, _ := recordOf(t, tt.in)
			str := func(p *string) string {
				if p == nil {
					return ""
				}
				return *p
			}
			public := ev.public != nil && *ev.public
			if ev.kind != tt.wantKind || str(ev.userID) != tt.wantUser || str(ev.sessionID) != tt.wantSession ||
				!reflect.DeepEqual(ev.tags, tt.wantTags) || public != tt.wantPublic || str(ev.name) != tt.wantName || ev.input != tt.wantIn {
				t.Errorf("got kind %s user %q session %q tags %v public %v name %q input %q", ev.kind, str(ev.userID), str(ev.sessionID),
					ev.tags, public, str(ev.name), ev.input)
			}
		})
	}
}

func TestTraceMerge(t *testing.T) {
	s := func(v string) *string { return &v }
	b := func(v bool) *bool { return &v }
	at := func(sec int) time.Time { return testStart.Add(time.Duration(sec) * time.Second) }
	events := []traceEvent{
		// Out of order on purpose: the merge goes by span start.
		{kind: traceEventUpdate, start: at(2), userID: s("late"), public: b(false), tags: []string{"b"}, output: "final",
			metadata: map[string]any{"a": map[string]any{"y": 2}}},
		{kind: traceEventRoot, start: at(0), name: s("root"), userID: s("early"), sessionID: s("s"), public: b(true), tags: []string{"a"},
			input: "question", output: "first", metadata: map[string]any{"a": map[string]any{"x": 1}}},
		{kind: traceEventUpdate, start: at(1), name: s("renamed"), public: b(true), tags: []string{"a"}},
		{kind: traceEventShallow, start: at(3)},
	}
	tr := mergeTrace("t", events)
	want := Trace{ID: "t", Name: "renamed", UserID: "late", SessionID: "s", Tags: []string{"a", "b"}, Public: false,
		Input: "question", Output: "final", Metadata: map[string]any{"a.x": 1.0, "a.y": 2.0}, Timestamp: at(0)}
	if !reflect.DeepEqual(tr, want) {
		t.Errorf("merged\n got %+v\nwant %+v", tr, want)
	}
}
