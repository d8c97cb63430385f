package masking

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// referenceMask is the plain implementation of the rules: each rule's regular expression over
// the whole text, in order, with the rule's accept check. The engine must give exactly this.
func referenceMask(cfg Config, s string) string {
	for _, name := range cfg.BuiltinRules {
		b := builtinRules[name]
		re := referenceRegexp(b.pattern)
		if b.accept == nil {
			s = re.ReplaceAllString(s, b.replacement)
			continue
		}
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			if b.accept(m) {
				return b.replacement
			}
			return m
		})
	}
	for _, r := range cfg.Rules {
		repl := r.Replacement
		if repl == "" {
			repl = DefaultReplacement
		}
		s = referenceRegexp(r.Pattern).ReplaceAllString(s, repl)
	}
	return s
}

var referenceCache sync.Map // pattern -> *regexp.Regexp

func referenceRegexp(pattern string) *regexp.Regexp {
	if re, ok := referenceCache.Load(pattern); ok {
		return re.(*regexp.Regexp)
	}
	re := regexp.MustCompile(pattern)
	referenceCache.Store(pattern, re)
	return re
}

// maxFuzzLen bounds fuzz inputs: windows and anchors behave the same on short text, and the
// reference (Go regexp over the whole text) is slow on long inputs with many matches.
const maxFuzzLen = 512

// fuzzConfig switches on every builtin and two user rules, one with a literal prefix.
var fuzzConfig = Config{
	BuiltinRules: BuiltinRuleNames(),
	Rules: []Rule{
		{Name: "ticket", Pattern: `TICKET-[0-9]{4,}`, Replacement: "[TICKET]"},
		{Name: "ssn", Pattern: `\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b`, Replacement: "[SSN]"},
	},
}

func addSeeds(f *testing.F) {
	for _, tc := range builtinCases {
		for _, s := range append(append([]string{}, tc.positives...), tc.negatives...) {
			f.Add("x " + s + " y")
		}
	}
	f.Add(piiLine)
	f.Add(cleanProse)
	f.Add("a@b.co@c.de bearer bearer 12345678 +1 2 3 4 5 6 7 8 9 0 DE89370400440532013000TICKET-1234")
	f.Add("sk-sk-sk-Ab3dEf6hIj9kLm2nOp5qRs8tUv1 eyJa.eyJb.c AIzaAIza 4111-1111-1111-1111-1111")
}

// FuzzEngineEqualsReference: the fast scanner masks exactly what the plain rules mask.
func FuzzEngineEqualsReference(f *testing.F) {
	addSeeds(f)
	e, err := New(fuzzConfig)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxFuzzLen {
			return
		}
		got, _ := e.String(s)
		if want := referenceMask(fuzzConfig, s); got != want {
			t.Fatalf("engine and reference differ on %q:\nengine:    %q\nreference: %q", s, got, want)
		}
	})
}

// FuzzEachRuleEqualsReference: each builtin alone, so that a rule's result does not hide
// another's mistake.
func FuzzEachRuleEqualsReference(f *testing.F) {
	addSeeds(f)
	names := BuiltinRuleNames()
	engines := make([]*Engine, len(names))
	for i, name := range names {
		engines[i], _ = New(Config{BuiltinRules: []string{name}})
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxFuzzLen {
			return
		}
		for i, name := range names {
			got, _ := engines[i].String(s)
			if want := referenceMask(Config{BuiltinRules: []string{name}}, s); got != want {
				t.Fatalf("%s: engine and reference differ on %q:\nengine:    %q\nreference: %q", name, s, got, want)
			}
		}
	})
}

// FuzzTextKeepsJSONValid: masking JSON text gives valid JSON whose strings are masked as the
// rules mask them.
func FuzzTextKeepsJSONValid(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":"mail jane@example.com"}],"n":4111111111111111}`)
	f.Add(`["sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", {"password": {"x": 1}}, "a\"b\\c\u00e9"]`)
	cfg := fuzzConfig
	cfg.Keys = []string{"password"}
	e, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		if len(doc) > maxFuzzLen || !json.Valid([]byte(doc)) {
			return
		}
		out, res := e.Text(doc)
		if res == Failed {
			return // nested too deeply
		}
		if !json.Valid([]byte(out)) {
			t.Fatalf("masking %s gave invalid JSON %s", doc, out)
		}
		again, _ := e.Text(out)
		if strings.Count(again, "[") < strings.Count(out, "[") {
			t.Fatalf("second pass lost structure: %s -> %s", out, again)
		}
	})
}
