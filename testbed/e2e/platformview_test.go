package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// observationView is what the svc platform shows of one span: its observation's type, model, usage,
// input and output, by the platform's OTLP mapping: the first source that is set wins for each
// field, and the observation type comes from the first mapper that returns one. The local platform
// (testbed/platform) does not show all of these yet, so the matrix test computes them here from the
// span's attributes and events, the same way for a span as the client sent it (what a direct export
// shows) and as the gateway delivered it.
type observationView struct {
	Type  string
	Model string
	// Usage holds input and output (and total when reported), after the platform's subtractions;
	// nil when the span reports none.
	Usage map[string]int64
	// Input and Output are the observation's input and output as text; InputFrom and OutputFrom
	// name where they came from.
	Input, Output         string
	InputFrom, OutputFrom string
}

// spanEvent is a span event as the view needs it.
type spanEvent struct {
	Name       string         `json:"name"`
	Attributes map[string]any `json:"attributes"`
}

func viewOf(scope string, attrs map[string]any, events []spanEvent) observationView {
	v := observationView{Type: observationTypeOf(scope, attrs)}
	if v.Type != "SPAN" && v.Type != "EVENT" && !isAgentOperation(attrs) {
		v.Model = firstText(attrs, "svc.observation.model.name", "gen_ai.response.model", "ai.model.id",
			"gen_ai.request.model", "llm.response.model", "llm.model_name", "model")
		v.Usage = usageOf(scope, attrs)
	}
	v.Input, v.Output, v.InputFrom, v.OutputFrom = inputOutputOf(scope, attrs, events)
	return v
}

func isAgentOperation(attrs map[string]any) bool {
	op := text(attrs["gen_ai.operation.name"])
	return op == "invoke_agent" || op == "agent_step"
}

var (
	observationTypes = map[string]bool{"span": true, "generation": true, "event": true, "embedding": true,
		"agent": true, "tool": true, "chain": true, "retriever": true, "guardrail": true, "evaluator": true}
	openInferenceKinds = map[string]string{"LLM": "GENERATION", "CHAIN": "CHAIN", "RETRIEVER": "RETRIEVER",
		"EMBEDDING": "EMBEDDING", "AGENT": "AGENT", "TOOL": "TOOL", "GUARDRAIL": "GUARDRAIL", "EVALUATOR": "EVALUATOR"}
	genAIOperationTypes = map[string]string{"chat": "GENERATION", "completion": "GENERATION",
		"text_completion": "GENERATION", "generate_content": "GENERATION", "generate": "GENERATION",
		"embeddings": "EMBEDDING", "invoke_agent": "AGENT", "create_agent": "AGENT", "execute_tool": "TOOL"}
)

// observationTypeOf: the first mapper that returns a type (the Python-SDK step for old svc-sdk
// scopes, genkit, flue and livekit mappers left out: no span of the matrix can reach them).
func observationTypeOf(scope string, attrs map[string]any) string {
	if t := strings.ToLower(text(attrs["svc.observation.type"])); observationTypes[t] {
		return strings.ToUpper(t)
	}
	if t, ok := openInferenceKinds[strings.ToUpper(text(attrs["openinference.span.kind"]))]; ok {
		return t
	}
	if t, ok := genAIOperationTypes[text(attrs["gen_ai.operation.name"])]; ok {
		return t
	}
	op := text(attrs["ai.operationId"])
	if op == "" {
		op = text(attrs["operation.name"])
	}
	for _, prefix := range []string{"ai.generateText.do", "ai.streamText.do", "ai.generateObject.do", "ai.streamObject.do"} {
		if strings.HasPrefix(op, prefix) && truthy(attrs["ai.model.id"]) {
			return "GENERATION"
		}
	}
	if strings.HasPrefix(op, "ai.embed") && strings.Contains(op, ".doEmbed") && truthy(attrs["ai.model.id"]) {
		return "EMBEDDING"
	}
	if strings.HasPrefix(op, "ai.toolCall") {
		return "TOOL"
	}
	if truthy(attrs["gen_ai.tool.name"]) || truthy(attrs["gen_ai.tool.call.id"]) {
		return "TOOL"
	}
	for _, k := range []string{"svc.observation.model.name", "gen_ai.request.model", "gen_ai.response.model", "llm.model_name", "model"} {
		if truthy(attrs[k]) {
			return "GENERATION"
		}
	}
	return "SPAN"
}

