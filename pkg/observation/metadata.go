package observation

import (
	"encoding/json"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/svcattr"
)

// Metadata is the value at a dotted path of the observation's metadata
// (svc.observation.metadata.<key>), as the platform stores it (docs/contract.md §5): on spans of
// the new SDK majors (svcattr.IsNewSDKEncoding) the JSON value decoded (numbers are float64,
// objects map[string]any), on every other span the OTLP value as it arrived (int64, float64,
// bool, string, map[string]any, []any). A path walks into nested objects ("a.b" is key b of
// object a); a key that itself contains dots is found too, the longest existing key first.
func (v *View) Metadata(path string) (any, bool) {
	return v.metadata(svcattr.ObservationMetadataPrefix, path)
}

// TraceMetadata is Metadata of the propagated metadata (svc.trace.metadata.<key>).
func (v *View) TraceMetadata(path string) (any, bool) {
	return v.metadata(svcattr.TraceMetadataPrefix, path)
}

// Attribute is a span attribute by its exact key, as a Go value (see pcommon.Value.AsRaw;
// ints are int64).
func (v *View) Attribute(key string) (any, bool) {
	a, ok := v.Span.Attributes().Get(key)
	if !ok {
		return nil, false
	}
	return raw(a), true
}

// raw is a value as a Go value without allocating for strings, numbers and booleans.
func raw(a pcommon.Value) any {
	switch a.Type() {
	case pcommon.ValueTypeStr:
		return a.Str()
	case pcommon.ValueTypeInt:
		return a.Int()
	case pcommon.ValueTypeDouble:
		return a.Double()
	case pcommon.ValueTypeBool:
		return a.Bool()
	}
	return a.AsRaw()
}

func (v *View) jsonEncoded() bool {
	if v.encoding == 0 {
		v.encoding = 2
		if svcattr.IsNewSDKEncoding(v.Resource, v.Scope) {
			v.encoding = 1
		}
	}
	return v.encoding == 1
}

func (v *View) metadata(prefix, path string) (any, bool) {
	attrs := v.Span.Attributes()
	// The whole path as one key first: the common flat metadata key costs one lookup. The
	// concatenation is done on the stack for ordinary keys.
	var buf [128]byte
	key := append(append(buf[:0], prefix...), path...)
	if a, ok := attrs.Get(string(key)); ok {
		return v.decode(a), true
	}
	// Else the longest existing key that is a dotted prefix of the path, then the rest of the
	// path inside its value.
	for i := strings.LastIndexByte(path, '.'); i > 0; i = strings.LastIndexByte(path[:i], '.') {
		a, ok := attrs.Get(prefix + path[:i])
		if !ok {
			continue
		}
		if m, ok := v.decode(a).(map[string]any); ok {
			if found, ok := lookupPath(m, path[i+1:]); ok {
				return found, true
			}
		}
	}
	return nil, false
}

// decode is a metadata attribute's value as the platform stores it.
func (v *View) decode(a pcommon.Value) any {
	if a.Type() == pcommon.ValueTypeStr && v.jsonEncoded() {
		var x any
		if json.Unmarshal([]byte(a.Str()), &x) == nil {
			return x
		}
		// Not JSON after all: the platform keeps the text.
		return a.Str()
	}
	return raw(a)
}

// lookupPath walks a dotted path through nested objects, the longest existing key first at
// each level.
func lookupPath(m map[string]any, path string) (any, bool) {
	if x, ok := m[path]; ok {
		return x, true
	}
	for i := strings.LastIndexByte(path, '.'); i > 0; i = strings.LastIndexByte(path[:i], '.') {
		child, ok := m[path[:i]].(map[string]any)
		if !ok {
			continue
		}
		if x, ok := lookupPath(child, path[i+1:]); ok {
			return x, true
		}
	}
	return nil, false
}
