package svcauthextension // import "github.com/svc/svc-collector/svcauthextension"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/svc/svc-collector/svcauthextension/internal/metadata"
)

// NewFactory returns the factory of the svcauth extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config { return &Config{} }

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newAuthenticator(cfg.(*Config), set.Logger), nil
}
