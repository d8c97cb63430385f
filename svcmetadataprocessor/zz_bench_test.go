package svcmetadataprocessor

import (
	"strings"
	"testing"
)

func zzProse() string {
	var b strings.Builder
	b.WriteString("Sure. I have sent the summary to jane.doe@example.com using key sk-proj-abcdefghijklmnopqrstuvwx. ")
	for b.Len() < 4096 {
		b.WriteString("The first offer costs 12.99 per month and the second one 119 per year, which is cheaper. ")
	}
	return b.String()
}

func BenchmarkZZ(b *testing.B) {
	s := zzProse()
	for _, name := range []string{"email", "card_number", "api_key"} {
		m, _ := newMasker(MaskingConfig{BuiltinRules: []string{name}})
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				m.maskString(s)
			}
		})
	}
	m, _ := newMasker(MaskingConfig{BuiltinRules: []string{"email", "card_number", "api_key"}})
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			m.maskText(s)
		}
	})
	j := `[{"role":"user","content":"` + s + `"}]`
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			m.maskText(j)
		}
	})
	b.Run("jsonnomask", func(b *testing.B) {
		for b.Loop() {
			rewriteJSON(j, noopVisitor{})
		}
	})
}
