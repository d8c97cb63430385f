package svcfilestorageextension

import (
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
)

// Config is contrib's file_storage configuration, keys unchanged, with one key of our own.
type Config struct {
	filestorage.Config `mapstructure:",squash"`

	// LargeValueFiles keeps each value of 16 KiB or more (an exporter queue's span batch, a large
	// held-span record) in append-only files beside the component's bbolt file, and only a small
	// pointer to it in bbolt (valuefiles.go). Experimental, off by default: the files are then
	// exactly contrib's. Values already in such files are read back whatever the setting, so
	// turning it off loses nothing; contrib's extension cannot read them (drain before leaving).
	LargeValueFiles bool `mapstructure:"large_value_files"`
}

// Validate checks contrib's keys as contrib does.
func (cfg *Config) Validate() error {
	return cfg.Config.Validate()
}

func createDefaultConfig(contrib *filestorage.Config) *Config {
	return &Config{Config: *contrib}
}
