package svcmetadataprocessor

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Seeds beyond these live in testdata/fuzz/<FuzzName>/.

// FuzzEncodeString: every string encodes to valid JSON that decodes back to it, byte for byte
// what encoding/json writes.
func FuzzEncodeString(f *testing.F) {
	f.Add("prod")
	f.Add("\"\\\n\x00\u2028é😀")
	f.Fuzz(func(t *testing.T, s string) {
		got := appendJSONString(nil, s)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if want := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(got, want) {
			t.Fatalf("encode %q: got %s, encoding/json %s", s, got, want)
		}
		if utf8.ValidString(s) {
			var back string
			if err := json.Unmarshal(got, &back); err != nil || back != s {
				t.Fatalf("round trip of %q: %q, %v", s, back, err)
			}
		}
	})
}

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
