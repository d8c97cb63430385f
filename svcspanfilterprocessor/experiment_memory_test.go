package svcspanfilterprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/sampling"
)

// A sampled-out experiment trace keeps its late spans for as long as the score connectors keep its
// scores: with the svcsampling extension, the filter asks the extension's memory of experiment
// traces, which outlives the trace memory's remember_duration (30 s idle).
func TestLateSpanOfExperimentTraceFollowsTheSharedMemory(t *testing.T) {
	out := pcommon.TraceID{0xcc, 8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff}
	for _, tc := range []struct {
		name       string
		shared     bool
		wantLateIn bool
	}{
		{name: "with the svcsampling extension", shared: true, wantLateIn: true},
		// Without the extension the trace memory alone remembers the mark, for remember_duration.
		{name: "trace memory alone", shared: false, wantLateIn: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.SampleRate = 0.01
			h := newHarness(t, cfg)
			if tc.shared {
				h.p.filter.experiments = sampling.NewDecider(sampling.NewRatio(0.01), sampling.NewExperimentTraces(1000, time.Hour))
			}
			h.consume(testSpan{name: "experiment item", scope: scopeSDK, trace: out, attrs: map[string]any{"svc.experiment.id": "e1"}})
			h.advance(defaultRememberDuration + 2*time.Second) // the trace memory forgets the idle trace
			h.consume(testSpan{name: "late llm", scope: scopeOpenAI, trace: out, parent: "experiment item", attrs: genAIAttrs})
			h.advance(defaultWaitDuration)

			delivered := h.delivered()
			assert.Contains(t, delivered, "experiment item")
			if tc.wantLateIn {
				assert.Contains(t, delivered, "late llm", "a late span of an experiment trace the connectors still keep must be kept")
			} else {
				assert.NotContains(t, delivered, "late llm")
			}
		})
	}
}
