package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"

import (
	"github.com/svc/svc-collector/pkg/masking"
)

// Config is the configuration of the svcmetadata processor. Encoding, the propagated-metadata
// length limit and flattening are the platform's contract and always on; promotion, the trace
// input/output upgrade and masking are switchable.
type Config struct {
	// Promote moves metadata that popular instrumentations write under their own attribute names
	// into svc.observation.metadata.<key>.
	Promote PromoteConfig `mapstructure:"promote"`

	// UpgradeTraceIO moves svc.trace.input / svc.trace.output of a root span (older SDKs'
	// trace-level input and output) to svc.observation.input / svc.observation.output of that
	// span, where the platform now reads trace input and output from (docs/contract.md §12).
	UpgradeTraceIO bool `mapstructure:"upgrade_trace_io"`

	// Masking masks every attribute value of the span (except structural ones), event and link
	// attributes and the status message, and observation metadata as decoded values.
	Masking MaskingConfig `mapstructure:"masking"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// PromoteConfig switches each promotion source on or off.
type PromoteConfig struct {
	// OpenInference promotes OpenInference's `metadata` attribute (a JSON object string).
	OpenInference bool `mapstructure:"openinference"`
	// VercelAI promotes the Vercel AI SDK's `ai.telemetry.metadata.<key>` attributes.
	VercelAI bool `mapstructure:"vercel_ai"`
	// OpenLLMetry promotes OpenLLMetry's `traceloop.association.properties.<key>` attributes.
	OpenLLMetry bool `mapstructure:"openllmetry"`
}

// MaskingConfig is the masking configuration of pkg/masking (the one engine the gateway masks
// with, shared with the svcscore connector) and the deprecated extra_attributes.
type MaskingConfig struct {
	masking.Config `mapstructure:",squash"`

	// ExtraAttributes is deprecated and ignored: every attribute is masked now (except the
	// structural ones and masking.skip_attributes). Accepted so that existing configurations
	// keep working; the processor logs a warning when it is set.
	ExtraAttributes []string `mapstructure:"extra_attributes"`
}

// Validate leaves masking.Config to its own Validate (confmap calls it for the embedded field).
func (MaskingConfig) Validate() error { return nil }

func createDefaultConfig() *Config {
	return &Config{
		Promote: PromoteConfig{
			OpenInference: true,
			VercelAI:      true,
			OpenLLMetry:   true,
		},
		UpgradeTraceIO: true,
		Masking:        MaskingConfig{Config: masking.DefaultConfig()},
	}
}
