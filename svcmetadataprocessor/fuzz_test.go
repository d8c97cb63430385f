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

func fuzzMasker(t testing.TB) *masker {
	cfg := maskingTestConfig().Masking
	cfg.BuiltinRules = append(cfg.BuiltinRules, "bearer_token")
	m, err := newMasker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// FuzzMaskText: masking free text never fails, keeps JSON documents valid JSON, and is
// idempotent (masked text is masked already).
func FuzzMaskText(f *testing.F) {
	f.Add(`mail jane@example.com`)
	f.Add(`[{"role":"user","content":"card 4111 1111 1111 1111","password":"x"}]`)
	m := fuzzMasker(f)
	f.Fuzz(func(t *testing.T, s string) {
		out, res := m.maskText(s)
		if res == unchanged && out != s {
			t.Fatalf("unchanged result differs: %q -> %q", s, out)
		}
		if res != placeholder && looksLikeJSONDocument(s) && json.Valid([]byte(s)) && !json.Valid([]byte(out)) {
			t.Fatalf("valid JSON %q masked to invalid JSON %q", s, out)
		}
		again, res2 := m.maskText(out)
		if res2 != unchanged || again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, again)
		}
	})
}

// FuzzMaskMetadataJSON: masking an encoded metadata value always gives valid JSON (the masked
// value, the key replacement or the placeholder) and is idempotent.
func FuzzMaskMetadataJSON(f *testing.F) {
	f.Add("user", `{"email":"a@b.io","n":4111111111111111}`)
	f.Add("password", `"x"`)
	f.Add("raw", `not json`)
	m := fuzzMasker(f)
	f.Fuzz(func(t *testing.T, key, text string) {
		out, res := m.maskMetadataJSON(key, text)
		if !json.Valid([]byte(out)) {
			t.Fatalf("%q: %q masked to invalid JSON %q", key, text, out)
		}
		if res == unchanged && out != text {
			t.Fatalf("unchanged result differs: %q -> %q", text, out)
		}
		if !json.Valid([]byte(text)) && res != placeholder && !m.isMaskedKey(key) && out == text {
			t.Fatalf("invalid JSON %q passed unmasked", text)
		}
		again, res2 := m.maskMetadataJSON(key, out)
		if res2 != unchanged || again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", text, out, again)
		}
	})
}

// FuzzWindowedRuleEqualsWholeText: the builtin rules, run only on their windows, give what
// their regular expressions give on the whole text.
func FuzzWindowedRuleEqualsWholeText(f *testing.F) {
	for _, s := range windowSamples {
		f.Add(s)
	}
	var maskers []*masker
	for name := range builtinRules {
		m, err := newMasker(MaskingConfig{BuiltinRules: []string{name}})
		if err != nil {
			f.Fatal(err)
		}
		maskers = append(maskers, m)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, m := range maskers {
			rule := &m.rules[0]
			got, _ := m.maskString(s)
			if want := rule.replaceAll(s); got != want {
				t.Fatalf("%s on %q: windowed %q, whole text %q", rule.name, s, got, want)
			}
		}
	})
}
