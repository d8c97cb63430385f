package workload

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
)

// Shape is where one GenAI instrumentation writes an LLM call: its scope, its attribute names
// for content, model, usage and metadata, and the events it adds. The workload's LLM spans take
// one shape each (AgentOptions.Shape); tests that check what reaches the platform from every
// instrumentation (testbed/e2e) take their spans from the same shapes.
type Shape struct {
	// Name says which instrumentation, e.g. "vercel-ai".
	Name string
	// Scope and ScopeVersion name the tracer, as the instrumentation names itself.
	Scope, ScopeVersion string
	// SDKLanguage, when set, is the resource's telemetry.sdk.language of an application using
	// it (the svc SDK's metadata encoding depends on it).
	SDKLanguage string
	// attrs and events write one call.
	attrs  func(c LLMCall) []attribute.KeyValue
	events func(c LLMCall) []Event
}

// LLMCall is one call to a model: what any instrumentation records of it.
type LLMCall struct {
	Model, Provider string
	// System is the system prompt, Prompt the user's message, Answer the model's.
	System, Prompt, Answer string
	InputTokens            int
	OutputTokens           int
	// Metadata are the application's keys and typed values (string, int, bool, double), under
	// their bare key names; each shape writes them where its instrumentation does.
	Metadata []attribute.KeyValue
}

// Event is a span event of a shape.
type Event struct {
	Name  string
	Attrs []attribute.KeyValue
}

// Attributes are the span attributes the shape writes for the call.
func (s Shape) Attributes(c LLMCall) []attribute.KeyValue { return s.attrs(c) }

// Events are the span events the shape adds for the call (none for most).
func (s Shape) Events(c LLMCall) []Event {
	if s.events == nil {
		return nil
	}
	return s.events(c)
}

// Names of the shapes.
const (
	ShapeGenAISemconv   = "genai-semconv"
	ShapeGenAIEvents    = "genai-semconv-events"
	ShapeOpenLLMetry    = "openllmetry"
	ShapeOpenInference  = "openinference"
	ShapeVercelAI       = "vercel-ai"
	ShapeSVCSDK         = "svc-sdk"
	defaultShapeVersion = "0.44.1"
)

// Shapes are the instrumentations the workload draws its LLM spans from, in a fixed order.
var Shapes = []Shape{
	{
		// GenAI semantic conventions, current: content as JSON in gen_ai.input.messages /
		// gen_ai.output.messages (opentelemetry-instrumentation-openai-v2 with content capture).
		Name: ShapeGenAISemconv, Scope: ScopeOpenAI, ScopeVersion: defaultShapeVersion,
		attrs: func(c LLMCall) []attribute.KeyValue {
			return append(genAICommon(c),
				attribute.String("gen_ai.input.messages", messagesJSON(c.System, c.Prompt)),
				attribute.String("gen_ai.output.messages", messagesJSON("", "", c.Answer)),
			)
		},
	},
	{
		// GenAI semantic conventions, earlier: content in gen_ai.content.prompt /
		// gen_ai.content.completion events.
		Name: ShapeGenAIEvents, Scope: "opentelemetry.instrumentation.openai_v2", ScopeVersion: "2.0b0",
		attrs: genAICommon,
		events: func(c LLMCall) []Event {
			return []Event{
				{Name: "gen_ai.content.prompt", Attrs: []attribute.KeyValue{attribute.String("gen_ai.prompt", messagesJSON(c.System, c.Prompt))}},
				{Name: "gen_ai.content.completion", Attrs: []attribute.KeyValue{attribute.String("gen_ai.completion", messagesJSON("", "", c.Answer))}},
			}
		},
	},
	{
		// OpenLLMetry (Traceloop): indexed gen_ai.prompt.N.* / gen_ai.completion.N.*, metadata
		// as traceloop.association.properties.*.
		Name: ShapeOpenLLMetry, Scope: "opentelemetry.instrumentation.openai.v1", ScopeVersion: "0.40.7",
		attrs: func(c LLMCall) []attribute.KeyValue {
			a := append(genAICommon(c),
				attribute.String("llm.request.type", "chat"),
				attribute.Bool("llm.is_streaming", false),
				attribute.String("gen_ai.prompt.0.role", "system"),
				attribute.String("gen_ai.prompt.0.content", c.System),
				attribute.String("gen_ai.prompt.1.role", "user"),
				attribute.String("gen_ai.prompt.1.content", c.Prompt),
				attribute.String("gen_ai.completion.0.role", "assistant"),
				attribute.String("gen_ai.completion.0.content", c.Answer),
				attribute.String("gen_ai.completion.0.finish_reason", "stop"),
			)
			return append(a, renamed(c.Metadata, "traceloop.association.properties.")...)
		},
	},
	{
		// OpenInference (Arize Phoenix): input.value / output.value, flattened
		// llm.input_messages.N.message.*, metadata as one JSON object string.
		Name: ShapeOpenInference, Scope: "openinference.instrumentation.openai", ScopeVersion: "0.1.30",
		attrs: func(c LLMCall) []attribute.KeyValue {
			return []attribute.KeyValue{
				attribute.String("openinference.span.kind", "LLM"),
				attribute.String("llm.model_name", c.Model),
				attribute.String("llm.provider", c.Provider),
				attribute.String("llm.system", c.Provider),
				attribute.String("input.value", `{"messages":`+messagesJSON(c.System, c.Prompt)+`,"model":"`+c.Model+`"}`),
				attribute.String("input.mime_type", "application/json"),
				attribute.String("output.value", c.Answer),
				attribute.String("output.mime_type", "text/plain"),
				attribute.String("llm.input_messages.0.message.role", "system"),
				attribute.String("llm.input_messages.0.message.content", c.System),
				attribute.String("llm.input_messages.1.message.role", "user"),
				attribute.String("llm.input_messages.1.message.content", c.Prompt),
				attribute.String("llm.output_messages.0.message.role", "assistant"),
				attribute.String("llm.output_messages.0.message.content", c.Answer),
				attribute.Int("llm.token_count.prompt", c.InputTokens),
				attribute.Int("llm.token_count.completion", c.OutputTokens),
				attribute.Int("llm.token_count.total", c.InputTokens+c.OutputTokens),
				attribute.String("metadata", metadataObject(c.Metadata)),
			}
		},
	},
	{
		// Vercel AI SDK (experimental_telemetry): scope "ai", ai.prompt.messages as JSON,
		// ai.response.text, metadata as ai.telemetry.metadata.*, beside gen_ai.* of its
		// doGenerate spans.
		Name: ShapeVercelAI, Scope: "ai", ScopeVersion: "4.3.16",
		attrs: func(c LLMCall) []attribute.KeyValue {
			a := []attribute.KeyValue{
				attribute.String("operation.name", "ai.generateText.doGenerate"),
				attribute.String("ai.operationId", "ai.generateText.doGenerate"),
				attribute.String("ai.model.id", c.Model),
				attribute.String("ai.model.provider", c.Provider+".chat"),
				attribute.String("ai.prompt.format", "messages"),
				attribute.String("ai.prompt.messages", `[{"role":"system","content":`+jsonText(c.System)+`},{"role":"user","content":[{"type":"text","text":`+jsonText(c.Prompt)+`}]}]`),
				attribute.String("ai.response.text", c.Answer),
				attribute.String("ai.response.finishReason", "stop"),
				attribute.Int("ai.usage.promptTokens", c.InputTokens),
				attribute.Int("ai.usage.completionTokens", c.OutputTokens),
				attribute.String("gen_ai.system", c.Provider+".chat"),
				attribute.String("gen_ai.request.model", c.Model),
				attribute.Int("gen_ai.usage.input_tokens", c.InputTokens),
				attribute.Int("gen_ai.usage.output_tokens", c.OutputTokens),
			}
			return append(a, renamed(c.Metadata, "ai.telemetry.metadata.")...)
		},
	},
	{
		// The svc SDK, Python v5: observation input/output and metadata as JSON text.
		Name: ShapeSVCSDK, Scope: "svc-sdk", ScopeVersion: "5.1.0", SDKLanguage: "python",
		attrs: func(c LLMCall) []attribute.KeyValue {
			a := []attribute.KeyValue{
				attribute.String("svc.observation.type", "generation"),
				attribute.String("svc.observation.model.name", c.Model),
				attribute.String("svc.observation.input", messagesJSON(c.System, c.Prompt)),
				attribute.String("svc.observation.output", jsonText(c.Answer)),
				attribute.String("svc.observation.usage_details", fmt.Sprintf(`{"input":%d,"output":%d}`, c.InputTokens, c.OutputTokens)),
			}
			for _, kv := range c.Metadata {
				a = append(a, attribute.String("svc.observation.metadata."+string(kv.Key), jsonValue(kv.Value)))
			}
			return a
		},
	},
}

