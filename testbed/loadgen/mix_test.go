package loadgen

import (
	"testing"
)

// A mixed workload takes every instrumentation shape and keeps the trace structure: the same
// GenAI spans per trace as the single-shape workload, ids found in every template.
func TestMixedWorkload(t *testing.T) {
	plain, err := NewWorkload(WorkloadOptions{Seed: 3, Templates: 12, IOMinBytes: 256, IOMaxBytes: 512})
	if err != nil {
		t.Fatal(err)
	}
	mixed, err := NewWorkload(WorkloadOptions{Seed: 3, Templates: 12, IOMinBytes: 256, IOMaxBytes: 512, Mix: true})
	if err != nil {
		t.Fatal(err)
	}
	if p, m := plain.Shape(), mixed.Shape(); p.GenAISpansPerTrace != m.GenAISpansPerTrace || p.SpansPerTrace != m.SpansPerTrace {
		t.Errorf("mixed %+v, single shape %+v", m, p)
	}
	seen := map[string]bool{}
	for i := range 200 { // sequence numbers map to templates at random
		r := mixed.NewRequest(uint64(i), 1, 1<<20, 1<<30)
		for _, scope := range []string{"ai", "svc-sdk", "openinference.instrumentation.openai", "opentelemetry.instrumentation.openai.v1", "opentelemetry.instrumentation.openai_v2"} {
			if containsScope(r.Body, scope) {
				seen[scope] = true
			}
		}
	}
	if len(seen) != 5 {
		t.Errorf("scopes of the shapes in the pool: %v, want all 5 besides the default", seen)
	}
}

func containsScope(body []byte, scope string) bool {
	// An InstrumentationScope's name is field 1 (0x0a) followed by its length.
	needle := append([]byte{0x0a, byte(len(scope))}, scope...)
	for i := 0; i+len(needle) <= len(body); i++ {
		if string(body[i:i+len(needle)]) == string(needle) {
			return true
		}
	}
	return false
}
