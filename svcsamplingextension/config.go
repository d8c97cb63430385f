package svcsamplingextension

import (
	"github.com/svc/svc-collector/pkg/sampling"
)

// Config is the sampling of the components that reference the extension.
type Config struct {
	// SampleRate is the OpenTelemetry TraceIdRatioBased rate: 0 < rate <= 1. Experiment traces
	// are always kept.
	SampleRate float64 `mapstructure:"sample_rate"`
}

// Validate checks the rate.
func (c *Config) Validate() error {
	return sampling.ValidateRate(c.SampleRate)
}
