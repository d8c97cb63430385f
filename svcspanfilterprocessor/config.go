package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/svc/svc-collector/pkg/sampling"
)

const (
	defaultSampleRate       = 1.0
	defaultWaitDuration     = 5 * time.Second
	defaultRememberDuration = 30 * time.Second

	onShutdownRelease = "release" // trace_integrity.on_shutdown
	onShutdownKeep    = "keep"
)

// removedBlockedScopesKey is the Python SDK v4 option the SDKs removed (docs/contract.md §12): a
// config that still sets it fails loudly instead of keeping the spans the user meant to block.
const removedBlockedScopesKey = "blocked_instrumentation_scopes"

// Config of the svcspanfilter processor (README.md documents each option); `_` prevents unkeyed literals.
type Config struct {
	DefaultFilter  bool                 `mapstructure:"default_filter"`
	Keep           SpanRules            `mapstructure:"keep"`
	Drop           DropRules            `mapstructure:"drop"`
	SampleRate     float64              `mapstructure:"sample_rate"`
	Sampling       *component.ID        `mapstructure:"sampling"`
	TraceIntegrity TraceIntegrityConfig `mapstructure:"trace_integrity"`
	Storage        *component.ID        `mapstructure:"storage"`
	ContentJoin    ContentJoinConfig    `mapstructure:"content_join"`
	_              struct{}
}

// SpanRules name spans to keep beside the default filter, or to drop whatever else matches them.
type SpanRules struct {
	// InstrumentationScopes match a scope name that equals the entry or starts with the entry + ".".
	InstrumentationScopes []string `mapstructure:"instrumentation_scopes"`
	AttributePrefixes     []string `mapstructure:"attribute_prefixes"`
	SpanNames             []string `mapstructure:"span_names"`
	_                     struct{}
}

// DropRules are the span rules of drop, and its rules for one span name within one scope.
type DropRules struct {
	SpanRules      `mapstructure:",squash"`
	ScopeSpanNames []ScopeSpanName `mapstructure:"scope_span_names"`
	_              struct{}
}

// ScopeSpanName drops one span name in one scope, e.g. `raw_gen_ai_request` of `litellm`.
type ScopeSpanName struct {
	InstrumentationScope string `mapstructure:"instrumentation_scope"`
	SpanName             string `mapstructure:"span_name"`
	_                    struct{}
}

// TraceIntegrityConfig bounds the memory and the wait that keep every trace one connected tree.
type TraceIntegrityConfig struct {
	// WaitDuration: a kept span whose parent is unknown is held until its trace is idle this long;
	// then it goes on with its parent id unchanged (rule 1: no root while an ancestor may be kept).
	WaitDuration     time.Duration `mapstructure:"wait_duration"`
	MaxWaitDuration  time.Duration `mapstructure:"max_wait_duration"`
	RememberDuration time.Duration `mapstructure:"remember_duration"`
	LateParentWindow time.Duration `mapstructure:"late_parent_window"`
	ConnectorSpans   bool          `mapstructure:"connector_spans"`
	MemoryLimitMiB   int           `mapstructure:"memory_limit_mib"`
	MaxTraces        int           `mapstructure:"max_traces"`
	OnShutdown       string        `mapstructure:"on_shutdown"`
	_                struct{}
}

// ContentJoinConfig rules the join of GenAI content sent as log records (gen_ai.*.message, ...).
type ContentJoinConfig struct {
	Enabled               bool          `mapstructure:"enabled"`
	Wait                  time.Duration `mapstructure:"wait"`
	InstrumentationScopes []string      `mapstructure:"instrumentation_scopes"`
	_                     struct{}
}

var _ confmap.Unmarshaler = (*Config)(nil)

// createDefaultConfig is sized for 10k spans/s and agent runs of 10 minutes (README, "Memory sizing").
func createDefaultConfig() component.Config {
	return &Config{
		DefaultFilter: true,
		SampleRate:    defaultSampleRate,
		TraceIntegrity: TraceIntegrityConfig{
			WaitDuration:     defaultWaitDuration,
			MaxWaitDuration:  time.Minute,
			RememberDuration: defaultRememberDuration,
			LateParentWindow: 15 * time.Minute,
			ConnectorSpans:   true,
			OnShutdown:       onShutdownRelease,
			MemoryLimitMiB:   256,
			MaxTraces:        200_000,
		},
		// Applications export spans and logs a few seconds apart.
		ContentJoin: ContentJoinConfig{Enabled: true, Wait: 5 * time.Second},
	}
}

// Unmarshal rejects the removed SDK option with the rule that replaces it, then decodes strictly.
func (cfg *Config) Unmarshal(conf *confmap.Conf) error {
	if !conf.IsSet(removedBlockedScopesKey) {
		return conf.Unmarshal(cfg)
	}
	example := "[<scope>, ...]"
	if list, ok := conf.Get(removedBlockedScopesKey).([]any); ok && len(list) > 0 {
		names := make([]string, 0, len(list))
		for _, v := range list {
			names = append(names, fmt.Sprint(v))
		}
		example = "[" + strings.Join(names, ", ") + "]"
	}
	return fmt.Errorf("%q was removed (the svc SDKs replaced it with should_export_span combined with "+
		"is_default_export_span); write the same thing as a drop rule: `drop: {instrumentation_scopes: %s}` "+
		"(a drop rule matches the scope name and its sub-scopes name + \".\", and wins over the default filter)",
		removedBlockedScopesKey, example)
}

