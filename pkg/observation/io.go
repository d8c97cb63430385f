package observation

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/svcattr"
)

// Input is the observation's input as the platform shows it (a raw string, docs/contract.md §13); ok is
// false when it has none.
func (v *View) Input() (string, bool) {
	v.readIO()
	return v.in, v.in != ""
}

// Output is the observation's output as the platform shows it.
func (v *View) Output() (string, bool) {
	v.readIO()
	return v.out, v.out != ""
}

// readIO reads input and output once, by the platform's order of conventions: the first source
// that yields either side gives both (the other side may stay empty).
func (v *View) readIO() {
	if v.ioRead {
		return
	}
	v.ioRead = true
	for _, step := range ioSteps {
		in, out, stop := step(v)
		if in != "" || out != "" || stop {
			v.in, v.out = in, out
			return
		}
	}
}

// ioSteps are the conventions in the platform's order. A step returns stop when it decides for
// its scope even with nothing found.
var ioSteps = []func(v *View) (in, out string, stop bool){
	// 1. The svc SDKs.
	func(v *View) (string, string, bool) {
		return v.str(svcattr.ObservationInput), v.str(svcattr.ObservationOutput), false
	},
	// 2. Genkit.
	func(v *View) (string, string, bool) {
		if v.Scope.Name() != "genkit-tracer" {
			return "", "", false
		}
		return parsedText(v.str("genkit:input")), parsedText(v.str("genkit:output")), true
	},
	// 3. The Vercel AI SDK (scope ai); a side it lacks comes from the GenAI messages.
	func(v *View) (string, string, bool) {
		if v.Scope.Name() != "ai" {
			return "", "", false
		}
		in := v.firstOf("ai.prompt.messages", "ai.prompt", "ai.toolCall.args")
		out := v.vercelOutput()
		if in == "" || out == "" {
			gin, gout := v.genAIMessages()
			if in == "" {
				in = gin
			}
			if out == "" {
				out = gout
			}
		}
		return in, out, true
	},
	// 5. GenAI semantic conventions >= 1.37: one event with the messages.
	func(v *View) (string, string, bool) {
		for _, ev := range v.Span.Events().All() {
			if ev.Name() == "gen_ai.client.inference.operation.details" {
				in, out := messagesOf(ev.Attributes())
				return in, out, false
			}
		}
		return "", "", false
	},
	// 6, 7. GenAI events of older conventions.
	(*View).genAIEvents,
	// 8. Other conventions, in the platform's order.
	func(v *View) (string, string, bool) {
		pairs := [][2]string{
			{"mlflow.spanInputs", "mlflow.spanOutputs"},
			{"traceloop.entity.input", "traceloop.entity.output"},
			{"input.value", "output.value"},
			{"input", "output"},
		}
		if v.Scope.Name() == "pydantic-ai" {
			pairs = append(pairs, [2]string{"pydantic_ai.all_messages", "final_result"})
		}
		pairs = append(pairs, [2]string{"tool_arguments", "tool_response"})
		for _, p := range pairs {
			if in, out := v.str(p[0]), v.str(p[1]); in != "" || out != "" {
				return in, out, false
			}
		}
		return "", "", false
	},
	// 9. Indexed attributes: OpenLLMetry's gen_ai.prompt.N.* / gen_ai.completion.N.*, then
	// OpenInference's llm.input_messages.N.* / llm.output_messages.N.*.
	func(v *View) (string, string, bool) {
		in := v.str("gen_ai.prompt")
		if in == "" {
			in = v.indexedList("gen_ai.prompt.")
		}
		out := v.str("gen_ai.completion")
		if out == "" {
			out = v.indexedList("gen_ai.completion.")
		}
		if in != "" || out != "" {
			return in, out, false
		}
		return v.indexedList("llm.input_messages."), v.indexedList("llm.output_messages."), false
	},
	// 10. GenAI semantic conventions on the span, then a tool call's arguments and result.
	func(v *View) (string, string, bool) {
		if in, out := v.genAIMessages(); in != "" || out != "" {
			return in, out, false
		}
		return v.str("gen_ai.tool.call.arguments"), v.str("gen_ai.tool.call.result"), false
	},
}

// vercelOutput is the Vercel AI SDK's output; text with tool calls becomes one assistant message.
func (v *View) vercelOutput() string {
	if text := v.str("ai.response.text"); text != "" {
		calls := v.str("ai.response.toolCalls")
		if calls == "" {
			return text
		}
		msg := map[string]any{"role": "assistant", "content": text, "tool_calls": parsedOrString(calls)}
		b, _ := json.Marshal(msg)
		return string(b)
	}
	return v.firstOf("ai.result.text", "ai.toolCall.result", "ai.response.object", "ai.result.object",
		"ai.response.toolCalls", "ai.result.toolCalls")
}

