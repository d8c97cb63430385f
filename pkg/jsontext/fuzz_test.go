package jsontext

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzEncodeString: every string encodes to valid JSON that decodes back to it, byte for byte
// what encoding/json writes.
func FuzzEncodeString(f *testing.F) {
	f.Add("prod")
	f.Add("\"\\\n\x00\u2028é😀")
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString(nil, s)
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