// Validate checks every rule so that a mistyped one fails at load instead of matching nothing or everything.
func (cfg *Config) Validate() error {
	ps := problems{sampling.ValidateRate(cfg.SampleRate)} // errors.Join skips the nil ones
	ps.check(cfg.Sampling == nil || cfg.SampleRate == defaultSampleRate,
		"sample_rate is the sampling extension's (%s): set it there, not here", cfg.Sampling)
	keep, drop := cfg.Keep, cfg.Drop
	keepRules := len(keep.InstrumentationScopes) + len(keep.AttributePrefixes) + len(keep.SpanNames)
	ps.check(cfg.DefaultFilter || keepRules > 0,
		"default_filter is false and there is no keep rule: every span would be dropped")
	ps.entries("keep.instrumentation_scopes", keep.InstrumentationScopes, scopeProblem)
	ps.entries("keep.attribute_prefixes", keep.AttributePrefixes, prefixProblem)
	ps.entries("keep.span_names", keep.SpanNames, spanNameProblem)
	ps.entries("drop.instrumentation_scopes", drop.InstrumentationScopes, scopeProblem)
	ps.entries("drop.attribute_prefixes", drop.AttributePrefixes, prefixProblem)
	ps.entries("drop.span_names", drop.SpanNames, spanNameProblem)
	for i, pair := range drop.ScopeSpanNames {
		msg := scopeProblem(pair.InstrumentationScope)
		ps.check(msg == "", "drop.scope_span_names[%d].instrumentation_scope: %s", i, msg)
		msg = spanNameProblem(pair.SpanName)
		ps.check(msg == "", "drop.scope_span_names[%d].span_name: %s", i, msg)
	}
	ti := cfg.TraceIntegrity
	ps.check(ti.WaitDuration > 0, "trace_integrity.wait_duration must be positive, got %v", ti.WaitDuration)
	atLeast := func(name string, d time.Duration, minName string, minD time.Duration) {
		ps.check(d >= minD, "trace_integrity.%s (%v) must be at least %s (%v)", name, d, minName, minD)
	}
	atLeast("max_wait_duration", ti.MaxWaitDuration, "wait_duration", ti.WaitDuration)
	atLeast("remember_duration", ti.RememberDuration, "wait_duration", ti.WaitDuration)
	atLeast("late_parent_window", ti.LateParentWindow, "remember_duration", ti.RememberDuration)
	ps.check(ti.MemoryLimitMiB >= 1,
		"trace_integrity.memory_limit_mib must be at least 1, got %d", ti.MemoryLimitMiB)
	ps.check(ti.OnShutdown == onShutdownRelease || ti.OnShutdown == onShutdownKeep,
		"trace_integrity.on_shutdown must be %q or %q, got %q", onShutdownRelease, onShutdownKeep, ti.OnShutdown)
	ps.check(ti.MaxTraces >= 1, "trace_integrity.max_traces must be at least 1, got %d", ti.MaxTraces)
	ps.check(ti.OnShutdown != onShutdownKeep || cfg.Storage != nil,
		"trace_integrity.on_shutdown: keep needs the storage option: without it held spans cannot "+
			"outlive the process")
	ps.check(cfg.Storage == nil || cfg.Storage.Type().String() != "",
		"storage: name a storage extension, e.g. `storage: file_storage/queue`")
	// The content wait is also capped by the trace memory's own limits (trace_integrity), which win.
	cj := cfg.ContentJoin
	ps.check(!cj.Enabled || cj.Wait > 0, "content_join.wait must be positive, got %v", cj.Wait)
	ps.entries("content_join.instrumentation_scopes", cj.InstrumentationScopes, scopeProblem)
	return errors.Join(ps...)
}

// problems are all the errors of one validation; check adds one when ok is false.
type problems []error

func (ps *problems) check(ok bool, format string, args ...any) {
	if !ok {
		*ps = append(*ps, fmt.Errorf(format, args...))
	}
}

// entries checks every entry of the list field; problem says what is wrong with one ("" if nothing).
func (ps *problems) entries(field string, list []string, problem func(string) string) {
	for i, entry := range list {
		msg := problem(entry)
		ps.check(msg == "", "%s[%d]: %s", field, i, msg)
	}
}

// scopeProblem rejects entries that could never match with boundary-aware matching.
func scopeProblem(scope string) string {
	switch {
	case scope == "":
		return "an instrumentation scope must not be empty"
	case strings.TrimSpace(scope) != scope:
		return fmt.Sprintf("instrumentation scope %q has surrounding spaces", scope)
	case strings.HasSuffix(scope, "."):
		return fmt.Sprintf("instrumentation scope %q must not end with \".\" (it matches the scope and "+
			"its sub-scopes: write %q)", scope, strings.TrimRight(scope, "."))
	}
	return ""
}

func prefixProblem(prefix string) string {
	switch {
	case prefix == "":
		return "an attribute prefix must not be empty (it would match every span with an attribute)"
	case strings.TrimSpace(prefix) != prefix:
		return fmt.Sprintf("attribute prefix %q has surrounding spaces", prefix)
	}
	return ""
}

func spanNameProblem(name string) string {
	if name == "" {
		return "a span name must not be empty"
	}
	return ""
}
