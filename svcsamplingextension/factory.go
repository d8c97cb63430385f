package svcsamplingextension

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/extension"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/svcsamplingextension/internal/metadata"
)

// NewFactory returns the factory of the svcsampling extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, createExtension, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	// An outcome section takes the default waits and bounds for the keys it leaves out.
	return &Config{SampleRate: 1, Outcome: configoptional.Default(sampling.DefaultOutcomeConfig())}
}

func createExtension(_ context.Context, _ extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newSamplingExtension(cfg.(*Config))
}
