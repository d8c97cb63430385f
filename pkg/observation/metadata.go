package observation

import (
	"encoding/json"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/svcattr"
)

// Metadata is the value at a dotted path of the observation's metadata, from the sources the
// platform takes it from: the per-key attributes svc.observation.metadata.<key>, svc.metadata.<key>
// and the Vercel AI SDK's ai.telemetry.metadata.<key> (but userId, sessionId, tags and svcPrompt,
// which are trace fields), first; then the members of the JSON object svc.observation.metadata
// (else svc.metadata). A per-key value is the JSON value decoded on spans of the new SDK majors
// (svcattr.IsNewSDKEncoding, docs/contract.md §5: numbers are float64, objects map[string]any) and the
// OTLP value as it arrived on every other span (int64, float64, bool, string, map[string]any,
// []any). A path walks into nested objects ("a.b" is key b of object a); a key that itself
// contains dots is found too, the longest existing key first.
func (v *View) Metadata(path string) (any, bool) {
	if x, ok := v.metadata(svcattr.ObservationMetadataPrefix, path, true); ok {
		return x, true
	}
	if x, ok := v.metadata("svc.metadata.", path, false); ok {
		return x, true
	}
	if head, _, _ := strings.Cut(path, "."); !vercelTraceKeys[head] {
		if x, ok := v.metadata("ai.telemetry.metadata.", path, false); ok {
			return x, true
		}
	}
	for _, blob := range []string{svcattr.ObservationMetadata, "svc.metadata"} {
		if a, ok := v.Span.Attributes().Get(blob); ok && a.AsString() != "" {
			return blobLookup(a, path)
		}
	}
	return nil, false
}

// vercelTraceKeys are the ai.telemetry.metadata keys the platform takes as trace fields, not as
// metadata.
var vercelTraceKeys = map[string]bool{"userId": true, "sessionId": true, "tags": true, "svcPrompt": true}

// TraceMetadata is Metadata of the propagated metadata: svc.trace.metadata.<key>, then the members
// of the JSON object svc.trace.metadata.
func (v *View) TraceMetadata(path string) (any, bool) {
	if x, ok := v.metadata(svcattr.TraceMetadataPrefix, path, true); ok {
		return x, true
	}
	if a, ok := v.Span.Attributes().Get(svcattr.TraceMetadata); ok {
		return blobLookup(a, path)
	}
	return nil, false
}

// blobLookup reads a path in a metadata object: a JSON object string (parsed, as the platform
// parses it) or an OTLP map.
func blobLookup(a pcommon.Value, path string) (any, bool) {
	var m map[string]any
	switch a.Type() {
	case pcommon.ValueTypeStr:
		if json.Unmarshal([]byte(a.Str()), &m) != nil {
			return nil, false
		}
	case pcommon.ValueTypeMap:
		m = a.Map().AsRaw()
	default:
		return nil, false
	}
	return lookupPath(m, path)
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

// metadata reads a path under per-key attributes prefix+<key>; decodable says whether the values
// are JSON text on new-SDK spans.
func (v *View) metadata(prefix, path string, decodable bool) (any, bool) {
	attrs := v.Span.Attributes()
	// The whole path as one key first: the common flat metadata key costs one lookup. The
	// concatenation is done on the stack for ordinary keys.
	var buf [128]byte
	key := append(append(buf[:0], prefix...), path...)
	if a, ok := attrs.Get(string(key)); ok {
		return v.decodeIf(decodable, a), true
	}
	// Else the longest existing key that is a dotted prefix of the path, then the rest of the
	// path inside its value.
	for i := strings.LastIndexByte(path, '.'); i > 0; i = strings.LastIndexByte(path[:i], '.') {
		a, ok := attrs.Get(prefix + path[:i])
		if !ok {
			continue
		}
		if m, ok := v.decodeIf(decodable, a).(map[string]any); ok {
			if found, ok := lookupPath(m, path[i+1:]); ok {
				return found, true
			}
		}
	}
	return nil, false
}

// decodeIf is a metadata attribute's value as the platform stores it.
func (v *View) decodeIf(decodable bool, a pcommon.Value) any {
	if decodable && a.Type() == pcommon.ValueTypeStr && v.jsonEncoded() {
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
