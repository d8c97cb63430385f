package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/svcattr"
)

// spanEncoding is how one span's metadata values are written: the way the platform reads that
// span (docs/contract.md §5). The platform decodes JSON metadata only on spans of the
// new SDK majors and stores every other span's metadata exactly as it arrives, so the encoding
// is a property of the span's scope and resource, never of anything the gateway adds.
type spanEncoding uint8

const (
	// rawEncoding: older svc SDKs and every other instrumentation. The platform stores values as
	// they arrive, so they keep their OTLP value and type (`prod` stays `prod`, 5 stays an int).
	rawEncoding spanEncoding = iota
	// jsonEncoding: scope svc-sdk at JS/TS >= 6 or Python >= 5. Every value is JSON text, which
	// the platform decodes to a typed value; the SDK wrote it so, and it is never encoded again.
	jsonEncoding
)

// encodingOf is the encoding of the spans of one scope.
func encodingOf(resource pcommon.Resource, scope pcommon.InstrumentationScope) spanEncoding {
	if svcattr.IsNewSDKEncoding(resource, scope) {
		return jsonEncoding
	}
	return rawEncoding
}

// metadataEntry is one metadata key and its value, taken either from an OTLP value (a map entry,
// a promoted attribute) or from a member of a JSON object string.
type metadataEntry struct {
	key string
	// value is an owned copy of the OTLP value; unused when fromJSON.
	value pcommon.Value
	// valueJSON is the compact JSON text of a JSON object member; set when fromJSON.
	valueJSON string
	fromJSON  bool
}

// write stores the entry's value into dst in encoding e: JSON text for jsonEncoding (a JSON
// member keeps its text, an OTLP value is encoded from its type), the raw OTLP value for
// rawEncoding (a JSON member becomes the OTLP value it stands for).
func (e spanEncoding) write(dst pcommon.Value, entry metadataEntry) {
	switch {
	case e == jsonEncoding && entry.fromJSON:
		dst.SetStr(entry.valueJSON)
	case e == jsonEncoding:
		dst.SetStr(encodeValue(entry.value))
	case entry.fromJSON:
		if decodeJSONValue(entry.valueJSON, dst) != nil {
			// jsontext.ObjectMembers validated the text, so this is not reached; keep the text rather
			// than lose the value.
			dst.SetStr(entry.valueJSON)
		}
	default:
		entry.value.CopyTo(dst)
	}
}
