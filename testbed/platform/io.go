package platform

import (
	"sort"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Input and output (docs/contract.md §14.1): the first step that yields either side returns both. Values
// are kept as sent (a JSON string stays a string) unless a step parses them. Steps not modelled:
// 4 (@flue/opentelemetry), and of step 8 the gcp.vertex.agent.*, lk.* and logfire `events` keys.

// ioKeys are attributes that carry input or output; `attributes` in metadata leaves them out.
var ioKeys = map[string]bool{
	"svc.observation.input": true, "svc.observation.output": true, "svc.trace.input": true, "svc.trace.output": true,
	"genkit:input": true, "genkit:output": true,
	"ai.prompt.messages": true, "ai.prompt": true, "ai.toolCall.args": true, "ai.response.text": true, "ai.response.toolCalls": true,
	"ai.result.text": true, "ai.toolCall.result": true, "ai.response.object": true, "ai.result.object": true, "ai.result.toolCalls": true,
	"prompt": true, "all_messages_events": true, "mlflow.spanInputs": true, "mlflow.spanOutputs": true,
	"traceloop.entity.input": true, "traceloop.entity.output": true, "input.value": true, "output.value": true,
	"input": true, "output": true, "pydantic_ai.all_messages": true, "final_result": true, "tool_arguments": true, "tool_response": true,
	"gen_ai.prompt": true, "gen_ai.completion": true, "gen_ai.input.messages": true, "gen_ai.output.messages": true,
	"gen_ai.system_instructions": true, "gen_ai.tool.call.arguments": true, "gen_ai.tool.call.result": true,
}

// isIOKey also covers the indexed keys of step 9.
func isIOKey(name string) bool {
	return ioKeys[name] || strings.HasPrefix(name, "gen_ai.prompt.") || strings.HasPrefix(name, "gen_ai.completion.") ||
		strings.HasPrefix(name, "llm.input_messages.") || strings.HasPrefix(name, "llm.output_messages.")
}

// inputOutput runs the chain; traceKeys puts svc.trace.input/output first (a root's trace I/O).
func inputOutput(sp spanView, traceKeys bool) (in, out any) {
	a := sp.attrs
	// Step 1.
	if traceKeys {
		if in, out, ok := pair(a, "svc.trace.input", "svc.trace.output"); ok {
			return in, out
		}
	}
	if in, out, ok := pair(a, "svc.observation.input", "svc.observation.output"); ok {
		return in, out
	}
	// Step 2: genkit, parsed; stops.
	if sp.scopeName == "genkit-tracer" {
		return parsedAttr(a, "genkit:input"), parsedAttr(a, "genkit:output")
	}
	// Step 3: Vercel AI SDK; gaps from step 10; stops.
	if sp.scopeName == "ai" {
		in := firstRaw(a, "ai.prompt.messages", "ai.prompt", "ai.toolCall.args")
		var out any
		if text, ok := truthyAttr(a, "ai.response.text"); ok {
			out = text.Str()
			if calls, ok := truthyAttr(a, "ai.response.toolCalls"); ok {
				parsed, isJSON := parseJSON(calls.AsString())
				if !isJSON {
					parsed = calls.AsString()
				}
				out = jsonText(map[string]any{"role": "assistant", "content": text.Str(), "tool_calls": parsed})
			}
		} else {
			out = firstRaw(a, "ai.result.text", "ai.toolCall.result", "ai.response.object", "ai.result.object",
				"ai.response.toolCalls", "ai.result.toolCalls")
		}
		if in == nil || out == nil {
			in10, out10 := semconvIO(a)
			if in == nil {
				in = in10
			}
			if out == nil {
				out = out10
			}
		}
		return in, out
	}
	// Step 5: the inference operation details event.
	events := sp.span.Events()
	for _, ev := range events.All() {
		if ev.Name() == "gen_ai.client.inference.operation.details" {
			if in, out := semconvIO(ev.Attributes()); in != nil || out != nil {
				return in, out
			}
		}
	}
	// Step 6: message events and choices.
	var msgs, choices []any
	for _, ev := range events.All() {
		switch ev.Name() {
		case "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message":
			m := map[string]any{"role": strings.TrimSuffix(strings.TrimPrefix(ev.Name(), "gen_ai."), ".message")}
			for k, v := range ev.Attributes().All() {
				m[k] = eventValue(v)
			}
			msgs = append(msgs, m)
		case "gen_ai.choice":
			m := map[string]any{}
			for k, v := range ev.Attributes().All() {
				m[k] = eventValue(v)
			}
			choices = append(choices, m)
		}
	}
	if len(msgs) > 0 || len(choices) > 0 {
		var in, out any
		if len(msgs) > 0 {
			in = msgs
		}
		if len(choices) == 1 {
			out = choices[0]
		} else if len(choices) > 1 {
			out = choices
		}
		return in, out
	}
	// Step 7: content events of the earlier GenAI conventions.
	var eventIn, eventOut any
	for _, ev := range events.All() {
		switch ev.Name() {
		case "gen_ai.content.prompt":
			if v, ok := ev.Attributes().Get("gen_ai.prompt"); ok {
				eventIn = plainValue(v)
			}
		case "gen_ai.content.completion":
			if v, ok := ev.Attributes().Get("gen_ai.completion"); ok {
				eventOut = plainValue(v)
			}
		}
	}
	if eventIn != nil || eventOut != nil {
		return eventIn, eventOut
	}
	// Step 8: other frameworks' keys, in this order.
	for _, p := range [][2]string{
		{"prompt", "all_messages_events"}, // logfire
		{"mlflow.spanInputs", "mlflow.spanOutputs"},
		{"traceloop.entity.input", "traceloop.entity.output"},
		{"input.value", "output.value"},
		{"input", "output"},
	} {
		if in, out, ok := pair(a, p[0], p[1]); ok {
			return in, out
		}
	}
	if sp.scopeName == "pydantic-ai" {
		if in, out, ok := pair(a, "pydantic_ai.all_messages", "final_result"); ok {
			return in, out
		}
	}
	if in, out, ok := pair(a, "tool_arguments", "tool_response"); ok {
		return in, out
	}
	// Step 9: indexed prompt/completion, then OpenInference messages.
	if in, out := indexedIO(a, "gen_ai.prompt", "gen_ai.completion"); in != nil || out != nil {
		return in, out
	}
	if in, out := indexedIO(a, "llm.input_messages", "llm.output_messages"); in != nil || out != nil {
		return in, out
	}
	// Step 10.
	return semconvIO(a)
}

// semconvIO is step 10: gen_ai.input/output.messages (system instructions prepended as a system
// message when the input has none), then the tool call's arguments and result.
func semconvIO(a pcommon.Map) (in, out any) {
	in = firstRaw(a, "gen_ai.input.messages")
	out = firstRaw(a, "gen_ai.output.messages")
	if sys, ok := truthyAttr(a, "gen_ai.system_instructions"); ok {
		instructions, isJSON := parseJSON(sys.AsString())
		if !isJSON {
			instructions = sys.AsString()
		}
		var list []any
		if s, isString := in.(string); isString {
			if parsed, ok := parseJSON(s); ok {
				list, _ = parsed.([]any)
			}
		} else if l, isList := in.([]any); isList {
			list = l
		}
		hasSystem := false
		for _, m := range list {
			if mm, ok := m.(map[string]any); ok && mm["role"] == "system" {
				hasSystem = true
			}
		}
		if !hasSystem {
			in = append([]any{map[string]any{"role": "system", "content": instructions}}, list...)
		}
	}
	if in == nil && out == nil {
		in = firstRaw(a, "gen_ai.tool.call.arguments")
		out = firstRaw(a, "gen_ai.tool.call.result")
	}
	return in, out
}

// indexedIO is step 9: keys prefix.N.<path> rebuilt into a list of objects (≤ 10,001 slots); a
// plain `prefix` value is used as is.
func indexedIO(a pcommon.Map, inPrefix, outPrefix string) (in, out any) {
	build := func(prefix string) any {
		if v, ok := truthyAttr(a, prefix); ok {
			return plainValue(v)
		}
		slots := map[int]map[string]any{}
		for name, v := range a.All() {
			rest, ok := strings.CutPrefix(name, prefix+".")
			if !ok {
				continue
			}
			idx, path, _ := strings.Cut(rest, ".")
			n, err := strconv.Atoi(idx)
			if err != nil || n < 0 || n > 10000 || path == "" {
				continue
			}
			if slots[n] == nil {
				slots[n] = map[string]any{}
			}
			setPath(slots[n], strings.Split(path, "."), plainValue(v))
		}
		if len(slots) == 0 {
			return nil
		}
		idx := make([]int, 0, len(slots))
		for n := range slots {
			idx = append(idx, n)
		}
		sort.Ints(idx)
		list := make([]any, 0, len(idx))
		for _, n := range idx {
			list = append(list, slots[n])
		}
		return list
	}
	return build(inPrefix), build(outPrefix)
}

func setPath(m map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// pair is a step that reads two keys: ok when either is truthy.
func pair(a pcommon.Map, inKey, outKey string) (in, out any, ok bool) {
	in, out = firstRaw(a, inKey), firstRaw(a, outKey)
	return in, out, in != nil || out != nil
}

// firstRaw is the first truthy attribute's value as sent (plainValue), nil when none.
func firstRaw(a pcommon.Map, keys ...string) any {
	if v, ok := firstTruthy(a, keys...); ok {
		return plainValue(v)
	}
	return nil
}

func parsedAttr(a pcommon.Map, key string) any {
	v, ok := truthyAttr(a, key)
	if !ok {
		return nil
	}
	if parsed, isJSON := parseJSON(v.AsString()); isJSON {
		return parsed
	}
	return v.AsString()
}

// eventValue is an event attribute in a message, as sent (no parsing is stated).
func eventValue(v pcommon.Value) any { return plainValue(v) }

// rawIO is how ObservationV2 carries input and output: raw strings, JSON text for structures.
func rawIO(v any) string {
	if v == nil {
		return ""
	}
	return stringOrJSON(v)
}
