package svcevaluatorconnector

import (
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/observation"
)

// The bounded count decides every threshold exactly as the full count does.
func TestBoundedOutputLengthDecidesAsTheFullCount(t *testing.T) {
	outputs := []string{"", "a", "héllo wörld", strings.Repeat("ab", 50), strings.Repeat("日本", 40), strings.Repeat("x", 4096)}
	for _, out := range outputs {
		span := ptrace.NewSpan()
		span.Attributes().PutStr("svc.observation.output", out)
		v := observation.NewView(span, pcommon.NewResource(), pcommon.NewInstrumentationScope())
		if out == "" {
			// No output: no score, either way.
			if _, ok := boundedOutputLength(5)(&v); ok {
				t.Error("empty output measured")
			}
			continue
		}
		full, _ := outputLength(&v)
		for _, above := range []float64{0, 1, 10, 11, 79, 80, 81, 100, 4095, 4096, 5000} {
			for _, cfg := range []EvaluatorConfig{
				{Name: "above", Check: CheckConfig{OutputLength: &Threshold{Above: f(above)}}},
				{Name: "below", Check: CheckConfig{OutputLength: &Threshold{Below: f(above)}}},
				{Name: "outside", Check: CheckConfig{OutputLength: &Threshold{Above: f(above), Below: f(above / 2)}}},
			} {
				ev, err := compileEvaluator(cfg)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := ev.evaluate(t.Context(), &v, spanRef{})
				want := (cfg.Check.OutputLength.Above != nil && full > *cfg.Check.OutputLength.Above) ||
					(cfg.Check.OutputLength.Below != nil && full < *cfg.Check.OutputLength.Below)
				if (got.value == 1) != want {
					t.Errorf("%s %v on %d characters: got %v, want %v", cfg.Name, above, int(full), got.value, want)
				}
			}
		}
	}
}

func TestMayStartJSONAgreesWithValid(t *testing.T) {
	for _, s := range []string{"", "  ", "{}", " [1]", "\n\"x\"", "true", "false", "null", "-1", "0", "7.5", "prose", "I can't", "<xml/>", "'single'", "\t{", "}"} {
		if json.Valid([]byte(s)) && !mayStartJSON(s) {
			t.Errorf("%q is valid JSON but mayStartJSON says no", s)
		}
	}
}
