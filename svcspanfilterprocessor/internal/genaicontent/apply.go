package genaicontent

import (
	"bytes"
	"encoding/json"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Apply writes the content gathered in c onto span, in the structure of the current GenAI semantic
// conventions, and reports whether it wrote anything.
//
// Precedence: a span that already carries content (input or output messages of any convention,
// CarriesContent) keeps it and gets nothing from the records. gen_ai.system_instructions alone is not
// content: the JS Responses API instrumentation always sets it, even with content capture off. The
// span's own system instructions are kept; the records' are written only where the span has none.
func Apply(span ptrace.Span, c *Content) bool {
	if c.Empty() {
		return false
	}
	attrs := span.Attributes()
	if CarriesContent(attrs) {
		return false
	}
	applied := false
	if msgs, ok := c.inputMessages(); ok {
		attrs.PutStr(AttrInputMessages, marshal(msgs))
		applied = true
	}
	if msgs, ok := c.outputMessages(); ok {
		attrs.PutStr(AttrOutputMessages, marshal(msgs))
		applied = true
	}
	if _, has := attrs.Get(AttrSystemInstructions); !has && c.hasSystemIns {
		attrs.PutStr(AttrSystemInstructions, marshal(c.system))
		applied = true
	}
	if applied && c.provider != "" {
		_, hasProvider := attrs.Get(AttrProviderName)
		_, hasSystem := attrs.Get(AttrSystem)
		if !hasProvider && !hasSystem {
			attrs.PutStr(AttrProviderName, c.provider)
		}
	}
	return applied
}

// CarriesContent reports whether span attributes already hold a prompt or a completion: the current
// conventions' messages, or the older gen_ai.prompt / gen_ai.completion (and their indexed
// gen_ai.prompt.N.* / gen_ai.completion.N.* form of OpenLLMetry).
func CarriesContent(attrs pcommon.Map) bool {
	found := false
	attrs.Range(func(k string, v pcommon.Value) bool {
		found = isContentAttribute(k, v)
		return !found
	})
	return found
}

const (
	genAIPrefix       = "gen_ai."
	attrOperationName = "gen_ai.operation.name"
)

// isContentAttribute reports whether the attribute k holds a prompt or a completion.
func isContentAttribute(k string, v pcommon.Value) bool {
	switch {
	case k == AttrInputMessages || k == AttrOutputMessages:
		return !isEmpty(v)
	case k == "gen_ai.prompt" || k == "gen_ai.completion":
		return !isEmpty(v)
	default:
		return indexedUnder(k, "gen_ai.prompt.") || indexedUnder(k, "gen_ai.completion.")
	}
}

// indexedUnder reports whether k is prefix followed by a digit (gen_ai.prompt.0.content).
func indexedUnder(k, prefix string) bool {
	return strings.HasPrefix(k, prefix) && len(k) > len(prefix) && k[len(prefix)] >= '0' && k[len(prefix)] <= '9'
}

func isEmpty(v pcommon.Value) bool {
	switch v.Type() {
	case pcommon.ValueTypeEmpty:
		return true
	case pcommon.ValueTypeStr:
		s := strings.TrimSpace(v.Str())
		return s == "" || s == "[]" || s == "null"
	case pcommon.ValueTypeSlice:
		return v.Slice().Len() == 0
	}
	return false
}

// marshal writes v as JSON text without HTML escaping (prompts hold <, > and & verbatim).
func marshal(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Values come from pdata (strings, numbers, maps, slices): they always encode.
		return "null"
	}
	return strings.TrimSuffix(buf.String(), "\n")
}
