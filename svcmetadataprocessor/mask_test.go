package svcmetadataprocessor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func testMasker(t testing.TB) *masker {
	t.Helper()
	m, err := newMasker(maskingTestConfig().Masking)
	require.NoError(t, err)
	return m
}

func TestNewMaskerOffWithoutRules(t *testing.T) {
	m, err := newMasker(createDefaultConfig().Masking)
	require.NoError(t, err)
	assert.Nil(t, m)
}

func TestMaskStringRulesInOrder(t *testing.T) {
	m, err := newMasker(MaskingConfig{
		BuiltinRules: []string{"email"},
		Rules: []MaskRule{
			{Pattern: `(\w+)=secret`, Replacement: "$1=***"},
			{Pattern: `\[EMAIL\]`, Replacement: "<e-mail>"}, // sees the builtin rule's output
			{Pattern: `token`}, // default replacement
		},
	})
	require.NoError(t, err)
	got, changed := m.maskString("pw=secret, mail a@b.io, token")
	assert.True(t, changed)
	assert.Equal(t, "pw=***, mail <e-mail>, ***", got)
}

func TestMaskText(t *testing.T) {
	m := testMasker(t)
	tests := []struct {
		name, in, want string
		res            maskResult
	}{
		{"raw text", "mail jane@example.com", "mail [EMAIL]", masked},
		{"raw text without matches", "hello", "hello", unchanged},
		{"JSON messages keep their layout", `[{"role": "user", "content": "jane@example.com"}]`, `[{"role": "user", "content": "[EMAIL]"}]`, masked},
		{"JSON string literal", `"call jane@example.com"`, `"call [EMAIL]"`, masked},
		{"escaped JSON is masked decoded", `{"c":"jane\u0040example.com"}`, `{"c":"[EMAIL]"}`, masked},
		{"masked keys inside JSON", `{"password": {"x": 1}, "PassWord": 5, "n": 1}`, `{"password": "***", "PassWord": "***", "n": 1}`, masked},
		{"numbers inside JSON", `{"card": 4111111111111111, "n": 4111111111111112}`, `{"card": "[CARD]", "n": 4111111111111112}`, masked},
		{"broken JSON is masked as text", `{"c": "jane@example.com"`, `{"c": "[EMAIL]"`, masked},
		{"number-looking text is text", "4111111111111111", "[CARD]", masked},
		{"too deep", strings.Repeat("[", 200) + `"a@b.io"` + strings.Repeat("]", 200), MaskPlaceholder, placeholder},
		{"too deep before it breaks", strings.Repeat("[", 200) + `"a@b.io"`, MaskPlaceholder, placeholder},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, res := m.maskText(tt.in)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.res, res)
		})
	}
}

func TestMaskMetadataJSON(t *testing.T) {
	m := testMasker(t)
	tests := []struct {
		name, key, in, want string
		res                 maskResult
	}{
		{"string", "contact", `"jane@example.com"`, `"[EMAIL]"`, masked},
		{"card-like int becomes a masked string", "n", `4111111111111111`, `"[CARD]"`, masked},
		{"other numbers stay numbers", "n", `1700000000000`, `1700000000000`, unchanged},
		{"number literal is kept exactly", "n", `1.50E+2`, `1.50E+2`, unchanged},
		{"booleans reach the rules as true/false", "b", `true`, `true`, unchanged},
		{"null", "x", `null`, `null`, unchanged},
		{"nested", "user", `{"email":"a@b.io","tags":["x@y.io",1],"password":"p"}`, `{"email":"[EMAIL]","tags":["[EMAIL]",1],"password":"***"}`, masked},
		{"masked key, whole value", "Password", `{"a":1}`, `"***"`, masked},
		{"masked key already masked", "password", `"***"`, `"***"`, unchanged},
		{"not JSON", "raw", `jane@example.com`, `"` + MaskPlaceholder + `"`, placeholder},
		{"truncated JSON", "raw", `{"a":`, `"` + MaskPlaceholder + `"`, placeholder},
		{"placeholder is stable", "raw", `"` + MaskPlaceholder + `"`, `"` + MaskPlaceholder + `"`, unchanged},
		{"too deep", "deep", strings.Repeat("[", 130) + strings.Repeat("]", 130), `"` + MaskPlaceholder + `"`, placeholder},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, res := m.maskMetadataJSON(tt.key, tt.in)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.res, res)
		})
	}
}

// Rules see booleans as "true"/"false" and numbers as their decimal text; a rule that changes
// them turns them into the masked string.
func TestMaskScalarsAsWhatTheyAre(t *testing.T) {
	m, err := newMasker(MaskingConfig{Rules: []MaskRule{
		{Pattern: `^true$`, Replacement: "yes"},
		{Pattern: `^\d{3}$`, Replacement: "NNN"},
		{Pattern: `^2\.5$`, Replacement: "two and a half"},
	}})
	require.NoError(t, err)
	got, _ := m.maskMetadataJSON("k", `[true,false,123,1234,2.5]`)
	assert.Equal(t, `["yes",false,"NNN",1234,"two and a half"]`, got)

	v := pcommon.NewValueSlice()
	v.Slice().AppendEmpty().SetBool(true)
	v.Slice().AppendEmpty().SetInt(123)
	v.Slice().AppendEmpty().SetDouble(2.5)
	v.Slice().AppendEmpty().SetInt(1234)
	assert.Equal(t, masked, m.maskValue(v))
	assert.Equal(t, []any{"yes", "NNN", "two and a half", int64(1234)}, v.Slice().AsRaw())
}

func TestMaskValueStructured(t *testing.T) {
	m := testMasker(t)
	v := pcommon.NewValueSlice()
	msg := v.Slice().AppendEmpty().SetEmptyMap()
	msg.PutStr("role", "user")
	msg.PutStr("content", "I am jane@example.com")
	msg.PutEmptyMap("api_key").PutStr("value", "sk-proj-abcdefghijklmnopqrstuvwx")
	msg.PutInt("card", 4111111111111111)
	msg.PutEmptyBytes("blob").FromRaw([]byte("bytes with a@b.io"))

	assert.Equal(t, masked, m.maskValue(v))
	assert.Equal(t, []any{map[string]any{
		"role": "user", "content": "I am [EMAIL]", "api_key": "***", "card": "[CARD]", "blob": "bytes with [EMAIL]",
	}}, v.Slice().AsRaw())
	assert.Equal(t, unchanged, m.maskValue(v), "masking is idempotent")

	deep := pcommon.NewValueMap()
	inner := deep.Map()
	for range maxJSONDepth + 1 {
		inner = inner.PutEmptyMap("a")
	}
	inner.PutStr("mail", "a@b.io")
	assert.Equal(t, placeholder, m.maskValue(deep))
	assert.Equal(t, MaskPlaceholder, deep.Str())
}
