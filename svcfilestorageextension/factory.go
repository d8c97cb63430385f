package svcfilestorageextension

import (
	"context"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/svc/svc-collector/svcfilestorageextension/internal/metadata"
)

// NewFactory returns the factory of `svc_file_storage`: contrib's file_storage (its configuration
// and files) under a type of its own, so that contrib's can be in the same build, whose extensions
// lock their directory at start, publish the storage's metrics, and can keep large values out of
// bbolt (large_value_files).
func NewFactory() extension.Factory {
	contrib := filestorage.NewFactory()
	return extension.NewFactory(
		metadata.Type,
		func() component.Config {
			return createDefaultConfig(contrib.CreateDefaultConfig().(*filestorage.Config))
		},
		func(ctx context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
			c := cfg.(*Config)
			// contrib's factory creates only its own type; the ID names nothing on disk.
			contribSet := set
			contribSet.ID = component.NewIDWithName(contrib.Type(), set.ID.Name())
			inner, err := contrib.Create(ctx, contribSet, &c.Config)
			if err != nil {
				return nil, err
			}
			tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
			if err != nil {
				return nil, err
			}
			if err := registerVolumeGauges(tb, c.Directory); err != nil {
				tb.Shutdown()
				return nil, err
			}
			return &exclusiveStorage{Extension: inner.(storage.Extension), cfg: c, logger: set.Logger, tb: tb}, nil
		},
		metadata.ExtensionStability,
	)
}
