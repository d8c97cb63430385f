package platform

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Metadata, as docs/contract.md §5.2 states it. These names and rules are spelled here on purpose: the
// stand-in must not take them from the gateway, or a gateway bug would be confirmed by its own code.

const (
	attrObservationMetadata       = "svc.observation.metadata"
	attrTraceMetadata             = "svc.trace.metadata"
	attrSharedMetadata            = "svc.metadata"
	attrVercelMetadata            = "ai.telemetry.metadata"
	attrObservationMetadataPrefix = attrObservationMetadata + "."
	attrTraceMetadataPrefix       = attrTraceMetadata + "."
	attrObservationInput          = "svc.observation.input"
	attrObservationOutput         = "svc.observation.output"
	attrObservationType           = "svc.observation.type"
	attrTraceName                 = "svc.trace.name"
	attrEnvironment               = "svc.environment"
	attrOperationName             = "gen_ai.operation.name"
)

// sdkScope is the instrumentation scope of the platform's own SDKs: their spans get no
// `attributes` metadata key.
const sdkScope = "svc-sdk"

// excludedVercelKeys feed trace fields and never metadata.
var excludedVercelKeys = map[string]bool{"userId": true, "sessionId": true, "tags": true, "svcPrompt": true}

// spanMetadata is the metadata of one kind (observation or trace) a span carries: the blob
// svc.<kind>.metadata (else svc.metadata) parsed, then the prefixed keys svc.<kind>.metadata.<k>,
// svc.metadata.<k>, ai.telemetry.metadata.<k> as sent, which beat the blob's keys.
func spanMetadata(attrs pcommon.Map, kind string) map[string]any {
	out := map[string]any{}
	blob, ok := truthyAttr(attrs, kind)
	if !ok {
		blob, ok = truthyAttr(attrs, attrSharedMetadata)
	}
	if ok {
		for k, v := range blobKeys(blob) {
			out[k] = v
		}
	}
	for name, v := range attrs.All() {
		for _, prefix := range []string{kind + ".", attrSharedMetadata + ".", attrVercelMetadata + "."} {
			key, found := strings.CutPrefix(name, prefix)
			if !found || key == "" {
				continue
			}
			if prefix == attrVercelMetadata+"." && excludedVercelKeys[key] {
				continue
			}
			out[key] = plainValue(v)
		}
	}
	return out
}

// blobKeys parses a metadata blob: an object gives its keys, an array its indexes; primitives and
// bad JSON give nothing.
func blobKeys(v pcommon.Value) map[string]any {
	var parsed any
	switch v.Type() {
	case pcommon.ValueTypeStr:
		p, ok := parseJSON(v.Str())
		if !ok {
			return nil
		}
		parsed = p
	case pcommon.ValueTypeMap, pcommon.ValueTypeSlice:
		parsed = v.AsRaw()
	default:
		return nil
	}
	switch p := parsed.(type) {
	case map[string]any:
		return p
	case []any:
		out := make(map[string]any, len(p))
		for i, e := range p {
			out[strconv.Itoa(i)] = e
		}
		return out
	}
	return nil
}

// systemMetadata are the keys the platform adds: `attributes` (span attributes but the I/O keys
// and the three metadata prefixes, non-strings JSON-encoded; not for svc-sdk scopes),
// `resourceAttributes` (raw) and `scope` {name, version, attributes}.
func systemMetadata(sp spanView) map[string]any {
	out := map[string]any{}
	if !strings.HasPrefix(sp.scopeName, sdkScope) {
		attrs := map[string]any{}
		for name, v := range sp.attrs.All() {
			if isIOKey(name) || strings.HasPrefix(name, attrObservationMetadataPrefix) ||
				strings.HasPrefix(name, attrTraceMetadataPrefix) || strings.HasPrefix(name, attrVercelMetadata+".") {
				continue
			}
			attrs[name] = stringOrJSON(plainValue(v))
		}
		out["attributes"] = attrs
	}
	out["resourceAttributes"] = sp.resource.AsRaw()
	out["scope"] = map[string]any{"name": sp.scopeName, "version": sp.scopeVersion, "attributes": sp.scopeAttrs.AsRaw()}
	return out
}

// mergeInto copies each source's keys over dst, later sources winning.
func mergeInto(dst map[string]any, sources ...map[string]any) map[string]any {
	if dst == nil {
		dst = map[string]any{}
	}
	for _, src := range sources {
		for k, v := range src {
			dst[k] = v
		}
	}
	return dst
}

// storedMetadata is metadata as the platform stores it and its read API returns it: nested
// objects flattened to dotted keys, every leaf kept as a string (non-strings as JSON text), then
// each value that parses as JSON read back parsed (so "5" reads as 5, `"prod"` as prod), whatever
// SDK sent it.
func storedMetadata(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	flat := map[string]string{}
	flatten(flat, "", m)
	out := make(map[string]any, len(flat))
	for k, s := range flat {
		if v, ok := parseJSON(s); ok {
			out[k] = v
		} else {
			out[k] = s
		}
	}
	return out
}

func flatten(out map[string]string, prefix string, m map[string]any) {
	for k, v := range m {
		key := prefix + k
		if nested, ok := v.(map[string]any); ok {
			flatten(out, key+".", nested) // an empty object leaves no key
			continue
		}
		out[key] = stringOrJSON(v)
	}
}
