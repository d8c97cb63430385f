package masking

import (
	"strings"
	"testing"
)

// BenchmarkMask compares, on the same text in the same run, the engine with every builtin rule
// on, Go regexp applying the same rules to the whole text (the reference), and a plain memory
// scan (strings.IndexByte of an absent byte) as the floor.
func BenchmarkMask(b *testing.B) {
	const size = 64 << 10
	texts := []struct{ name, text string }{
		{"clean-prose", repeatTo(cleanProse, size)},
		{"pii-dense", repeatTo(cleanProse[:200]+piiLine, size)},
		{"json-messages", `[{"role":"user","content":"` + strings.ReplaceAll(repeatTo(cleanProse, size), `"`, `'`) + `"}]`},
	}
	cfg := Config{BuiltinRules: []string{"email", "card_number", "api_key", "bearer_token", "phone", "iban"}}
	e, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range texts {
		b.Run(tc.name+"/engine", func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			b.ReportAllocs()
			for b.Loop() {
				e.Text(tc.text)
			}
		})
		b.Run(tc.name+"/regexp", func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			b.ReportAllocs()
			for b.Loop() {
				referenceMask(cfg, tc.text)
			}
		})
		b.Run(tc.name+"/memscan", func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			for b.Loop() {
				strings.IndexByte(tc.text, 0)
			}
		})
	}
}

// BenchmarkRule shows each builtin rule's cost alone on clean prose.
func BenchmarkRule(b *testing.B) {
	text := repeatTo(cleanProse, 64<<10)
	for _, name := range BuiltinRuleNames() {
		e, _ := New(Config{BuiltinRules: []string{name}})
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				e.String(text)
			}
		})
	}
}
