package masking

import (
	"encoding/json"
	"regexp"
	"sync"
	"testing"

	"github.com/svc/svc-collector/pkg/jsontext"
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

// fuzzKeysConfig is fuzzConfig with masked keys.
func fuzzKeysConfig() Config {
	cfg := fuzzConfig
	cfg.Keys = []string{"password", "api_key"}
	cfg.KeyReplacement = DefaultReplacement
	return cfg
}

// FuzzText: masking free text never fails, keeps JSON documents valid JSON, and is idempotent
// (masked text is masked already).
func FuzzText(f *testing.F) {
	f.Add(`mail jane@example.com`)
	f.Add(`[{"role":"user","content":"card 4111 1111 1111 1111","password":"x"}]`)
	f.Add(`{"messages":[{"role":"user","content":"mail jane@example.com"}],"n":4111111111111111}`)
	f.Add(`["sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", {"password": {"x": 1}}, "a\"b\\c\u00e9"]`)
	e, err := New(fuzzKeysConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxFuzzLen {
			return
		}
		out, res := e.Text(s)
		if res == Unchanged && out != s {
			t.Fatalf("unchanged result differs: %q -> %q", s, out)
		}
		if res != Failed && looksLikeJSONDocument(s) && json.Valid([]byte(s)) && !json.Valid([]byte(out)) {
			t.Fatalf("valid JSON %q masked to invalid JSON %q", s, out)
		}
		again, res2 := e.Text(out)
		if res2 != Unchanged || again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, again)
		}
	})
}

// FuzzJSON: masking an encoded metadata value always gives valid JSON (the masked value, the
// key replacement or the placeholder) and is idempotent.
func FuzzJSON(f *testing.F) {
	f.Add("user", `{"email":"a@b.io","n":4111111111111111}`)
	f.Add("password", `"x"`)
	f.Add("raw", `not json`)
	e, err := New(fuzzKeysConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, key, text string) {
		if len(text) > maxFuzzLen {
			return
		}
		out, res := e.JSON(key, text)
		if !json.Valid([]byte(out)) {
			t.Fatalf("%q: %q masked to invalid JSON %q", key, text, out)
		}
		if res == Unchanged && out != text {
			t.Fatalf("unchanged result differs: %q -> %q", text, out)
		}
		if !json.Valid([]byte(text)) && res != Failed && !e.IsMaskedKey(key) && out == text {
			t.Fatalf("invalid JSON %q passed unmasked", text)
		}
		again, res2 := e.JSON(key, out)
		if res2 != Unchanged || again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", text, out, again)
		}
	})
}

// FuzzTextPrefilter: Text skips decoding JSON in which jsonMayChange finds nothing a rule could
// match; it must give exactly what decoding gives, for every builtin alone, all of them, and
// with user rules and masked keys. The input is tried as it is, as a JSON string, and inside
// a JSON object and array.
func FuzzTextPrefilter(f *testing.F) {
	addSeeds(f)
	for _, s := range []string{
		`["bearer\nabcdefghij"]`, `"a\u0040example.com"`, `{"x":"4111 1111 1111 1111"}`,
		`[{"role":"user","content":"Where is my order A-10023?\nbearer\tAbcdefgh12"}]`,
		`{"n":4111111111111111,"t":true,"s":"+44 20 7946 0958"}`, `"\/\/bearer \/abcdefgh"`,
	} {
		f.Add(s)
	}
	configs := []Config{fuzzConfig, fuzzKeysConfig(), {BuiltinRules: BuiltinRuleNames()}}
	for _, name := range BuiltinRuleNames() {
		configs = append(configs, Config{BuiltinRules: []string{name}})
	}
	engines := make([]*Engine, len(configs))
	for i, cfg := range configs {
		var err error
		if engines[i], err = New(cfg); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxFuzzLen {
			return
		}
		quoted := string(jsontext.AppendString(nil, s))
		for _, text := range []string{s, quoted, `{"k":[` + quoted + `,1]}`, "[" + s + "]"} {
			for i, e := range engines {
				got, gotRes := e.text(text, true)
				want, wantRes := e.text(text, false)
				if got != want || gotRes != wantRes {
					t.Fatalf("config %d: %q: with prefilter %q %v, decoded %q %v", i, text, got, gotRes, want, wantRes)
				}
			}
		}
	})
}