// genAIMessages are gen_ai.input.messages (with gen_ai.system_instructions first as a system
// message when the input has none) and gen_ai.output.messages.
func (v *View) genAIMessages() (in, out string) {
	return messagesOf(v.Span.Attributes())
}

func messagesOf(attrs pcommon.Map) (in, out string) {
	get := func(k string) string {
		a, ok := attrs.Get(k)
		if !ok {
			return ""
		}
		return a.AsString()
	}
	in, out = get(svcattr.GenAIInputMessages), get(svcattr.GenAIOutputMessages)
	if sys := get(svcattr.GenAISystemInstructions); sys != "" {
		var msgs []any
		if in == "" || json.Unmarshal([]byte(in), &msgs) == nil {
			hasSystem := false
			for _, m := range msgs {
				if mm, ok := m.(map[string]any); ok && mm["role"] == "system" {
					hasSystem = true
				}
			}
			if !hasSystem {
				msgs = append([]any{map[string]any{"role": "system", "parts": parsedOrString(sys)}}, msgs...)
				b, _ := json.Marshal(msgs)
				in = string(b)
			}
		}
	}
	return in, out
}

// genAIEvents: events gen_ai.{system,user,assistant,tool}.message are the input and
// gen_ai.choice the output (one choice: the object); else gen_ai.content.prompt/completion.
func (v *View) genAIEvents() (string, string, bool) {
	var input, choices []any
	var prompt, completion string
	for _, ev := range v.Span.Events().All() {
		name := ev.Name()
		switch name {
		case "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message":
			msg := eventObject(ev)
			msg["role"] = strings.TrimSuffix(strings.TrimPrefix(name, "gen_ai."), ".message")
			input = append(input, msg)
		case "gen_ai.choice":
			choices = append(choices, eventObject(ev))
		case "gen_ai.content.prompt":
			if a, ok := ev.Attributes().Get("gen_ai.prompt"); ok {
				prompt = a.AsString()
			}
		case "gen_ai.content.completion":
			if a, ok := ev.Attributes().Get("gen_ai.completion"); ok {
				completion = a.AsString()
			}
		}
	}
	if len(input) > 0 || len(choices) > 0 {
		var in, out string
		if len(input) > 0 {
			b, _ := json.Marshal(input)
			in = string(b)
		}
		if len(choices) == 1 {
			b, _ := json.Marshal(choices[0])
			out = string(b)
		} else if len(choices) > 1 {
			b, _ := json.Marshal(choices)
			out = string(b)
		}
		return in, out, false
	}
	return prompt, completion, false
}

// eventObject is an event's attributes as an object, values as sent (JSON text stays text).
func eventObject(ev ptrace.SpanEvent) map[string]any {
	m := make(map[string]any, ev.Attributes().Len())
	for k, a := range ev.Attributes().All() {
		m[k] = a.AsRaw()
	}
	return m
}

// indexedList rebuilds prefix<N>.<dotted field> attributes into a JSON list of objects, the
// dotted field as nested objects ("message.role" is key role of object message).
func (v *View) indexedList(prefix string) string {
	items := map[int]map[string]any{}
	for k, a := range v.Span.Attributes().All() {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		idx, field, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(idx)
		if !ok || err != nil || n < 0 || n > 10000 || field == "" {
			continue
		}
		if items[n] == nil {
			items[n] = map[string]any{}
		}
		obj := items[n]
		path := strings.Split(field, ".")
		for _, key := range path[:len(path)-1] {
			child, ok := obj[key].(map[string]any)
			if !ok {
				child = map[string]any{}
				obj[key] = child
			}
			obj = child
		}
		obj[path[len(path)-1]] = a.AsRaw()
	}
	if len(items) == 0 {
		return ""
	}
	idx := make([]int, 0, len(items))
	for n := range items {
		idx = append(idx, n)
	}
	sort.Ints(idx)
	list := make([]any, 0, len(idx))
	for _, n := range idx {
		list = append(list, items[n])
	}
	b, _ := json.Marshal(list)
	return string(b)
}

// parsedText is a JSON value the platform parses (Genkit's): a JSON string shows as its text,
// any other JSON as it is.
func parsedText(s string) string {
	var x any
	if json.Unmarshal([]byte(s), &x) == nil {
		if str, ok := x.(string); ok {
			return str
		}
	}
	return s
}

// firstOf is the first of the attributes that is set and not empty.
func (v *View) firstOf(keys ...string) string {
	for _, k := range keys {
		if s := v.str(k); s != "" {
			return s
		}
	}
	return ""
}

func parsedOrString(s string) any {
	var x any
	if json.Unmarshal([]byte(s), &x) == nil {
		return x
	}
	return s
}
