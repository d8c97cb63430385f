package svcsamplingextension

import (
	"go.opentelemetry.io/collector/component"

	"github.com/svc/svc-collector/pkg/sampling"
)

// samplingExtension is one Decider: one rate and one memory of experiment traces, with one
// lifetime (sampling.DefaultExperimentTracesTTL after a trace's last span or score), for all the
// components that reference the extension.
type samplingExtension struct {
	component.StartFunc
	component.ShutdownFunc
	decider *sampling.Decider
}

var _ sampling.Provider = (*samplingExtension)(nil)

func newSamplingExtension(cfg *Config) *samplingExtension {
	return &samplingExtension{decider: sampling.NewDecider(sampling.NewRatio(cfg.SampleRate),
		sampling.NewExperimentTraces(sampling.DefaultExperimentTracesMax, sampling.DefaultExperimentTracesTTL))}
}

// Decider is the shared decision.
func (e *samplingExtension) Decider() *sampling.Decider { return e.decider }