// usageOf: svc.observation.usage_details, then the Vercel AI SDK's keys (scope ai), then every
// gen_ai.usage.* and llm.token_count.*; input less cached tokens, output less reasoning tokens.
func usageOf(scope string, attrs map[string]any) map[string]int64 {
	if raw := text(attrs["svc.observation.usage_details"]); raw != "" {
		var obj map[string]any
		if err := json.Unmarshal([]byte(raw), &obj); err == nil {
			u := map[string]int64{}
			for k, val := range obj {
				if n, ok := integer(val); ok && n >= 0 {
					u[k] = n
				}
			}
			return u
		}
	}
	pick := func(keys ...string) (int64, bool) {
		for _, k := range keys {
			if n, ok := integer(attrs[k]); ok {
				return n, true
			}
		}
		return 0, false
	}
	var inKeys, outKeys []string
	if scope == "ai" {
		inKeys = []string{"ai.usage.inputTokens", "ai.usage.promptTokens"}
		outKeys = []string{"ai.usage.outputTokens", "ai.usage.completionTokens"}
	}
	inKeys = append(inKeys, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
	outKeys = append(outKeys, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")
	in, hasIn := pick(inKeys...)
	out, hasOut := pick(outKeys...)
	if !hasIn && !hasOut {
		return nil
	}
	u := map[string]int64{}
	if hasIn {
		cached, _ := pick("ai.usage.cachedInputTokens", "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens", "llm.token_count.prompt_details.cache_read")
		created, _ := pick("gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens", "llm.token_count.prompt_details.cache_write")
		u["input"] = in - cached - created
	}
	if hasOut {
		reasoning, _ := pick("ai.usage.reasoningTokens", "gen_ai.usage.reasoning_tokens", "llm.token_count.completion_details.reasoning")
		u["output"] = out - reasoning
	}
	if total, ok := pick("gen_ai.usage.total_tokens", "ai.usage.totalTokens", "llm.token_count.total"); ok {
		u["total"] = total
	}
	return u
}

// inputOutputOf follows the platform's input/output precedence: the first step that yields
// either side gives both.
func inputOutputOf(scope string, attrs map[string]any, events []spanEvent) (in, out, inFrom, outFrom string) {
	pair := func(inKey, outKey string) bool {
		in, out = text(attrs[inKey]), text(attrs[outKey])
		inFrom, outFrom = keyIf(in, inKey), keyIf(out, outKey)
		return in != "" || out != ""
	}
	if pair("svc.observation.input", "svc.observation.output") {
		return
	}
	if scope == "ai" {
		in, inFrom = firstWithKey(attrs, "ai.prompt.messages", "ai.prompt", "ai.toolCall.args")
		out, outFrom = firstWithKey(attrs, "ai.response.text", "ai.result.text", "ai.toolCall.result",
			"ai.response.object", "ai.result.object", "ai.response.toolCalls", "ai.result.toolCalls")
		if in == "" {
			in, inFrom = genAIMessages(attrs, "gen_ai.input.messages")
		}
		if out == "" {
			out, outFrom = genAIMessages(attrs, "gen_ai.output.messages")
		}
		return
	}
	if in, out, inFrom, outFrom = fromEvents(events); in != "" || out != "" {
		return
	}
	for _, p := range [][2]string{{"mlflow.spanInputs", "mlflow.spanOutputs"}, {"traceloop.entity.input", "traceloop.entity.output"},
		{"input.value", "output.value"}, {"input", "output"}} {
		if pair(p[0], p[1]) {
			return
		}
	}
	in, inFrom = indexedMessages(attrs, "gen_ai.prompt")
	out, outFrom = indexedMessages(attrs, "gen_ai.completion")
	if in != "" || out != "" {
		return
	}
	in, inFrom = indexedMessages(attrs, "llm.input_messages")
	out, outFrom = indexedMessages(attrs, "llm.output_messages")
	if in != "" || out != "" {
		return
	}
	in, inFrom = genAIMessages(attrs, "gen_ai.input.messages")
	out, outFrom = genAIMessages(attrs, "gen_ai.output.messages")
	if in != "" || out != "" {
		return
	}
	pair("gen_ai.tool.call.arguments", "gen_ai.tool.call.result")
	return
}

// genAIMessages is gen_ai.input.messages / gen_ai.output.messages, with gen_ai.system_instructions
// in front of the input as a system message when it has none.
func genAIMessages(attrs map[string]any, key string) (string, string) {
	s := text(attrs[key])
	if s == "" {
		return "", ""
	}
	if key == "gen_ai.input.messages" {
		if sys := text(attrs["gen_ai.system_instructions"]); sys != "" && !strings.Contains(s, `"system"`) {
			return `[{"role":"system","content":` + sys + `},` + strings.TrimPrefix(s, "["), key + " + gen_ai.system_instructions"
		}
	}
	return s, key
}

// fromEvents: the inference details event, then the per-message events, then the older content events.
func fromEvents(events []spanEvent) (in, out, inFrom, outFrom string) {
	var inputs, outputs []any
	for _, e := range events {
		switch e.Name {
		case "gen_ai.client.inference.operation.details":
			return text(e.Attributes["gen_ai.input.messages"]), text(e.Attributes["gen_ai.output.messages"]), "event " + e.Name, "event " + e.Name
		case "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message":
			m := map[string]any{"role": strings.TrimSuffix(strings.TrimPrefix(e.Name, "gen_ai."), ".message")}
			for k, val := range e.Attributes {
				m[k] = val
			}
			inputs = append(inputs, m)
		case "gen_ai.choice":
			outputs = append(outputs, e.Attributes)
		}
	}
	if len(inputs) > 0 || len(outputs) > 0 {
		if len(inputs) > 0 {
			in, inFrom = jsonOf(inputs), "events gen_ai.*.message"
		}
		if len(outputs) == 1 {
			out, outFrom = jsonOf(outputs[0]), "event gen_ai.choice"
		} else if len(outputs) > 1 {
			out, outFrom = jsonOf(outputs), "events gen_ai.choice"
		}
		return
	}
	for _, e := range events {
		switch e.Name {
		case "gen_ai.content.prompt":
			in, inFrom = text(e.Attributes["gen_ai.prompt"]), "event "+e.Name
		case "gen_ai.content.completion":
			out, outFrom = text(e.Attributes["gen_ai.completion"]), "event "+e.Name
		}
	}
	return
}

// indexedMessages is a plain attribute prefix (gen_ai.prompt), or the list rebuilt from its
// indexed keys (gen_ai.prompt.0.role, llm.input_messages.0.message.content, ...).
func indexedMessages(attrs map[string]any, prefix string) (string, string) {
	if s := text(attrs[prefix]); s != "" {
		return s, prefix
	}
	byIndex := map[int]map[string]any{}
	for k, val := range attrs {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		idx, field, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(idx)
		if !ok || err != nil {
			continue
		}
		if byIndex[n] == nil {
			byIndex[n] = map[string]any{}
		}
		byIndex[n][field] = val
	}
	if len(byIndex) == 0 {
		return "", ""
	}
	idx := make([]int, 0, len(byIndex))
	for n := range byIndex {
		idx = append(idx, n)
	}
	sort.Ints(idx)
	list := make([]any, 0, len(idx))
	for _, n := range idx {
		list = append(list, byIndex[n])
	}
	return jsonOf(list), prefix + ".N.*"
}

func firstWithKey(attrs map[string]any, keys ...string) (string, string) {
	for _, k := range keys {
		if s := text(attrs[k]); s != "" {
			return s, k
		}
	}
	return "", ""
}

func firstText(attrs map[string]any, keys ...string) string {
	s, _ := firstWithKey(attrs, keys...)
	return s
}

func keyIf(value, key string) string {
	if value == "" {
		return ""
	}
	return key
}

// text is an attribute value as the platform reads it: strings as they are, other values as JSON.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []any, map[string]any:
		return jsonOf(x)
	default:
		return fmt.Sprint(x)
	}
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case string:
		return x != ""
	case bool:
		return x
	case float64:
		return x != 0
	case int64:
		return x != 0
	default:
		return true
	}
}

func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case float64:
		if x == float64(int64(x)) {
			return int64(x), true
		}
	case string:
		if n, err := strconv.ParseInt(x, 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
