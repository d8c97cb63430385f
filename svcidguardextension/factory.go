package svcidguardextension // import "github.com/svc/svc-collector/svcidguardextension"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/svc/svc-collector/svcidguardextension/internal/metadata"
)

// NewFactory returns the factory of the svcidguard extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, func() component.Config { return createDefaultConfig() }, create, metadata.ExtensionStability)
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newGuard(cfg.(*Config), set.TelemetrySettings)
}
