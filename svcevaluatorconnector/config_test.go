package svcevaluatorconnector

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/svc/svc-collector/svcevaluatorconnector/internal/metadata"
)

var samplingID = component.MustNewID("svcsampling")

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	five := 5.0
	tests := []struct {
		name    string
		want    *Config
		wantErr string // a substring of the load or validation error; empty: valid
	}{
		{name: "", want: &Config{SampleRate: 1}},
		{name: "full", want: &Config{SampleRate: 0.5, Evaluators: []EvaluatorConfig{
			{
				Name:   "slow_generation",
				Filter: `[{"type":"string","column":"type","operator":"=","value":"GENERATION"}]`,
				Check:  CheckConfig{Latency: &Threshold{Above: &five}},
				Score:  ScoreConfig{Comment: "{{name}} took {{measure}} s ({{threshold}})"},
			},
			{Name: "latency_seconds", Check: CheckConfig{Latency: &Threshold{}}, Score: ScoreConfig{DataType: "numeric", Target: "trace"}},
			{Name: "refusal", Check: CheckConfig{OutputMatches: "(?i)I can(no|')t help"}, Score: ScoreConfig{Name: "refused", OnlyWhenTrue: true}},
		}}},
		{name: "no_check", wantErr: "evaluators[0] (empty): check: no check configured: set one of latency, error, json_output"},
		{name: "two_checks", wantErr: "evaluators[0] (both): check: one check per evaluator, got error, json_output"},
		{name: "bad_filter", wantErr: `evaluators[0] (gen): filter[0]: operator "~" is not a string operator`},
		{name: "bad_regexp", wantErr: "evaluators[0] (refusal): check: output_matches: error parsing regexp"},
		{name: "no_name", wantErr: "evaluators[0]: name is required"},
		{name: "duplicate_name", wantErr: "evaluators[1] (e): name is used by an earlier evaluator"},
		{name: "numeric_predicate", wantErr: "score.data_type NUMERIC needs a check with a measure (latency, output_length, tokens, cost, ottl_value); error is a yes/no check"},
		{name: "numeric_threshold", wantErr: "check.tokens: a NUMERIC score is the measure itself"},
		{name: "boolean_no_threshold", wantErr: "check.cost: a BOOLEAN score needs above or below"},
		{name: "categorical", wantErr: `score.data_type must be BOOLEAN or NUMERIC, got "CATEGORICAL"`},
		{name: "bad_target", wantErr: `score.target must be "observation" or "trace", got "session"`},
		{name: "bad_comment", wantErr: "score.comment: unknown placeholder {{output}}"},
		{name: "zero_rate", wantErr: "sample_rate must be greater than 0 and at most 1, got 0"},
		{name: "shared_sampling", want: &Config{SampleRate: 1, Sampling: &samplingID}},
		{name: "shared_sampling_and_rate", wantErr: "sample_rate is the sampling extension's (svcsampling): set it there, not here"},
		{name: "unknown_check", wantErr: "toxicity"},
		{name: "ottl", want: &Config{SampleRate: 1, Evaluators: []EvaluatorConfig{
			{Name: "tool_retry", Check: CheckConfig{OTTLCondition: `span.attributes["retry.count"] > 0 and span.name != "healthcheck"`}},
			{Name: "output_tokens_x2", Check: CheckConfig{OTTLValue: `span.attributes["gen_ai.usage.output_tokens"] * 2`}},
		}}},
		{name: "ottl_bad_condition", wantErr: "evaluators[0] (e): check: ottl_condition: "},
		{name: "ottl_bad_function", wantErr: `evaluators[0] (e): check: ottl_condition: `},
		{name: "json_schema", want: &Config{SampleRate: 1, Evaluators: []EvaluatorConfig{{Name: "plan_contract", Check: CheckConfig{
			JSONOutput: true, JSONSchema: `{"type":"object","required":["plan"],"properties":{"plan":{"type":"array","items":{"type":"string"}}}}`,
		}}}}},
		{name: "json_schema_alone", wantErr: "evaluators[0] (e): check: json_schema applies to json_output: set json_output: true"},
		{name: "json_schema_bad", wantErr: "evaluators[0] (e): check: json_schema: "},
		{name: "ottl_value_boolean", wantErr: "check.ottl_value makes a NUMERIC score; for a BOOLEAN one write an ottl_condition"},
	}
	for _, tt := range tests {
		id := component.NewIDWithName(metadata.Type, tt.name)
		t.Run(id.String(), func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(id.String())
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
