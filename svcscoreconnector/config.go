package svcscoreconnector

import (
	"github.com/svc/svc-collector/pkg/sampling"
)

// Config of the svcscore connector.
type Config struct {
	// SampleRate is the TraceIdRatioBased rate the traces were sampled with (the svcspanfilter
	// processor's sample_rate, or the SDK's): the scores of a sampled-out trace are dropped with
	// it. Scores without a trace id (run-level) and the scores of experiment traces (once a span
	// marks its trace, see README.md) are always kept.
	SampleRate float64 `mapstructure:"sample_rate"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{SampleRate: 1}
}

// Validate checks the configuration when the collector loads it.
func (c *Config) Validate() error {
	return sampling.ValidateRate(c.SampleRate)
}
