package svcmetadataprocessor

import (
	"encoding/json"
	"reflect"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Seeds beyond these live in testdata/fuzz/<FuzzName>/.

// FuzzEncodeValue: any JSON document, read into an OTLP value, encodes to JSON that decodes to
// the same value.
func FuzzEncodeValue(f *testing.F) {
	f.Add(`{"a":[1,2.5,true,null,"x"],"b":{"c":-0.0001}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var raw any
		if err := json.Unmarshal([]byte(doc), &raw); err != nil {
			return
		}
		v := pcommon.NewValueEmpty()
		if err := v.FromRaw(raw); err != nil {
			return
		}
		got := encodeValue(v)
		var back any
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Fatalf("encoding of %s is not JSON: %s: %v", doc, got, err)
		}
		if !reflect.DeepEqual(normalizeNumbers(raw), normalizeNumbers(back)) {
			t.Fatalf("encoding of %s decodes differently: %s", doc, got)
		}
	})
}

// normalizeNumbers turns every JSON number into float64 (OTLP keeps whole numbers read as
// float64 as doubles, which encode without a fraction).
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	case int64:
		return float64(x)
	}
	return v
}
