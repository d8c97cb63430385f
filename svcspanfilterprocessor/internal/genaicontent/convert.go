package genaicontent

import (
	"encoding/json"
	"fmt"
)

// message is one message in the structure of the current GenAI conventions
// (gen_ai.input.messages / gen_ai.output.messages).
type message struct {
	Role         string `json:"role"`
	Parts        []any  `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

type textPart struct {
	Type    string `json:"type"` // "text"
	Content string `json:"content"`
}

type toolCallPart struct {
	Type      string `json:"type"` // "tool_call"
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments any    `json:"arguments,omitempty"`
}

type toolCallResponsePart struct {
	Type     string `json:"type"` // "tool_call_response"
	ID       string `json:"id,omitempty"`
	Response any    `json:"response,omitempty"`
}

// field is m[key] when m is a map, nil otherwise.
func field(m any, key string) any {
	if mm, ok := m.(map[string]any); ok {
		return mm[key]
	}
	return nil
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		return int64(n), true
	case string:
		var i int64
		_, err := fmt.Sscan(n, &i)
		return i, err == nil
	}
	return 0, false
}

// textParts converts the `content` of an older event: a string, or the provider's list of content
// parts (strings or `{type: "text", text}` objects; other parts are kept as they are, since the
// conventions allow any part type).
func textParts(content any) []any {
	parts := []any{}
	switch c := content.(type) {
	case nil:
	case string:
		if c != "" {
			parts = append(parts, textPart{Type: "text", Content: c})
		}
	case []any:
		for _, p := range c {
			switch pv := p.(type) {
			case string:
				parts = append(parts, textPart{Type: "text", Content: pv})
			case map[string]any:
				if text, ok := pv["text"].(string); ok {
					parts = append(parts, textPart{Type: "text", Content: text})
				} else {
					parts = append(parts, pv)
				}
			default:
				parts = append(parts, textPart{Type: "text", Content: fmt.Sprint(pv)})
			}
		}
	default:
		raw, _ := json.Marshal(c)
		parts = append(parts, textPart{Type: "text", Content: string(raw)})
	}
	return parts
}

// assistantParts converts an assistant message body `{content?, tool_calls?}` (also a choice's message).
func assistantParts(body any) []any {
	parts := textParts(field(body, "content"))
	calls, _ := field(body, "tool_calls").([]any)
	for _, call := range calls {
		fn := field(call, "function")
		id, _ := field(call, "id").(string)
		name, _ := field(fn, "name").(string)
		parts = append(parts, toolCallPart{Type: "tool_call", ID: id, Name: name, Arguments: decodeArguments(field(fn, "arguments"))})
	}
	return parts
}

// decodeArguments: OpenAI sends tool-call arguments as JSON text; the conventions carry them as the
// JSON value. Text that is not JSON (a model may produce it) stays text.
func decodeArguments(v any) any {
	s, ok := v.(string)
	if !ok || s == "" {
		return v
	}
	var decoded any
	if json.Unmarshal([]byte(s), &decoded) == nil {
		return decoded
	}
	return s
}

// toolResponseParts converts a tool message body `{id, content}`.
func toolResponseParts(body any) []any {
	id, _ := field(body, "id").(string)
	return []any{toolCallResponsePart{Type: "tool_call_response", ID: id, Response: field(body, "content")}}
}
