package svcsamplingextension

import (
	"go.opentelemetry.io/collector/component"

	"github.com/svc/svc-collector/pkg/sampling"
)

// samplingExtension is one Decider: one rate and one memory of experiment traces, with one
// lifetime (sampling.DefaultExperimentTracesTTL after a trace's last span or score), for all the
// components that reference the extension; and, with an outcome section, one Outcome (its rules
// and its memory of kept sessions) on the same rate.
type samplingExtension struct {
	component.StartFunc
	component.ShutdownFunc
	decider *sampling.Decider
	outcome *sampling.Outcome
}

var (
	_ sampling.Provider        = (*samplingExtension)(nil)
	_ sampling.OutcomeProvider = (*samplingExtension)(nil)
)

func newSamplingExtension(cfg *Config) (*samplingExtension, error) {
	ratio := sampling.NewRatio(cfg.SampleRate)
	e := &samplingExtension{decider: sampling.NewDecider(ratio,
		sampling.NewExperimentTraces(sampling.DefaultExperimentTracesMax, sampling.DefaultExperimentTracesTTL))}
	if cfg.Outcome.HasValue() {
		o, err := sampling.NewOutcome(*cfg.Outcome.Get(), ratio)
		if err != nil {
			return nil, err
		}
		e.outcome = o
	}
	return e, nil
}

// Decider is the shared decision.
func (e *samplingExtension) Decider() *sampling.Decider { return e.decider }

// Outcome is the shared outcome sampling; nil without an outcome section.
func (e *samplingExtension) Outcome() *sampling.Outcome { return e.outcome }
