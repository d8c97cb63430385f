package svcmetadataprocessor

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.yaml.in/yaml/v3"

	"github.com/svc/svc-collector/pkg/masking"
	"github.com/svc/svc-collector/svcmetadataprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	full := createDefaultConfig()
	full.Promote = PromoteConfig{OpenInference: true, VercelAI: false, OpenLLMetry: true}
	full.UpgradeTraceIO = false
	full.Masking = MaskingConfig{Config: masking.Config{
		BuiltinRules: []string{"email", "card_number", "api_key", "bearer_token", "phone", "iban"},
		Rules: []masking.Rule{
			{Name: "employee-id", Pattern: `EMP-\d{4}`, Replacement: "EMP-****"},
			{Pattern: `(?i)secret=\S+`},
		},
		Keys:           []string{"password", "ssn"},
		KeyReplacement: "[REDACTED]",
		SkipAttributes: []string{"app.request_id", "app.raw.*"},
		MaxValueBytes:  1048576,
	}}
	deprecated := createDefaultConfig()
	deprecated.Masking.BuiltinRules = []string{"email"}
	deprecated.Masking.ExtraAttributes = []string{"input.value"}

	tests := []struct {
		name      string
		want      *Config
		unmarshal string // part of the error when the YAML does not fit the struct
		validate  string // part of the error of Validate
	}{
		{name: "", want: createDefaultConfig()}, // svcmetadata with no settings
		{name: "full", want: full},
		{name: "unknown_key", unmarshal: "rulez"},
		{name: "deprecated_extra_attributes", want: deprecated},
		{name: "unknown_builtin", validate: `masking.builtin_rules: unknown rule "ssn" (known: api_key, bearer_token, card_number, email, iban, phone)`},
		{name: "bad_pattern", validate: "masking.rules[0] broken: invalid pattern"},
		{name: "empty_pattern", validate: "masking.rules[0] empty: pattern must not be empty"},
		{name: "empty_key", validate: "masking.keys[1]: key must not be empty"},
		{name: "skip_attribute_star", validate: `masking.skip_attributes[0]: "*" names no attribute`},
		{name: "negative_max_value_bytes", validate: "masking.max_value_bytes: -1 is negative"},
		{name: "limit_not_configurable", unmarshal: "trace_metadata_max_length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub, err := cm.Sub(component.NewIDWithName(metadata.Type, tt.name).String())
			require.NoError(t, err)
			cfg := NewFactory().CreateDefaultConfig()
			err = sub.Unmarshal(cfg)
			if tt.unmarshal != "" {
				require.ErrorContains(t, err, tt.unmarshal)
				return
			}
			require.NoError(t, err)
			err = confmap.Validate(cfg)
			if tt.validate != "" {
				require.ErrorContains(t, err, tt.validate)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
		})
	}
}

// The YAML examples of the README load and validate.
func TestReadmeExamplesLoad(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	require.Len(t, blocks, 2, "the minimal and the full example")
	for _, block := range blocks {
		var raw map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(block[1]), &raw))
		sub, err := confmap.NewFromStringMap(raw).Sub("processors::svcmetadata")
		require.NoError(t, err)
		cfg := NewFactory().CreateDefaultConfig()
		require.NoError(t, sub.Unmarshal(cfg), block[1])
		require.NoError(t, confmap.Validate(cfg), block[1])
		_, err = newMetadataProcessor(cfg.(*Config), componenttest.NewNopTelemetrySettings())
		require.NoError(t, err)
	}
}
