// Package scopematch matches instrumentation scope names against a list of known scopes. It is the
// one scope matcher of the gateway: the span filter's known scopes and keep/drop rules, and the
// content join's list of scopes that send content as log records, all match through it.
package scopematch // import "github.com/svc/svc-collector/pkg/scopematch"

import "strings"

// Rule says how an entry matches a scope name.
type Rule uint8

const (
	// Boundary matches a scope equal to the entry or starting with the entry followed by ".":
	// `openinference` matches `openinference.instrumentation.openai`, not `openinference_x`.
	Boundary Rule = iota
	// Exact matches only a scope equal to the entry (`ai`, the Vercel AI SDK, would otherwise match
	// far too much).
	Exact
	// Prefix matches every scope that starts with the entry. For families whose names end in a
	// free-form part without a "." boundary, such as `@arizeai/openinference-instrumentation-`
	// followed by the instrumented library.
	Prefix
)

// Matcher answers scope matches with one map lookup per "." of the scope name plus one string
// comparison per Prefix entry, so the cost does not grow with the number of Boundary and Exact
// entries. The zero value matches nothing; a Matcher is safe for concurrent reads once built.
type Matcher struct {
	entries  map[string]Rule
	prefixes []string
}

// New returns a Matcher of names, each matched by rule.
func New(rule Rule, names ...string) *Matcher {
	m := &Matcher{}
	for _, n := range names {
		m.Add(n, rule)
	}
	return m
}

// Add adds an entry. An entry added twice keeps the wider rule (Prefix over Boundary over Exact).
func (m *Matcher) Add(name string, rule Rule) {
	if name == "" {
		return
	}
	if rule == Prefix {
		for _, p := range m.prefixes {
			if p == name {
				return
			}
		}
		m.prefixes = append(m.prefixes, name)
		return
	}
	if m.entries == nil {
		m.entries = map[string]Rule{}
	}
	if prev, ok := m.entries[name]; ok && prev == Boundary {
		rule = Boundary
	}
	m.entries[name] = rule
}

// Match reports whether scope matches an entry.
func (m *Matcher) Match(scope string) bool {
	if m == nil || scope == "" {
		return false
	}
	for _, p := range m.prefixes {
		if strings.HasPrefix(scope, p) {
			return true
		}
	}
	if len(m.entries) == 0 {
		return false
	}
	if _, ok := m.entries[scope]; ok {
		return true
	}
	for i := 0; i < len(scope); i++ {
		if scope[i] != '.' {
			continue
		}
		if rule, ok := m.entries[scope[:i]]; ok && rule == Boundary {
			return true
		}
	}
	return false
}
