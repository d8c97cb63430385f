package svcscoreconnector

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/svc/svc-collector/pkg/masking"
	"github.com/svc/svc-collector/svcscoreconnector/internal/metadata"
)

var samplingID = component.MustNewID("svcsampling")

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	tests := []struct {
		id      component.ID
		want    *Config
		wantErr string // a substring of the load or validation error; empty: valid
	}{
		{id: component.NewID(metadata.Type), want: &Config{SampleRate: 1, Masking: masking.DefaultConfig()}},
		{id: component.NewIDWithName(metadata.Type, "sampled"), want: &Config{SampleRate: 0.25, Masking: masking.DefaultConfig()}},
		{id: component.NewIDWithName(metadata.Type, "keep_all"), want: &Config{SampleRate: 1, Masking: masking.DefaultConfig()}},
		{id: component.NewIDWithName(metadata.Type, "masking"), want: &Config{SampleRate: 1, Masking: masking.Config{
			BuiltinRules:   []string{"email", "card_number"},
			Keys:           []string{"password"},
			KeyReplacement: "***",
			MaxValueBytes:  4096,
		}}},
		{id: component.NewIDWithName(metadata.Type, "unknown_rule"), wantErr: `masking.builtin_rules: unknown rule "ssn"`},
		{id: component.NewIDWithName(metadata.Type, "zero_rate"), wantErr: "sample_rate must be greater than 0 and at most 1, got 0"},
		{id: component.NewIDWithName(metadata.Type, "negative_rate"), wantErr: "sample_rate must be greater than 0 and at most 1, got -0.5"},
		{id: component.NewIDWithName(metadata.Type, "above_one"), wantErr: "sample_rate must be greater than 0 and at most 1, got 1.5"},
		{id: component.NewIDWithName(metadata.Type, "not_a_number"), wantErr: "sample_rate"},
		{id: component.NewIDWithName(metadata.Type, "unknown_key"), wantErr: "sample_ratio"},
		{id: component.NewIDWithName(metadata.Type, "shared_sampling"), want: &Config{SampleRate: 1, Sampling: &samplingID, Masking: masking.DefaultConfig()}},
		{id: component.NewIDWithName(metadata.Type, "shared_sampling_and_rate"), wantErr: "sample_rate is the sampling extension's (svcsampling): set it there, not here"},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			err = sub.Unmarshal(cfg)
			if err == nil {
				err = confmap.Validate(cfg)
			}
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
		})
	}
}

func TestDefaultConfigKeepsEveryScore(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	assert.Equal(t, 1.0, cfg.SampleRate)
	assert.NoError(t, confmap.Validate(cfg))
}
