package observation

import (
	"encoding/json"
	"strings"
)

// InputText is the text of the observation's input: the content of its messages' text parts
// (GenAI semantic conventions `parts`, OpenAI-style `content`, content lists of `text` parts,
// rebuilt indexed messages), joined by newlines; an input that is not messages is its own text.
// Checks on input run on this text, not on the JSON that carries it.
func (v *View) InputText() (string, bool) {
	in, ok := v.Input()
	if !ok {
		return "", false
	}
	return textOf(in)
}

// OutputText is the text of the observation's output, as InputText. ok is false when the output
// is messages without any text (only tool calls, say).
func (v *View) OutputText() (string, bool) {
	out, ok := v.Output()
	if !ok {
		return "", false
	}
	return textOf(out)
}

// textOf is the text of a raw input or output.
func textOf(raw string) (string, bool) {
	t := strings.TrimSpace(raw)
	if t == "" || (t[0] != '[' && t[0] != '{') {
		return raw, true
	}
	var x any
	if json.Unmarshal([]byte(t), &x) != nil {
		return raw, true
	}
	var texts []string
	if !messageTexts(x, &texts) {
		return raw, true // JSON that is not messages (an object the model answered): its own text
	}
	if len(texts) == 0 {
		return "", false
	}
	return strings.Join(texts, "\n"), true
}

// messageTexts appends the texts of a message or a list of messages, and reports whether x is
// messages at all: objects with a role or GenAI parts (or a choice wrapping a message). Any other
// JSON (an object the model was asked for, even one with a "text" key) is not.
func messageTexts(x any, texts *[]string) bool {
	switch m := x.(type) {
	case []any:
		if len(m) == 0 {
			return false
		}
		for _, e := range m {
			if mm, ok := e.(map[string]any); !ok || !isMessage(mm) {
				return false
			}
		}
		for _, e := range m {
			messageTexts(e, texts)
		}
		return true
	case map[string]any:
		if !isMessage(m) {
			return false
		}
		if msg, ok := choiceMessage(m); ok && m["role"] == nil {
			return messageTexts(msg, texts) // a choice: {"index":0,"message":{…}}
		}
		if parts, ok := m["parts"]; ok {
			partTexts(parts, texts)
		} else if c, ok := m["content"]; ok {
			contentTexts(c, texts)
		}
		if r, ok := m["refusal"].(string); ok && r != "" { // OpenAI chat: the refusal beside the content
			*texts = append(*texts, r)
		}
		for k, val := range m { // rebuilt indexed fields: "contents.0.message_content.text"
			if s, ok := val.(string); ok && (strings.HasSuffix(k, ".text") || strings.HasSuffix(k, ".content")) {
				*texts = append(*texts, s)
			}
		}
		return true
	}
	return false
}

// isMessage: an object with a role, GenAI parts, or a choice's message.
func isMessage(m map[string]any) bool {
	if _, ok := m["role"]; ok {
		return true
	}
	if _, ok := m["parts"].([]any); ok {
		return true
	}
	msg, ok := choiceMessage(m)
	return ok && isMessage(msg)
}

// choiceMessage is the message of a choice: an object, or JSON text of one (span event attributes
// are primitives, so instrumentations write the message as JSON text).
func choiceMessage(m map[string]any) (map[string]any, bool) {
	switch msg := m["message"].(type) {
	case map[string]any:
		return msg, true
	case string:
		var parsed map[string]any
		if json.Unmarshal([]byte(msg), &parsed) == nil {
			return parsed, true
		}
	}
	return nil, false
}

// partTexts appends the text of GenAI parts: the content of text and refusal parts.
func partTexts(parts any, texts *[]string) {
	list, ok := parts.([]any)
	if !ok {
		if s, ok := parts.(string); ok {
			*texts = append(*texts, s)
		}
		return
	}
	for _, p := range list {
		part, ok := p.(map[string]any)
		if !ok {
			continue
		}
		switch part["type"] {
		case "text", "refusal", nil:
			if s, ok := part["content"].(string); ok {
				*texts = append(*texts, s)
			}
		}
	}
}

// contentTexts appends a message's content: a string, or a list of parts with text.
func contentTexts(c any, texts *[]string) {
	switch c := c.(type) {
	case string:
		*texts = append(*texts, c)
	case []any:
		for _, p := range c {
			part, ok := p.(map[string]any)
			if !ok {
				continue
			}
			switch part["type"] {
			case "text", "output_text", "input_text", "refusal", nil:
				for _, key := range []string{"text", "content", "refusal"} {
					if s, ok := part[key].(string); ok {
						*texts = append(*texts, s)
						break
					}
				}
			}
		}
	}
}
