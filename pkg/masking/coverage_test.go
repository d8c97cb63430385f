package masking

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/golden"
)

// The personal data in the coverage inputs (testdata/coverage/*.input.json, one file per
// instrumentation, with its real attribute and event shapes).
var coveragePII = []string{
	"jane.doe@example.com", "4111 1111 1111 1111", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
	"+44 20 7946 0958", "DE89 3704 0044 0532 0130 00", "abcdefgh12345678",
}

// TestCoverage: with every builtin rule on, Engine.Span leaves no personal data in any
// instrumentation's span (attributes, JSON inside them, events, links, status), keeps the text
// around it, and keeps JSON attributes valid JSON. Expected outputs are golden files.
func TestCoverage(t *testing.T) {
	e := mustEngine(t, Config{BuiltinRules: BuiltinRuleNames(), KeyReplacement: DefaultReplacement})
	inputs, err := filepath.Glob("testdata/coverage/*.input.json")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no coverage inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.json")
		t.Run(name, func(t *testing.T) {
			td := golden.ReadTraces(t, in)
			before := ptrace.NewTraces()
			td.CopyTo(before)
			forEachSpan(td, func(s ptrace.Span) { e.Span(s, nil, nil) })
			golden.CheckTraces(t, strings.Replace(in, ".input.", ".expected.", 1), td)

			raw, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
			if err != nil {
				t.Fatal(err)
			}
			for _, pii := range coveragePII {
				if strings.Contains(string(raw), pii) {
					t.Errorf("%q still in the output", pii)
				}
			}
			for _, kept := range []string{"Please refund card", "to file the refund for"} {
				if strings.Contains(mustJSON(t, before), kept) && !strings.Contains(string(raw), kept) {
					t.Errorf("text around the personal data lost: %q", kept)
				}
			}
			// A string that was JSON is still JSON.
			var spansBefore []ptrace.Span
			forEachSpan(before, func(s ptrace.Span) { spansBefore = append(spansBefore, s) })
			i := 0
			forEachSpan(td, func(s ptrace.Span) {
				for k, v := range spansBefore[i].Attributes().All() {
					if v.Type() == pcommon.ValueTypeStr && json.Valid([]byte(v.Str())) {
						after, _ := s.Attributes().Get(k)
						if !json.Valid([]byte(after.Str())) {
							t.Errorf("%s was JSON, is now %q", k, after.Str())
						}
					}
				}
				i++
			})
		})
	}
}

func forEachSpan(td ptrace.Traces, fn func(ptrace.Span)) {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				fn(s)
			}
		}
	}
}

func mustJSON(t *testing.T, td ptrace.Traces) string {
	raw, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
