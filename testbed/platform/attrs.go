package platform

import (
	"encoding/json"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// spanView is one span with what the platform reads around it: its resource's attributes and
// its instrumentation scope.
type spanView struct {
	span         ptrace.Span
	attrs        pcommon.Map
	resource     pcommon.Map
	scopeName    string
	scopeVersion string
	scopeAttrs   pcommon.Map
}

// truthy is the platform's test of a value: set and not empty, 0 or false.
func truthy(v pcommon.Value) bool {
	switch v.Type() {
	case pcommon.ValueTypeEmpty:
		return false
	case pcommon.ValueTypeStr:
		return v.Str() != ""
	case pcommon.ValueTypeInt:
		return v.Int() != 0
	case pcommon.ValueTypeDouble:
		return v.Double() != 0
	case pcommon.ValueTypeBool:
		return v.Bool()
	}
	return true
}

// truthyAttr is the attribute when it is truthy.
func truthyAttr(attrs pcommon.Map, name string) (pcommon.Value, bool) {
	v, ok := attrs.Get(name)
	if !ok || !truthy(v) {
		return pcommon.Value{}, false
	}
	return v, true
}

func hasAnyTruthy(attrs pcommon.Map, names ...string) bool {
	for _, n := range names {
		if _, ok := truthyAttr(attrs, n); ok {
			return true
		}
	}
	return false
}

// attrString is a string attribute's value ("" when absent or not a string).
func attrString(attrs pcommon.Map, name string) string {
	if v, ok := attrs.Get(name); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

// firstTruthy is the first truthy attribute of names.
func firstTruthy(attrs pcommon.Map, names ...string) (pcommon.Value, bool) {
	for _, n := range names {
		if v, ok := truthyAttr(attrs, n); ok {
			return v, true
		}
	}
	return pcommon.Value{}, false
}

// plainValue is an attribute as the platform's decoder gives it to JavaScript: string, number,
// bool, list; a kvlist or bytes value is the JSON text of its OTLP wrapper (docs/contract.md §5.2).
func plainValue(v pcommon.Value) any {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return v.Str()
	case pcommon.ValueTypeInt:
		return v.Int()
	case pcommon.ValueTypeDouble:
		return v.Double()
	case pcommon.ValueTypeBool:
		return v.Bool()
	case pcommon.ValueTypeSlice:
		out := make([]any, 0, v.Slice().Len())
		for _, e := range v.Slice().All() {
			out = append(out, plainValue(e))
		}
		return out
	case pcommon.ValueTypeMap:
		return jsonText(map[string]any{"kvlistValue": map[string]any{"values": otlpKeyValues(v.Map())}})
	case pcommon.ValueTypeBytes:
		return jsonText(map[string]any{"bytesValue": v.AsString()})
	}
	return nil
}

// otlpKeyValues is a map in OTLP/JSON's wrapper form, for plainValue.
func otlpKeyValues(m pcommon.Map) []any {
	out := make([]any, 0, m.Len())
	for k, v := range m.All() {
		out = append(out, map[string]any{"key": k, "value": otlpAnyValue(v)})
	}
	return out
}

func otlpAnyValue(v pcommon.Value) map[string]any {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return map[string]any{"stringValue": v.Str()}
	case pcommon.ValueTypeInt:
		return map[string]any{"intValue": v.AsString()}
	case pcommon.ValueTypeDouble:
		return map[string]any{"doubleValue": v.Double()}
	case pcommon.ValueTypeBool:
		return map[string]any{"boolValue": v.Bool()}
	case pcommon.ValueTypeSlice:
		vals := make([]any, 0, v.Slice().Len())
		for _, e := range v.Slice().All() {
			vals = append(vals, otlpAnyValue(e))
		}
		return map[string]any{"arrayValue": map[string]any{"values": vals}}
	case pcommon.ValueTypeMap:
		return map[string]any{"kvlistValue": map[string]any{"values": otlpKeyValues(v.Map())}}
	case pcommon.ValueTypeBytes:
		return map[string]any{"bytesValue": v.AsString()}
	}
	return map[string]any{}
}

// stringOrJSON is a value as a string: strings as they are, anything else as JSON text.
func stringOrJSON(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return jsonText(v)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// parseJSON is the value of JSON text, ok false when it is not JSON.
func parseJSON(s string) (any, bool) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, false
	}
	return v, true
}
