package platform

import (
	"encoding/json"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// The platform's own reading of docs/contract.md §5. These names and the decoding rule are
// spelled here on purpose: the stand-in must not take them from the gateway (pkg/svcattr), or a
// gateway bug would be confirmed by its own code.

// Span and resource attributes the platform reads (docs/contract.md §5; OpenTelemetry semantic
// conventions for the SDK language).
const (
	attrObservationMetadataPrefix = "svc.observation.metadata."
	attrTraceMetadataPrefix       = "svc.trace.metadata."
	attrObservationInput          = "svc.observation.input"
	attrObservationOutput         = "svc.observation.output"
	attrObservationType           = "svc.observation.type"
	attrTraceName                 = "svc.trace.name"
	attrEnvironment               = "svc.environment"
	attrTelemetrySDKLanguage      = "telemetry.sdk.language"
)

// sdkScope is the instrumentation scope the platform's own SDKs write their spans under.
const sdkScope = "svc-sdk"

// firstDecodingMajor is, by telemetry.sdk.language, the first SDK major whose metadata the
// server decodes as JSON: JS/TS v6, Python v5 (docs/contract.md §5).
var firstDecodingMajor = map[string]int{
	"nodejs":     6,
	"javascript": 6,
	"webjs":      6,
	"python":     5,
}

// decodesMetadata is the server's rule: it decodes JSON metadata only for spans from JS/TS v6+
// / Python v5+, that is scope svc-sdk whose version's major is at least the language's first
// decoding major. A resource attribute cannot change it: the server knows none for this.
func decodesMetadata(resource pcommon.Resource, scope pcommon.InstrumentationScope) bool {
	if scope.Name() != sdkScope {
		return false
	}
	lang, ok := resource.Attributes().Get(attrTelemetrySDKLanguage)
	if !ok {
		return false
	}
	first, known := firstDecodingMajor[strings.ToLower(lang.AsString())]
	if !known {
		return false
	}
	version := strings.TrimPrefix(strings.TrimSpace(scope.Version()), "v")
	head, _, _ := strings.Cut(version, ".")
	major, err := strconv.Atoi(head)
	return err == nil && major >= first
}

// metadataFrom collects the attributes prefix<key> into a map by key, each value read by
// metadataValue. A bare attribute named like the prefix without its dot is not merged in: the
// svcmetadata processor flattens those, so one arriving here shows up only in Attributes.
func metadataFrom(attrs pcommon.Map, prefix string, decode bool) map[string]any {
	var out map[string]any
	for name, v := range attrs.All() {
		key, ok := strings.CutPrefix(name, prefix)
		if !ok || key == "" {
			continue
		}
		if out == nil {
			out = make(map[string]any)
		}
		out[key] = metadataValue(v, decode)
	}
	return out
}

// metadataValue is one stored metadata value:
//   - decode (a new SDK's span): the value is JSON text, decoded to a typed value (float64,
//     bool, string, map[string]any, []any, nil); text that is not valid JSON is kept as its raw
//     string, as the platform cannot do better;
//   - otherwise the value as it arrived, with its OTLP type: a string stays the string (`"prod"`
//     sent with its quotes keeps them), an int stays an int64, a double a float64, a bool a
//     bool, a map a map[string]any, a slice a []any, bytes their base64 text, an empty value nil.
//     JSON output writes them as the same JSON types.
func metadataValue(v pcommon.Value, decode bool) any {
	if decode {
		raw := v.AsString()
		var decoded any
		if err := json.Unmarshal([]byte(raw), &decoded); err != nil {
			return raw
		}
		return decoded
	}
	if v.Type() == pcommon.ValueTypeBytes {
		return v.AsString() // base64, as OTLP/JSON writes bytes
	}
	return v.AsRaw()
}
