package svcsamplingextension

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/svc/svc-collector/pkg/sampling"
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
		{id: component.NewIDWithName(metadata.Type, "outcome"), want: 0.05},
		{id: component.NewIDWithName(metadata.Type, "outcome_bad_rule"), wantErr: `outcome: rules[0] "slow": kind latency needs latency_over`},
		{id: component.NewIDWithName(metadata.Type, "outcome_disabled"), want: 0.5},
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

// TestOutcomeSectionTakesDefaults: the keys an outcome section leaves out take the documented
// defaults; without the section there is no outcome sampling.
func TestOutcomeSectionTakesDefaults(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	load := func(name string) *Config {
		sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
		if err != nil {
			t.Fatal(err)
		}
		cfg := NewFactory().CreateDefaultConfig().(*Config)
		if err := sub.Unmarshal(cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := load("outcome")
	if !cfg.Outcome.HasValue() {
		t.Fatal("the outcome section was not read")
	}
	got := *cfg.Outcome.Get()
	want := sampling.DefaultOutcomeConfig()
	want.DecidePer = sampling.DecidePerSession
	want.SessionKeepDuration = 2 * time.Hour
	want.Rules = got.Rules
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("outcome = %+v, want %+v", got, want)
	}
	if n := len(got.Rules); n != 4 || got.Rules[1].ScoreName != "correctness" || got.Rules[1].Boolean == nil || *got.Rules[1].Boolean {
		t.Fatalf("rules = %+v", got.Rules)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("the section itself is valid: %v", err)
	}
	if load("half").Outcome.HasValue() || load("outcome_disabled").Outcome.HasValue() {
		t.Fatal("a config without an outcome section (or with enabled: false) has outcome sampling")
	}
}
