package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"

import (
	"encoding/base64"
	"math"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/jsontext"
)

// This file is the one place that writes metadata values as JSON text (docs/contract.md §5).
// The output is what JSON.stringify / json.dumps(ensure_ascii=False) would write for the same
// typed value: no insignificant whitespace, non-ASCII characters left as they are, map entries
// in their OTLP order.

// encodeValue returns the JSON text of an OTLP attribute value, keeping its type:
//
//	Str    "prod"          -> "prod" (a JSON string, with its quotes)
//	Int    5               -> 5
//	Double 2.5             -> 2.5 (NaN, +Inf, -Inf -> "NaN", "Infinity", "-Infinity")
//	Bool   true            -> true
//	Map    {a: 1}          -> {"a":1}
//	Slice  [1, "x"]        -> [1,"x"]
//	Bytes  0x01 0x02       -> "AQI=" (standard base64, as OTLP/JSON writes bytes)
//	Empty                  -> null
func encodeValue(v pcommon.Value) string {
	return string(appendValueJSON(nil, v))
}

func appendValueJSON(b []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return jsontext.AppendString(b, v.Str())
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(b, v.Int(), 10)
	case pcommon.ValueTypeDouble:
		return appendJSONFloat(b, v.Double())
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(b, v.Bool())
	case pcommon.ValueTypeMap:
		b = append(b, '{')
		first := true
		for k, mv := range v.Map().All() {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = jsontext.AppendString(b, k)
			b = append(b, ':')
			b = appendValueJSON(b, mv)
		}
		return append(b, '}')
	case pcommon.ValueTypeSlice:
		b = append(b, '[')
		s := v.Slice()
		for i := 0; i < s.Len(); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValueJSON(b, s.At(i))
		}
		return append(b, ']')
	case pcommon.ValueTypeBytes:
		raw := v.Bytes().AsRaw()
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, raw)
		return append(b, '"')
	default: // pcommon.ValueTypeEmpty
		return append(b, "null"...)
	}
}

// appendJSONFloat writes a float the way encoding/json and JavaScript do; JSON has no
// literal for NaN and the infinities, so those become the strings JavaScript prints for them.
func appendJSONFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	return jsontext.AppendFloat(b, f)
}