// ShapeNamed returns the shape of that name.
func ShapeNamed(name string) (Shape, bool) {
	for _, s := range Shapes {
		if s.Name == name {
			return s, true
		}
	}
	return Shape{}, false
}

// genAICommon are the model, usage and request attributes of the GenAI semantic conventions.
func genAICommon(c LLMCall) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.system", c.Provider),
		attribute.String("gen_ai.provider.name", c.Provider),
		attribute.String("gen_ai.request.model", c.Model),
		attribute.String("gen_ai.response.model", c.Model+"-2024-08-06"),
		attribute.Float64("gen_ai.request.temperature", 0.2),
		attribute.Int("gen_ai.request.max_tokens", 1024),
		attribute.Int("gen_ai.usage.input_tokens", c.InputTokens),
		attribute.Int("gen_ai.usage.output_tokens", c.OutputTokens),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop"}),
	}
}

// messagesJSON is a chat messages array: system and user, or (with an answer) the assistant's.
func messagesJSON(system, user string, answer ...string) string {
	var msgs []map[string]any
	if system != "" {
		msgs = append(msgs, map[string]any{"role": "system", "content": system})
	}
	if user != "" {
		msgs = append(msgs, map[string]any{"role": "user", "content": user})
	}
	for _, a := range answer {
		msgs = append(msgs, map[string]any{"role": "assistant", "content": a})
	}
	b, err := json.Marshal(msgs)
	if err != nil {
		panic(err) // strings only
	}
	return string(b)
}

func renamed(kvs []attribute.KeyValue, prefix string) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, attribute.KeyValue{Key: attribute.Key(prefix + string(kv.Key)), Value: kv.Value})
	}
	return out
}

// jsonValue is the JSON text of a typed attribute value.
func jsonValue(v attribute.Value) string {
	b, err := json.Marshal(v.AsInterface())
	if err != nil {
		return jsonText(v.String())
	}
	return string(b)
}

// metadataObject is the metadata as one JSON object, keys in order.
func metadataObject(kvs []attribute.KeyValue) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, kv := range kvs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonText(string(kv.Key)) + ":" + jsonValue(kv.Value))
	}
	b.WriteByte('}')
	return b.String()
}
