package svcspanfilterprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	full := createDefaultConfig().(*Config)
	full.Keep = SpanRules{
		InstrumentationScopes: []string{"my-company.agents"},
		AttributePrefixes:     []string{"llm.", "app.agent."},
		SpanNames:             []string{"checkout-assistant"},
	}
	full.Drop = DropRules{
		SpanRules: SpanRules{
			InstrumentationScopes: []string{"sqlalchemy"},
			AttributePrefixes:     []string{"internal.debug."},
			SpanNames:             []string{"health-check"},
		},
		ScopeSpanNames: []ScopeSpanName{{InstrumentationScope: "litellm", SpanName: "raw_gen_ai_request"}},
	}
	full.SampleRate = 0.25
	full.TraceIntegrity = TraceIntegrityConfig{
		WaitDuration: 10 * time.Second, MaxWaitDuration: 2 * time.Minute,
		RememberDuration: time.Minute, LateParentWindow: 20 * time.Minute, ConnectorSpans: false,
		MemoryLimitMiB: 512, MaxTraces: 50000, OnShutdown: onShutdownRelease,
	}
	full.ContentJoin = ContentJoinConfig{Enabled: true, Wait: 8 * time.Second, InstrumentationScopes: []string{"my-company.llm"}}

	joinOff := createDefaultConfig().(*Config)
	joinOff.ContentJoin.Enabled = false

	onlyKeep := createDefaultConfig().(*Config)
	onlyKeep.DefaultFilter = false
	onlyKeep.Keep.InstrumentationScopes = []string{"my-company.agents"}

	tests := []struct {
		name string
		want *Config
		// errContains are parts of the load or validation error; empty for a good config.
		errContains []string
	}{
		{name: "", want: createDefaultConfig().(*Config)},
		{name: "full", want: full},
		{name: "only_keep_rules", want: onlyKeep},
		{name: "content_join_off", want: joinOff},
		{name: "content_join_bad", errContains: []string{
			"content_join.wait must be positive, got 0s",
			`content_join.instrumentation_scopes[0]: instrumentation scope "opentelemetry.instrumentation." must not end with "."`,
		}},
		{name: "blocked_scopes", errContains: []string{
			`"blocked_instrumentation_scopes" was removed`,
			"drop: {instrumentation_scopes: [sqlalchemy, psycopg]}",
		}},
		{name: "blocked_scopes_with_space", errContains: []string{"drop: {instrumentation_scopes: [my scope, psycopg]}"}},
		{name: "unknown_key", errContains: []string{"span_name"}},
		{name: "rate_zero", errContains: []string{"sample_rate must be greater than 0 and at most 1, got 0"}},
		{name: "rate_above_one", errContains: []string{"got 1.5"}},
		{name: "keeps_nothing", errContains: []string{"default_filter is false and there is no keep rule"}},
		{name: "empty_attribute_prefix", errContains: []string{"keep.attribute_prefixes[0]: an attribute prefix must not be empty"}},
		{name: "scope_with_trailing_dot", errContains: []string{
			`drop.instrumentation_scopes[0]: instrumentation scope "opentelemetry.instrumentation." must not end with "."`,
		}},
		{name: "scope_span_name_without_span_name", errContains: []string{"drop.scope_span_names[0].span_name: a span name must not be empty"}},
		{name: "empty_span_name", errContains: []string{"keep.span_names[0]: a span name must not be empty"}},
		{name: "bad_integrity", errContains: []string{
			"trace_integrity.wait_duration must be positive",
			"trace_integrity.max_traces must be at least 1, got 0",
		}},
		{name: "wait_longer_than_memory", errContains: []string{
			"trace_integrity.remember_duration (30s) must be at least wait_duration (1m0s)",
		}},
		{name: "on_shutdown_keep_without_storage", errContains: []string{"trace_integrity.on_shutdown: keep needs the storage option"}},
		{name: "on_shutdown_unknown", errContains: []string{`trace_integrity.on_shutdown must be "release" or "keep", got "flush"`}},
		{name: "bad_memory", errContains: []string{
			"trace_integrity.memory_limit_mib must be at least 1, got 0",
			"trace_integrity.late_parent_window (10s) must be at least remember_duration (30s)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub, err := cm.Sub(component.NewIDWithName(metadata.Type, tt.name).String())
			require.NoError(t, err)
			cfg := createDefaultConfig()
			err = sub.Unmarshal(cfg)
			if err == nil {
				err = confmap.Validate(cfg)
			}
			if len(tt.errContains) == 0 {
				require.NoError(t, err)
				assert.Equal(t, tt.want, cfg)
				return
			}
			require.Error(t, err)
			for _, part := range tt.errContains {
				assert.ErrorContains(t, err, part)
			}
		})
	}
}
