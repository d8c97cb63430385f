package svcfilestorageextension

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/svc/svc-collector/svcfilestorageextension/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		id              component.ID
		largeValueFiles bool
		fsync           bool
		unmarshalErr    string
		validateErr     string
	}{
		{id: component.NewID(metadata.Type)}, // off by default: contrib's files
		{id: component.NewIDWithName(metadata.Type, "value_files"), largeValueFiles: true, fsync: true},
		{id: component.NewIDWithName(metadata.Type, "value_files_off")},
		{id: component.NewIDWithName(metadata.Type, "bad_contrib_key"), validateErr: "max size cannot be less than 0"},
		{id: component.NewIDWithName(metadata.Type, "typo"), unmarshalErr: "large_value_file"},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			err = sub.Unmarshal(cfg)
			if tt.unmarshalErr != "" {
				require.ErrorContains(t, err, tt.unmarshalErr)
				return
			}
			require.NoError(t, err)
			err = confmap.Validate(cfg)
			if tt.validateErr != "" {
				require.ErrorContains(t, err, tt.validateErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.largeValueFiles, cfg.LargeValueFiles)
			assert.Equal(t, tt.fsync, cfg.FSync, "contrib's keys are read as contrib reads them")
			assert.Equal(t, "testdata", cfg.Directory)
		})
	}
}
