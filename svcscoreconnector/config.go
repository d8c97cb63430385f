package svcscoreconnector

import (
	"fmt"

	"go.opentelemetry.io/collector/component"

	"github.com/svc/svc-collector/pkg/masking"
	"github.com/svc/svc-collector/pkg/sampling"
)

// Config of the svcscore connector.
type Config struct {
	// SampleRate is the TraceIdRatioBased rate the traces were sampled with (the svcspanfilter
	// processor's sample_rate, or the SDK's): the scores of a sampled-out trace are dropped with
	// it. Scores without a trace id (run-level) and the scores of experiment traces (once a span
	// marks its trace, see README.md) are always kept.
	SampleRate float64 `mapstructure:"sample_rate"`

	// Sampling names the svcsampling extension whose decision the connector takes: its
	// sample_rate and its memory of experiment traces, shared with the span filter and the other
	// connectors that name it. Then sample_rate is not set here.
	Sampling *component.ID `mapstructure:"sampling"`

	// Masking masks each score record's comment, string value and metadata with pkg/masking,
	// the engine svcmetadata masks spans with; give both the same settings (the distribution's
	// config shares one YAML anchor). Off when it names no rule, key or size limit.
	Masking masking.Config `mapstructure:"masking"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{SampleRate: 1, Masking: masking.DefaultConfig()}
}

// Validate checks the configuration when the collector loads it.
func (c *Config) Validate() error {
	if c.Sampling != nil && c.SampleRate != 1 {
		return fmt.Errorf("sample_rate is the sampling extension's (%s): set it there, not here", c.Sampling)
	}
	return sampling.ValidateRate(c.SampleRate)
}
