package svcmetadataprocessor

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/jsontext"
)

// The encoding table of the README, row by row.
func TestEncodeValue(t *testing.T) {
	nested := pcommon.NewValueMap()
	nested.Map().PutStr("region", "eu")
	limits := nested.Map().PutEmptyMap("limits")
	limits.PutInt("rpm", 60)
	limits.PutBool("burst", true)
	tags := nested.Map().PutEmptySlice("tags")
	tags.AppendEmpty().SetStr("a")
	tags.AppendEmpty().SetDouble(1.5)
	tags.AppendEmpty() // empty value

	tests := []struct {
		name string
		v    pcommon.Value
		want string
	}{
		{"string", pcommon.NewValueStr("prod"), `"prod"`},
		{"empty string", pcommon.NewValueStr(""), `""`},
		{"string that is JSON stays a string", pcommon.NewValueStr(`{"a":1}`), `"{\"a\":1}"`},
		{"string with quotes and controls", pcommon.NewValueStr("a\"b\\c\n\t\x01"), `"a\"b\\c\n\t\u0001"`},
		{"non-ASCII is kept", pcommon.NewValueStr("café 😀"), `"café 😀"`},
		{"line separators are escaped", pcommon.NewValueStr("a\u2028b\u2029"), `"a\u2028b\u2029"`},
		{"HTML characters are kept", pcommon.NewValueStr("<a&b>"), `"<a&b>"`},
		{"invalid UTF-8 becomes U+FFFD", pcommon.NewValueStr("a\xffb"), `"a\ufffdb"`},
		{"int", pcommon.NewValueInt(5), `5`},
		{"negative int", pcommon.NewValueInt(math.MinInt64), `-9223372036854775808`},
		{"double", pcommon.NewValueDouble(2.5), `2.5`},
		{"whole double", pcommon.NewValueDouble(3), `3`},
		{"small double", pcommon.NewValueDouble(1e-7), `1e-7`},
		{"large double", pcommon.NewValueDouble(1e21), `1e+21`},
		{"NaN", pcommon.NewValueDouble(math.NaN()), `"NaN"`},
		{"+Inf", pcommon.NewValueDouble(math.Inf(1)), `"Infinity"`},
		{"-Inf", pcommon.NewValueDouble(math.Inf(-1)), `"-Infinity"`},
		{"true", pcommon.NewValueBool(true), `true`},
		{"false", pcommon.NewValueBool(false), `false`},
		{"map", nested, `{"region":"eu","limits":{"rpm":60,"burst":true},"tags":["a",1.5,null]}`},
		{"empty map", pcommon.NewValueMap(), `{}`},
		{"empty slice", pcommon.NewValueSlice(), `[]`},
		{"bytes", bytesValue([]byte{1, 2, 0xff}), `"AQL/"`},
		{"empty", pcommon.NewValueEmpty(), `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := encodeValue(tt.v)
			assert.Equal(t, tt.want, got)
			assert.True(t, json.Valid([]byte(got)), "not valid JSON: %s", got)
		})
	}
}

func bytesValue(b []byte) pcommon.Value {
	v := pcommon.NewValueBytes()
	v.Bytes().FromRaw(b)
	return v
}

// Strings and finite floats are written exactly as encoding/json writes them (without HTML
// escaping), so any JSON reader gets the same value back.
func TestEncodeMatchesEncodingJSON(t *testing.T) {
	stdJSON := func(v any) string {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(v))
		return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	}
	for _, s := range []string{"", "plain", "\x00\x1f\x7f", "tab\tnew\nline\r", "\\\"", "é漢字😀", "\u2028\u2029", "bad \xc3\x28 utf8", "\xed\xa0\x80"} {
		assert.Equal(t, stdJSON(s), string(jsontext.AppendString(nil, s)), "%q", s)
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1.5, 0.1, 1e-6, 9.99e-7, 1e20, 1e21, 123456789012345680000, math.MaxFloat64, math.SmallestNonzeroFloat64, 5e-324} {
		assert.Equal(t, stdJSON(f), string(appendJSONFloat(nil, f)), "%v", f)
	}
}
