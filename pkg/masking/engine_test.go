package masking

import (
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/scorerecord"
)

func mustEngine(t *testing.T, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestNewIsNilWhenOff(t *testing.T) {
	e, err := New(DefaultConfig())
	if err != nil || e != nil {
		t.Fatalf("New(default) = %v, %v; want nil, nil", e, err)
	}
	if got, r := e.Text("jane@example.com"); got != "jane@example.com" || r != Unchanged {
		t.Fatalf("nil engine changed text: %q %v", got, r)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown builtin", Config{BuiltinRules: []string{"ssn"}}, `masking.builtin_rules: unknown rule "ssn" (known: api_key, bearer_token, card_number, email, iban, phone)`},
		{"empty pattern", Config{Rules: []Rule{{Name: "x"}}}, "masking.rules[0] x: pattern must not be empty"},
		{"bad pattern", Config{Rules: []Rule{{Pattern: "("}}}, "masking.rules[0] : invalid pattern"},
		{"empty key", Config{Keys: []string{""}}, "masking.keys[0]: key must not be empty"},
		{"bad skip", Config{SkipAttributes: []string{"*"}}, `masking.skip_attributes[0]: "*" names no attribute`},
		{"negative size", Config{MaxValueBytes: -1}, "masking.max_value_bytes: -1 is negative"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	if err := (Config{BuiltinRules: BuiltinRuleNames(), MaxValueBytes: 10}).Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

func TestUserRules(t *testing.T) {
	e := mustEngine(t, Config{
		BuiltinRules: []string{"email"},
		Rules: []Rule{
			{Name: "ticket", Pattern: `TICKET-([0-9]+)`, Replacement: "TICKET-#"},
			{Name: "name", Pattern: `(?i)\bjohn smith\b`},
			{Name: "emailed", Pattern: `\[EMAIL\] \(([a-z]+)\)`, Replacement: "[EMAIL:$1]"},
		},
	})
	for _, tc := range []struct{ in, want string }{
		{"see TICKET-1234 and TICKET-99", "see TICKET-# and TICKET-#"},
		{"John Smith wrote", "*** wrote"},
		{"ask jane@example.com (work)", "ask [EMAIL:work]"}, // later rules see earlier results
		{"nothing here", "nothing here"},
	} {
		if got, _ := e.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestText(t *testing.T) {
	e := mustEngine(t, Config{BuiltinRules: BuiltinRuleNames(), Keys: []string{"password"}, KeyReplacement: "***"})
	for _, tc := range []struct {
		name, in, want string
		res            Result
	}{
		{"plain", "mail jane@example.com now", "mail [EMAIL] now", Masked},
		{"clean", "nothing personal", "nothing personal", Unchanged},
		{"json messages", `[{"role":"user","content":"mail jane@example.com"}]`, `[{"role":"user","content":"mail [EMAIL]"}]`, Masked},
		{"json layout kept", "{\n  \"a\": \"jane@example.com\",\n  \"b\": 1\n}", "{\n  \"a\": \"[EMAIL]\",\n  \"b\": 1\n}", Masked},
		{"json key masked whole", `{"user":{"password":{"x":[1,2]}},"ok":true}`, `{"user":{"password":"***"},"ok":true}`, Masked},
		{"json number card", `{"card":4111111111111111}`, `{"card":"[CARD]"}`, Masked},
		{"json escapes", `"mail jane\u0040example.com"`, `"mail [EMAIL]"`, Masked},
		{"broken json masked as text", `{"a": "jane@example.com"`, `{"a": "[EMAIL]"`, Masked},
		{"too deep", strings.Repeat("[", 200) + strings.Repeat("]", 200), Placeholder, Failed},
		{"brackets, not JSON", strings.Repeat("[", 200) + " mail jane@example.com", strings.Repeat("[", 200) + " mail [EMAIL]", Masked},
	} {
		got, res := e.Text(tc.in)
		if got != tc.want || res != tc.res {
			t.Errorf("%s: Text(%q) = %q, %v; want %q, %v", tc.name, tc.in, got, res, tc.want, tc.res)
		}
		if json.Valid([]byte(tc.in)) && !json.Valid([]byte(got)) && res != Failed {
			t.Errorf("%s: JSON in, invalid JSON out: %q", tc.name, got)
		}
	}
}

func TestJSON(t *testing.T) {
	e := mustEngine(t, Config{BuiltinRules: []string{"email"}, Keys: []string{"Token"}, KeyReplacement: "***", MaxValueBytes: 64})
	for _, tc := range []struct {
		name, key, in, want string
		res                 Result
	}{
		{"string", "contact", `"jane@example.com"`, `"[EMAIL]"`, Masked},
		{"object", "user", `{"mail":"jane@example.com","age":40}`, `{"mail":"[EMAIL]","age":40}`, Masked},
		{"masked key", "token", `{"a":1}`, `"***"`, Masked},
		{"masked key already", "token", `"***"`, `"***"`, Unchanged},
		{"not json", "x", `jane@example.com`, `"` + Placeholder + `"`, Failed},
		{"placeholder stays", "x", `"` + Placeholder + `"`, `"` + Placeholder + `"`, Unchanged},
		{"clean", "env", `"prod"`, `"prod"`, Unchanged},
		{"oversized", "blob", `"` + strings.Repeat("A", 100) + `"`, `"[svc: value removed, 102 B]"`, Oversized},
	} {
		got, res := e.JSON(tc.key, tc.in)
		if got != tc.want || res != tc.res {
			t.Errorf("%s: JSON(%q, %q) = %q, %v; want %q, %v", tc.name, tc.key, tc.in, got, res, tc.want, tc.res)
		}
	}
}

func TestSizeMarker(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{512, "[svc: value removed, 512 B]"},
		{2048, "[svc: value removed, 2.0 KiB]"},
		{1468006, "[svc: value removed, 1.4 MiB]"},
		{3 << 30, "[svc: value removed, 3.0 GiB]"},
	} {
		if got := SizeMarker(tc.n); got != tc.want {
			t.Errorf("SizeMarker(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestValue(t *testing.T) {
	e := mustEngine(t, Config{BuiltinRules: BuiltinRuleNames(), Keys: []string{"password"}, KeyReplacement: "***", MaxValueBytes: 1024})
	v := pcommon.NewValueMap()
	m := v.Map()
	m.PutStr("text", "mail jane@example.com")
	m.PutStr("json", `{"content":"card 4111 1111 1111 1111"}`)
	m.PutInt("card", 4111111111111111)
	m.PutInt("count", 42)
	m.PutDouble("ratio", 2.5)
	m.PutBool("flag", true)
	m.PutStr("password", "hunter2")
	m.PutStr("image", "data:image/png;base64,"+strings.Repeat("iVBORw0K", 200))
	s := m.PutEmptySlice("list")
	s.AppendEmpty().SetStr("key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z")
	s.AppendEmpty().SetEmptyMap().PutStr("PASSWORD", "x")
	s.AppendEmpty().SetEmptyBytes().FromRaw([]byte("jane@example.com"))

	if res := e.Value(v); res != Oversized {
		t.Errorf("Value result = %v, want Oversized (the largest change)", res)
	}
	want := map[string]any{
		"text":     "mail [EMAIL]",
		"json":     `{"content":"card [CARD]"}`,
		"card":     "[CARD]",
		"count":    int64(42),
		"ratio":    2.5,
		"flag":     true,
		"password": "***",
		"image":    "[svc: value removed, 1.6 KiB]",
		"list":     []any{"key [API_KEY]", map[string]any{"PASSWORD": "***"}, "[EMAIL]"},
	}
	got := v.Map().AsRaw()
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("Value:\n got %s\nwant %s", gotJSON, wantJSON)
	}
	// Masking again changes nothing.
	if res := e.Value(v); res != Unchanged {
		t.Errorf("second Value = %v, want Unchanged", res)
	}
}

func TestValueTooDeep(t *testing.T) {
	e := mustEngine(t, Config{BuiltinRules: []string{"email"}})
	v := pcommon.NewValueSlice()
	s := v.Slice()
	for range 200 {
		s = s.AppendEmpty().SetEmptySlice()
	}
	if res := e.Value(v); res != Failed || v.Str() != Placeholder {
		t.Fatalf("Value(deep) = %v, %q; want Failed and the placeholder", res, v.AsString())
	}
}

func TestAttributes(t *testing.T) {
	e := mustEngine(t, Config{
		BuiltinRules:   BuiltinRuleNames(),
		Keys:           []string{"password"},
		KeyReplacement: "***",
		SkipAttributes: []string{"app.raw.*", "app.id"},
	})
	m := pcommon.NewMap()
	m.PutStr("gen_ai.prompt.0.content", "mail jane@example.com")
	m.PutStr("gen_ai.request.model", "jane@example.com") // structural: skipped
	m.PutStr("app.raw.body", "jane@example.com")         // user skip list
	m.PutStr("app.id", "jane@example.com")
	m.PutStr("svc.trace.metadata.user", "jane@example.com") // skipped by the caller
	m.PutStr("langsmith.metadata.password", "hunter2")
	m.PutStr("exception.message", "invalid card 4111111111111111")
	var st Stats
	res := e.Attributes(m, func(name string) bool { return strings.HasPrefix(name, "svc.trace.metadata.") }, &st)
	if st != (Stats{Masked: 3}) {
		t.Errorf("stats = %+v, want 3 masked", st)
	}
	if res != Masked {
		t.Errorf("Attributes = %v, want Masked", res)
	}
	want := map[string]any{
		"gen_ai.prompt.0.content":     "mail [EMAIL]",
		"gen_ai.request.model":        "jane@example.com",
		"app.raw.body":                "jane@example.com",
		"app.id":                      "jane@example.com",
		"svc.trace.metadata.user":     "jane@example.com",
		"langsmith.metadata.password": "***",
		"exception.message":           "invalid card [CARD]",
	}
	for k, w := range want {
		if v, _ := m.Get(k); v.AsRaw() != w {
			t.Errorf("%s = %v, want %v", k, v.AsRaw(), w)
		}
	}
}

// TestScanIsLinear: adversarial repetitions of anchors finish (each window is read once).
func TestScanIsLinear(t *testing.T) {
	e := mustEngine(t, Config{BuiltinRules: BuiltinRuleNames()})
	for _, unit := range []string{"bearer", "aBearer x", "Bearer \t", "sk-", "-_AJ", "DE89 ", "+1 ", "@a.", "4111 "} {
		s := strings.Repeat(unit, 200_000/len(unit))
		e.String(s) // a quadratic scan would take minutes here
	}
}

func TestScore(t *testing.T) {
	e := mustEngine(t, Config{BuiltinRules: BuiltinRuleNames(), Keys: []string{"password"}, KeyReplacement: "***"})
	input := pcommon.NewValueStr("reply to jane@example.com") // the producer's event attribute
	s := scorerecord.Score{
		Name:     "helpfulness",
		Value:    input,
		Comment:  "The answer repeats the user's card 4111 1111 1111 1111; otherwise helpful.",
		Metadata: pcommon.NewMap(),
	}
	s.Metadata.PutStr("evaluator", "gpt-4o judge")
	s.Metadata.PutStr("reviewer", "jane@example.com")
	s.Metadata.PutStr("password", "hunter2")
	if res := e.Score(&s, nil); res != Masked {
		t.Fatalf("Score = %v, want Masked", res)
	}
	if s.Comment != "The answer repeats the user's card [CARD]; otherwise helpful." || s.Value.Str() != "reply to [EMAIL]" || s.Name != "helpfulness" {
		t.Errorf("score = %+v", s)
	}
	if input.Str() != "reply to jane@example.com" {
		t.Errorf("the producer's value was changed: %q", input.Str())
	}
	want := map[string]any{"evaluator": "gpt-4o judge", "reviewer": "[EMAIL]", "password": "***"}
	for k, w := range want {
		if v, _ := s.Metadata.Get(k); v.AsRaw() != w {
			t.Errorf("metadata %s = %v, want %v", k, v.AsRaw(), w)
		}
	}
	// A categorical value without personal data is left as it is; numbers are not touched.
	cat := scorerecord.Score{Value: pcommon.NewValueStr("positive")}
	num := scorerecord.Score{Value: pcommon.NewValueDouble(0.75)}
	if e.Score(&cat, nil) != Unchanged || e.Score(&num, nil) != Unchanged || cat.Value.Str() != "positive" {
		t.Errorf("clean score changed")
	}
}
