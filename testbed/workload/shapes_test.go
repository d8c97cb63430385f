package workload

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

// Every shape carries the call's prompt, answer and metadata where its instrumentation writes
// them, and names itself by a scope the GenAI span filter keeps.
func TestShapesCarryTheCall(t *testing.T) {
	call := LLMCall{Model: "gpt-4o", Provider: "openai", System: "Be brief.", Prompt: "Where is order A-1?",
		Answer: "It shipped.", InputTokens: 10, OutputTokens: 5,
		Metadata: []attribute.KeyValue{attribute.String("tier", "gold"), attribute.Int("retries", 2)}}
	want := map[string]struct{ prompt, answer, metadata string }{
		ShapeGenAISemconv:  {"gen_ai.input.messages", "gen_ai.output.messages", ""},
		ShapeGenAIEvents:   {"event gen_ai.content.prompt", "event gen_ai.content.completion", ""},
		ShapeOpenLLMetry:   {"gen_ai.prompt.1.content", "gen_ai.completion.0.content", "traceloop.association.properties.tier"},
		ShapeOpenInference: {"input.value", "output.value", "metadata"},
		ShapeVercelAI:      {"ai.prompt.messages", "ai.response.text", "ai.telemetry.metadata.tier"},
		ShapeSVCSDK:        {"svc.observation.input", "svc.observation.output", "svc.observation.metadata.tier"},
	}
	if len(Shapes) != len(want) {
		t.Fatalf("%d shapes, want %d", len(Shapes), len(want))
	}
	for _, s := range Shapes {
		t.Run(s.Name, func(t *testing.T) {
			w, ok := want[s.Name]
			if !ok {
				t.Fatalf("unexpected shape %q", s.Name)
			}
			where := map[string]string{}
			for _, kv := range s.Attributes(call) {
				where[string(kv.Key)] = kv.Value.String()
			}
			for _, e := range s.Events(call) {
				for _, kv := range e.Attrs {
					where["event "+e.Name] += kv.Value.String()
				}
			}
			for _, c := range []struct{ key, text string }{{w.prompt, call.Prompt}, {w.answer, call.Answer}, {w.metadata, "gold"}} {
				if c.key != "" && !strings.Contains(where[c.key], c.text) {
					t.Errorf("%s = %q, want it to hold %q", c.key, where[c.key], c.text)
				}
			}
			if s.Scope == "" || s.ScopeVersion == "" {
				t.Errorf("scope %q version %q", s.Scope, s.ScopeVersion)
			}
		})
	}
	if got := jsonValue(attribute.Int("n", 2).Value); got != "2" {
		t.Errorf("jsonValue(int 2) = %s", got)
	}
	if got := jsonValue(attribute.String("s", `a"b`).Value); got != `"a\"b"` {
		t.Errorf("jsonValue(string) = %s", got)
	}
}
