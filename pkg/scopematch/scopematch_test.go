package scopematch

import "testing"

// One table for every rule and every user of the matcher (the span filter's known scopes and
// rules, the content join's scopes).
func TestMatch(t *testing.T) {
	m := &Matcher{}
	m.Add("openinference", Boundary)
	m.Add("ai", Exact)
	m.Add("@arizeai/openinference-instrumentation-", Prefix)
	m.Add("opentelemetry.instrumentation.openai_v2", Boundary)
	m.Add("@opentelemetry/instrumentation-openai", Boundary)
	m.Add("io.opentelemetry.openai-java-1.1", Boundary)
	m.Add("twice", Exact)
	m.Add("twice", Boundary) // the wider rule wins, whatever the order
	m.Add("twice2", Boundary)
	m.Add("twice2", Exact)

	tests := []struct {
		scope string
		want  bool
	}{
		{"openinference", true},
		{"openinference.instrumentation.openai", true},
		{"openinference_custom", false},
		{"openinferencex.y", false},
		{"my.openinference", false},
		{"ai", true},
		{"ai.sub", false},
		{"aiohttp", false},
		{"@arizeai/openinference-instrumentation-openai", true},
		{"@arizeai/openinference-instrumentation-langchain", true},
		{"@arizeai/openinference-core", false},
		{"opentelemetry.instrumentation.openai_v2", true},
		{"opentelemetry.instrumentation.openai_v2.chat", true},
		{"opentelemetry.instrumentation.openai", false},
		{"@opentelemetry/instrumentation-openai", true},
		{"@opentelemetry/instrumentation-openai-x", false},
		{"io.opentelemetry.openai-java-1.1", true},
		{"io.opentelemetry", false},
		{"twice.sub", true},
		{"twice2.sub", true},
		{"", false},
	}
	for _, tt := range tests {
		if got := m.Match(tt.scope); got != tt.want {
			t.Errorf("Match(%q) = %v, want %v", tt.scope, got, tt.want)
		}
	}
	var zero *Matcher
	if zero.Match("ai") || (&Matcher{}).Match("ai") {
		t.Error("a nil or zero Matcher matches nothing")
	}
	if New(Boundary).Match("x") || !New(Boundary, "a.b").Match("a.b.c") {
		t.Error("New builds a matcher of its names")
	}
}

func BenchmarkMatch(b *testing.B) {
	m := New(Boundary, "openinference", "langsmith", "opentelemetry.instrumentation.openai")
	m.Add("@arizeai/openinference-instrumentation-", Prefix)
	for b.Loop() {
		m.Match("opentelemetry.instrumentation.openai.v1")
		m.Match("@opentelemetry/instrumentation-http")
	}
}
