package svcfilestorageextension

import (
	"context"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// NewFactory returns the factory of `file_storage`: contrib's, with its type, configuration and
// stability, whose extensions lock their directory at start and can keep large values out of
// bbolt (large_value_files).
func NewFactory() extension.Factory {
	contrib := filestorage.NewFactory()
	return extension.NewFactory(
		contrib.Type(),
		func() component.Config {
			return createDefaultConfig(contrib.CreateDefaultConfig().(*filestorage.Config))
		},
		func(ctx context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
			c := cfg.(*Config)
			inner, err := contrib.Create(ctx, set, &c.Config)
			if err != nil {
				return nil, err
			}
			return &exclusiveStorage{Extension: inner.(storage.Extension), cfg: c, logger: set.Logger}, nil
		},
		contrib.Stability(),
	)
}
