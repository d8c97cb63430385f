package svcsamplingextension

import (
	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/svc/svc-collector/pkg/sampling"
)

// Config is the sampling of the components that reference the extension.
type Config struct {
	// SampleRate is the OpenTelemetry TraceIdRatioBased rate: 0 < rate <= 1. Experiment traces
	// are always kept.
	SampleRate float64 `mapstructure:"sample_rate"`
	// Outcome is outcome sampling: keep whole the traces an outcome rule names, the others at
	// SampleRate. Absent: the head decision alone, as before.
	Outcome configoptional.Optional[sampling.OutcomeConfig] `mapstructure:"outcome"`
}

// Validate checks the rate (the outcome section's rules are checked by confmap through it; the
// span filter that applies them checks max_held_mib against its memory at Start).
func (c *Config) Validate() error {
	return sampling.ValidateRate(c.SampleRate)
}
