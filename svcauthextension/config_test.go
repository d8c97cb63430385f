package svcauthextension

import (
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/svc/svc-collector/svcauthextension/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id      component.ID
		want    []string
		wantErr string
	}{
		{id: component.NewID(metadata.Type)},
		{id: component.NewIDWithName(metadata.Type, "known_teams"), want: []string{"pk-lf-team-a", "pk-lf-team-b"}},
		{id: component.NewIDWithName(metadata.Type, "secret_listed"), wantErr: "looks like a secret key"},
		{id: component.NewIDWithName(metadata.Type, "blank"), wantErr: "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			sub, err := cm.Sub(tt.id.String())
			if err != nil {
				t.Fatal(err)
			}
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			if err := sub.Unmarshal(cfg); err != nil {
				t.Fatal(err)
			}
			err = confmap.Validate(cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "sk-lf-oops") {
					t.Fatalf("Validate() quotes the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(cfg.AllowedPublicKeys, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("allowed_public_keys = %v, want %v", cfg.AllowedPublicKeys, tt.want)
			}
		})
	}
}
