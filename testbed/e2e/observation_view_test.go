package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/svc/svc-collector/pkg/observation"
	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/readapi"
)

// The evaluators read an observation as the platform shows it (issue 26, item 3): one span per
// convention of the platform's input/output order, sent straight to the local platform (no
// gateway); the platform's record and pkg/observation's reading (what svcevaluator's filters and
// checks see) have the same type, name, model, input and output.
func TestEvaluatorsReadTheInputAndOutputThePlatformShows(t *testing.T) {
	p := startPlatform(t, "")
	genAIIn := `[{"role":"user","parts":[{"type":"text","content":"How do I pick a lock?"}]}]`
	genAIOut := `[{"role":"assistant","parts":[{"type":"text","content":"I'm sorry, but I can't help with that."}],"finish_reason":"stop"}]`
	type event struct {
		name  string
		attrs map[string]any
	}
	conventions := []struct {
		name   string
		scope  string
		attrs  map[string]any
		events []event
	}{
		{"svc SDK", "svc-sdk", map[string]any{"svc.observation.type": "generation", "svc.observation.input": `{"question":"hi"}`, "svc.observation.output": "hello"}, nil},
		{"Vercel AI SDK generation", "ai", vercelDoGenerate(`{"plan":["fly"]}`), nil},
		{"Vercel AI SDK outer span", "ai", map[string]any{"ai.operationId": "ai.generateText", "operation.name": "ai.generateText plan",
			"ai.prompt": `{"prompt":"Plan as JSON"}`, "ai.response.text": `{"plan":["fly"]}`}, nil},
		{"GenAI messages on the span", "opentelemetry.instrumentation.openai_v2", map[string]any{"gen_ai.operation.name": "chat",
			"gen_ai.request.model": "gpt-4o", "gen_ai.input.messages": genAIIn, "gen_ai.output.messages": genAIOut}, nil},
		{"GenAI operation details event", "x", map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"},
			[]event{{"gen_ai.client.inference.operation.details", map[string]any{"gen_ai.input.messages": genAIIn, "gen_ai.output.messages": genAIOut}}}},
		{"GenAI content events", "x", map[string]any{"gen_ai.request.model": "gpt-4o"}, []event{
			{"gen_ai.content.prompt", map[string]any{"gen_ai.prompt": "Capital of France?"}},
			{"gen_ai.content.completion", map[string]any{"gen_ai.completion": "Paris."}}}},
		{"MLflow", "mlflow", map[string]any{"mlflow.spanInputs": `{"q":"hi"}`, "mlflow.spanOutputs": `"hello"`}, nil},
		{"OpenLLMetry entity", "traceloop", map[string]any{"traceloop.entity.input": `{"q":"hi"}`, "traceloop.entity.output": `"hello"`}, nil},
		{"OpenInference values", "openinference.instrumentation.openai", map[string]any{"openinference.span.kind": "LLM",
			"llm.model_name": "gpt-4o", "input.value": `{"messages":[{"role":"user","content":"hi"}]}`, "output.value": "hello"}, nil},
		{"OpenLLMetry indexed", "opentelemetry.instrumentation.openai", map[string]any{"gen_ai.request.model": "gpt-4o",
			"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hi",
			"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "hello"}, nil},
		{"GenAI message and choice events", "opentelemetry.instrumentation.openai_v2", map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}, []event{
			{"gen_ai.system.message", map[string]any{"content": "Be terse."}},
			{"gen_ai.user.message", map[string]any{"content": "Capital of France?"}},
			// Span event attributes are primitives in the OpenTelemetry SDKs: the message is JSON text.
			{"gen_ai.choice", map[string]any{"index": int64(0), "finish_reason": "stop", "message": `{"role":"assistant","content":"Paris."}`}}}},
		{"OpenInference indexed", "openinference.instrumentation.openai", map[string]any{"openinference.span.kind": "LLM",
			"llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "hi",
			"llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "hello"}, nil},
		{"pydantic-ai", "pydantic-ai", map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
			"pydantic_ai.all_messages": `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`, "final_result": "hello"}, nil},
		{"Genkit", "genkit-tracer", map[string]any{"genkit:name": "answer", "genkit:input": `{"q":"hi"}`, "genkit:output": `"hello"`}, nil},
		{"tool arguments and response", "x", map[string]any{"tool_arguments": `{"city":"Paris"}`, "tool_response": `{"temp":21}`}, nil},
		{"GenAI tool call", "x", map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather",
			"gen_ai.tool.call.arguments": `{"city":"Paris"}`, "gen_ai.tool.call.result": "21"}, nil},
	}
	td := ptrace.NewTraces()
	start := time.Now().Add(-time.Minute)
	views := map[string]observation.View{}
	for i, c := range conventions {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "app")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(c.scope)
		span := ss.Spans().AppendEmpty()
		var tid pcommon.TraceID
		binary.BigEndian.PutUint64(tid[8:], uint64(0x2630+i))
		span.SetTraceID(tid)
		var sid pcommon.SpanID
		binary.BigEndian.PutUint64(sid[:], uint64(0x2630+i))
		span.SetSpanID(sid)
		span.SetName(c.name)
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Second)))
		if err := span.Attributes().FromRaw(c.attrs); err != nil {
			t.Fatal(err)
		}
		for _, e := range c.events {
			ev := span.Events().AppendEmpty()
			ev.SetName(e.name)
			if err := ev.Attributes().FromRaw(e.attrs); err != nil {
				t.Fatal(err)
			}
		}
		views[tid.String()] = observation.NewView(span, rs.Resource(), ss.Scope())
	}
	sendToPlatform(t, p, td)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitForSpans(ctx, len(conventions)); err != nil {
		t.Fatal(err)
	}
	read := readapi.Client{BaseURL: p.URL(), PublicKey: testPublicKey, SecretKey: testSecretKey}
	for i, c := range conventions {
		t.Run(c.name, func(t *testing.T) {
			var tid pcommon.TraceID
			binary.BigEndian.PutUint64(tid[8:], uint64(0x2630+i))
			obs, err := read.Observations(context.Background(), tid.String(), "")
			if err != nil || len(obs) != 1 {
				t.Fatalf("observations of %s: %v %v", tid, obs, err)
			}
			o, v := obs[0], views[tid.String()]
			in, _ := v.Input()
			out, _ := v.Output()
			if !sameRawValue(derefOrEmpty(o.Input), in) {
				t.Errorf("input: platform %q, evaluators %q", derefOrEmpty(o.Input), in)
			}
			if !sameRawValue(derefOrEmpty(o.Output), out) {
				t.Errorf("output: platform %q, evaluators %q", derefOrEmpty(o.Output), out)
			}
			if o.Type != v.Type() || o.Name != v.Name() || derefOrEmpty(o.Model) != v.Model() {
				t.Errorf("type/name/model: platform %s %q %q, evaluators %s %q %q", o.Type, o.Name, derefOrEmpty(o.Model), v.Type(), v.Name(), v.Model())
			}
		})
	}
}

// sameRawValue compares two raw values as JSON when both are JSON, else as text.
func sameRawValue(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// sendToPlatform posts td straight to the platform's OTLP endpoint, as a direct export does.
func sendToPlatform(t *testing.T, p *platform.Platform, td ptrace.Traces) {
	t.Helper()
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, p.URL()+"/api/public/otel/v1/traces", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.SetBasicAuth(testPublicKey, testSecretKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("platform answered %d", resp.StatusCode)
	}
}
