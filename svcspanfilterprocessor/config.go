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

// Defaults of the configuration, sized for a gateway at 10k spans/s with agent runs of up to 10
// minutes (README, "Memory sizing").
const (
	defaultSampleRate       = 1.0
	defaultWaitDuration     = 5 * time.Second
	defaultMaxWaitDuration  = time.Minute
	defaultRememberDuration = 30 * time.Second
	defaultLateParentWindow = 15 * time.Minute
	defaultMaxTraces        = 200_000
	defaultMemoryLimitMiB   = 256
)

// Values of trace_integrity.on_shutdown.
const (
	onShutdownRelease = "release"
	onShutdownKeep    = "keep"
)

// removedBlockedScopesKey is the option of the Python SDK v4 that the SDKs removed (docs/contract.md §12). A config that
// still sets it must fail loudly instead of silently keeping the spans the user meant to block.
const removedBlockedScopesKey = "blocked_instrumentation_scopes"

// Config of the svcspanfilter processor.
type Config struct {
	// DefaultFilter keeps the spans the svc SDKs' is_default_export_span keeps: scope `svc-sdk`, a
	// known LLM instrumentation scope, or any span attribute whose name starts with `gen_ai.`.
	DefaultFilter bool `mapstructure:"default_filter"`
	// Keep rules are OR-ed with the default filter (the SDKs' should_export_span).
	Keep KeepRules `mapstructure:"keep"`
	// Drop rules win over the default filter and the keep rules.
	Drop DropRules `mapstructure:"drop"`
	// SampleRate is the OpenTelemetry TraceIdRatioBased rate: 0 < rate <= 1. Experiment spans are
	// never sampled out.
	SampleRate float64 `mapstructure:"sample_rate"`
	// TraceIntegrity bounds the wait of kept spans whose parent has not been seen yet.
	TraceIntegrity TraceIntegrityConfig `mapstructure:"trace_integrity"`
	// Storage names a storage extension (file_storage/<name>) that keeps the held state across a
	// crash (see storage.go); nil keeps it in memory only.
	Storage *component.ID `mapstructure:"storage"`
	// ContentJoin attaches GenAI content sent as log records to its span (contentjoin_config.go).
	ContentJoin ContentJoinConfig `mapstructure:"content_join"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// KeepRules name spans to keep in addition to the default filter.
type KeepRules struct {
	// InstrumentationScopes match a scope name that equals the entry or starts with the entry + ".".
	InstrumentationScopes []string `mapstructure:"instrumentation_scopes"`
	// AttributePrefixes match a span whose attribute names include one starting with the entry.
	AttributePrefixes []string `mapstructure:"attribute_prefixes"`
	// SpanNames match a span whose name equals the entry.
	SpanNames []string `mapstructure:"span_names"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// DropRules name spans to drop whatever else matches them.
type DropRules struct {
	// InstrumentationScopes match a scope name that equals the entry or starts with the entry + ".".
	InstrumentationScopes []string `mapstructure:"instrumentation_scopes"`
	// AttributePrefixes match a span whose attribute names include one starting with the entry.
	AttributePrefixes []string `mapstructure:"attribute_prefixes"`
	// SpanNames match a span whose name equals the entry.
	SpanNames []string `mapstructure:"span_names"`
	// ScopeSpanNames match a span of a given scope (matched as InstrumentationScopes) with a given name,
	// e.g. scope `litellm`, span name `raw_gen_ai_request`.
	ScopeSpanNames []ScopeSpanName `mapstructure:"scope_span_names"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// ScopeSpanName is a drop rule for one span name within one instrumentation scope.
type ScopeSpanName struct {
	InstrumentationScope string `mapstructure:"instrumentation_scope"`
	SpanName             string `mapstructure:"span_name"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// TraceIntegrityConfig bounds the memory and the wait that keep every trace one connected tree.
type TraceIntegrityConfig struct {
	// WaitDuration: a kept span whose parent is unknown is held until its trace has received no span
	// for this long; then it goes on with its original parent id (rule 1: never made a root while
	// an ancestor may be kept), and that parent becomes an open parent of the trace.
	WaitDuration time.Duration `mapstructure:"wait_duration"`
	// MaxWaitDuration caps the wait of a span even while its trace keeps receiving spans.
	MaxWaitDuration time.Duration `mapstructure:"max_wait_duration"`
	// RememberDuration: the span ids (kept and dropped, with their parents) of a trace are
	// remembered this long after its last span, so that late children are resolved without waiting.
	RememberDuration time.Duration `mapstructure:"remember_duration"`
	// LateParentWindow: a trace with open parents remembers them, and the records of its dropped
	// spans, this long after its last span, so that a dropped parent ending that late is still
	// delivered as a connector span below its nearest kept ancestor.
	LateParentWindow time.Duration `mapstructure:"late_parent_window"`
	// ConnectorSpans: deliver a dropped span that delivered spans point at as a stripped connector
	// span (ids, name, kind, times, status code; marker attribute svc.gateway.connector).
	ConnectorSpans bool `mapstructure:"connector_spans"`
	// MemoryLimitMiB bounds the estimated memory of the trace memory: span records, held spans and
	// released spans the next consumer has not accepted yet.
	MemoryLimitMiB int `mapstructure:"memory_limit_mib"`
	// MaxTraces bounds the traces in memory. Over either bound, the traces idle the longest are
	// forgotten first; then the oldest waiting traces' held spans go on by rule 1.
	MaxTraces int `mapstructure:"max_traces"`
	// OnShutdown says what a graceful shutdown does with held spans: `release` delivers them by
	// rule 1 (nothing is left behind if this instance never starts again); `keep` leaves them in
	// the storage extension to wait for their parents again after the next start (needs `storage`;
	// for instances that restart on the same storage, e.g. a StatefulSet volume).
	OnShutdown string `mapstructure:"on_shutdown"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var (
	_ component.Config    = (*Config)(nil)
	_ confmap.Unmarshaler = (*Config)(nil)
)

func createDefaultConfig() component.Config {
	return &Config{
		DefaultFilter: true,
		SampleRate:    defaultSampleRate,
		TraceIntegrity: TraceIntegrityConfig{
			WaitDuration:     defaultWaitDuration,
			MaxWaitDuration:  defaultMaxWaitDuration,
			RememberDuration: defaultRememberDuration,
			LateParentWindow: defaultLateParentWindow,
			ConnectorSpans:   true,
			OnShutdown:       onShutdownRelease,
			MemoryLimitMiB:   defaultMemoryLimitMiB,
			MaxTraces:        defaultMaxTraces,
		},
		ContentJoin: defaultContentJoinConfig(),
	}
}

// Unmarshal rejects the removed SDK option with the rule that replaces it, then decodes the rest
// strictly (an unknown key fails naming the key).
func (cfg *Config) Unmarshal(conf *confmap.Conf) error {
	if conf.IsSet(removedBlockedScopesKey) {
		return blockedScopesError(conf.Get(removedBlockedScopesKey))
	}
	return conf.Unmarshal(cfg)
}

// blockedScopesError explains the removal and writes the user's own scopes into the new rule.
func blockedScopesError(value any) error {
	example := "[<scope>, ...]"
	if list, ok := value.([]any); ok && len(list) > 0 {
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
	var errs []error
	if err := sampling.ValidateRate(cfg.SampleRate); err != nil {
		errs = append(errs, err)
	}
	if !cfg.DefaultFilter && len(cfg.Keep.InstrumentationScopes) == 0 &&
		len(cfg.Keep.AttributePrefixes) == 0 && len(cfg.Keep.SpanNames) == 0 {
		errs = append(errs, errors.New("default_filter is false and there is no keep rule: every span would be dropped"))
	}
	errs = append(errs, validateScopes("keep.instrumentation_scopes", cfg.Keep.InstrumentationScopes)...)
	errs = append(errs, validatePrefixes("keep.attribute_prefixes", cfg.Keep.AttributePrefixes)...)
	errs = append(errs, validateNames("keep.span_names", cfg.Keep.SpanNames)...)
	errs = append(errs, validateScopes("drop.instrumentation_scopes", cfg.Drop.InstrumentationScopes)...)
	errs = append(errs, validatePrefixes("drop.attribute_prefixes", cfg.Drop.AttributePrefixes)...)
	errs = append(errs, validateNames("drop.span_names", cfg.Drop.SpanNames)...)
	for i, pair := range cfg.Drop.ScopeSpanNames {
		field := fmt.Sprintf("drop.scope_span_names[%d]", i)
		if err := validateScope(field+".instrumentation_scope", pair.InstrumentationScope); err != nil {
			errs = append(errs, err)
		}
		if err := validateName(field+".span_name", pair.SpanName); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, cfg.TraceIntegrity.validate()...)
	if cfg.TraceIntegrity.OnShutdown == onShutdownKeep && cfg.Storage == nil {
		errs = append(errs, errors.New("trace_integrity.on_shutdown: keep needs the storage option: without it held spans cannot outlive the process"))
	}
	if err := validateStorage(cfg.Storage); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, cfg.ContentJoin.validate()...)
	return errors.Join(errs...)
}

func (ti TraceIntegrityConfig) validate() []error {
	var errs []error
	if ti.WaitDuration <= 0 {
		errs = append(errs, fmt.Errorf("trace_integrity.wait_duration must be positive, got %v", ti.WaitDuration))
	}
	if ti.MaxWaitDuration < ti.WaitDuration {
		errs = append(errs, fmt.Errorf("trace_integrity.max_wait_duration (%v) must be at least wait_duration (%v)",
			ti.MaxWaitDuration, ti.WaitDuration))
	}
	if ti.RememberDuration < ti.WaitDuration {
		errs = append(errs, fmt.Errorf("trace_integrity.remember_duration (%v) must be at least wait_duration (%v)",
			ti.RememberDuration, ti.WaitDuration))
	}
	if ti.LateParentWindow < ti.RememberDuration {
		errs = append(errs, fmt.Errorf("trace_integrity.late_parent_window (%v) must be at least remember_duration (%v)",
			ti.LateParentWindow, ti.RememberDuration))
	}
	if ti.MemoryLimitMiB < 1 {
		errs = append(errs, fmt.Errorf("trace_integrity.memory_limit_mib must be at least 1, got %d", ti.MemoryLimitMiB))
	}
	if ti.OnShutdown != onShutdownRelease && ti.OnShutdown != onShutdownKeep {
		errs = append(errs, fmt.Errorf("trace_integrity.on_shutdown must be %q or %q, got %q", onShutdownRelease, onShutdownKeep, ti.OnShutdown))
	}
	if ti.MaxTraces < 1 {
		errs = append(errs, fmt.Errorf("trace_integrity.max_traces must be at least 1, got %d", ti.MaxTraces))
	}
	return errs
}

func validateScopes(field string, scopes []string) []error {
	var errs []error
	for i, s := range scopes {
		if err := validateScope(fmt.Sprintf("%s[%d]", field, i), s); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// validateScope rejects entries that could never match with boundary-aware matching.
func validateScope(field, scope string) error {
	switch {
	case scope == "":
		return fmt.Errorf("%s: an instrumentation scope must not be empty", field)
	case strings.TrimSpace(scope) != scope:
		return fmt.Errorf("%s: instrumentation scope %q has surrounding spaces", field, scope)
	case strings.HasSuffix(scope, "."):
		return fmt.Errorf("%s: instrumentation scope %q must not end with \".\" (it matches the scope and "+
			"its sub-scopes: write %q)", field, scope, strings.TrimRight(scope, "."))
	}
	return nil
}

func validatePrefixes(field string, prefixes []string) []error {
	var errs []error
	for i, p := range prefixes {
		name := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case p == "":
			errs = append(errs, fmt.Errorf("%s: an attribute prefix must not be empty (it would match every span with an attribute)", name))
		case strings.TrimSpace(p) != p:
			errs = append(errs, fmt.Errorf("%s: attribute prefix %q has surrounding spaces", name, p))
		}
	}
	return errs
}

func validateNames(field string, names []string) []error {
	var errs []error
	for i, n := range names {
		if err := validateName(fmt.Sprintf("%s[%d]", field, i), n); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func validateName(field, name string) error {
	if name == "" {
		return fmt.Errorf("%s: a span name must not be empty", field)
	}
	return nil
}
