package svcsamplingextension

import (
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/svc/svc-collector/svcsamplingextension/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id      component.ID
		want    float64
		wantErr string
	}{
		{id: component.NewID(metadata.Type), want: 1},
		{id: component.NewIDWithName(metadata.Type, "half"), want: 0.5},
		{id: component.NewIDWithName(metadata.Type, "zero"), wantErr: "sample_rate must be greater than 0 and at most 1, got 0"},
		{id: component.NewIDWithName(metadata.Type, "above_one"), wantErr: "sample_rate must be greater than 0 and at most 1, got 1.5"},
		{id: component.NewIDWithName(metadata.Type, "unknown_key"), wantErr: "invalid keys: rate"},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			sub, err := cm.Sub(tt.id.String())
			if err != nil {
				t.Fatal(err)
			}
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			err = sub.Unmarshal(cfg)
			if err == nil {
				err = confmap.Validate(cfg)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.SampleRate != tt.want {
				t.Fatalf("sample_rate = %v, want %v", cfg.SampleRate, tt.want)
			}
		})
	}
}
