package svcsamplingextension

import (
	"errors"

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

// errOutcomeNotWired refuses an outcome section until a component applies it: accepted and
// ignored, it would sample the failing traces a user asked to keep at sample_rate, silently.
var errOutcomeNotWired = errors.New("outcome: not yet wired: no component applies outcome sampling yet " +
	"(the span filter's outcome sampling is in progress); remove the outcome section, sample_rate alone applies")

// Validate checks the rate (the outcome section's rules are checked by confmap through it).
func (c *Config) Validate() error {
	if err := sampling.ValidateRate(c.SampleRate); err != nil {
		return err
	}
	if c.Outcome.HasValue() {
		return errOutcomeNotWired
	}
	return nil
}
