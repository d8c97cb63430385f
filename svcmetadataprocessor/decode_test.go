package svcmetadataprocessor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/jsontext"
)

// A member of a JSON object string flattened on a third-party span becomes the OTLP value it
// stands for, so the platform stores it with its type.
func TestDecodeJSONValue(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want any // pcommon.Value.AsRaw of the result
	}{
		{"string", `"prod"`, "prod"},
		{"escaped string", `"a\"b\u00e9"`, `a"bé`},
		{"int", `5`, int64(5)},
		{"negative int", `-42`, int64(-42)},
		{"fraction is a double", `2.5`, 2.5},
		{"whole number with a fraction part is a double", `1.0`, 1.0},
		{"exponent is a double", `1e3`, 1000.0},
		{"int beyond 64 bits is a double", `18446744073709551616`, 18446744073709551616.0},
		{"true", `true`, true},
		{"false", `false`, false},
		{"null is empty", `null`, nil},
		{"object keeps member order", `{"b":1,"a":{"c":[true,"x"]}}`, map[string]any{"b": int64(1), "a": map[string]any{"c": []any{true, "x"}}}},
		{"array", ` [1, "x", null] `, []any{int64(1), "x", nil}},
		{"empty object", `{}`, map[string]any{}},
		{"empty array", `[]`, []any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := pcommon.NewValueEmpty()
			require.NoError(t, decodeJSONValue(tt.src, v))
			assert.Equal(t, tt.want, v.AsRaw())
		})
	}
	v := pcommon.NewValueEmpty()
	require.NoError(t, decodeJSONValue(`{"b":1,"a":2}`, v))
	var keys []string
	for k := range v.Map().All() {
		keys = append(keys, k)
	}
	assert.Equal(t, []string{"b", "a"}, keys, "members stay in document order")
}

func TestDecodeJSONValueRejects(t *testing.T) {
	for _, src := range []string{``, `{`, `[1,]`, `1 2`, `}`, `nul`, strings.Repeat("[", jsontext.MaxDepth+1) + strings.Repeat("]", jsontext.MaxDepth+1)} {
		assert.Error(t, decodeJSONValue(src, pcommon.NewValueEmpty()), "%q", src)
	}
}
