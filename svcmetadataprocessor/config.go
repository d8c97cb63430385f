package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Config is the configuration of the svcmetadata processor. Encoding, the propagated-metadata
// length limit and flattening are the platform's contract and always on; promotion, the trace
// input/output upgrade and masking are switchable.
type Config struct {
	// Promote moves metadata that popular instrumentations write under their own attribute names
	// into svc.observation.metadata.<key>.
	Promote PromoteConfig `mapstructure:"promote"`

	// UpgradeTraceIO moves svc.trace.input / svc.trace.output of a root span (older SDKs'
	// trace-level input and output) to svc.observation.input / svc.observation.output of that
	// span, where the platform now reads trace input and output from (SPEC.md 4.5).
	UpgradeTraceIO bool `mapstructure:"upgrade_trace_io"`

	// Masking masks input, output, GenAI content and observation metadata values.
	Masking MaskingConfig `mapstructure:"masking"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// PromoteConfig switches each promotion source on or off.
type PromoteConfig struct {
	// OpenInference promotes OpenInference's `metadata` attribute (a JSON object string).
	OpenInference bool `mapstructure:"openinference"`
	// VercelAI promotes the Vercel AI SDK's `ai.telemetry.metadata.<key>` attributes.
	VercelAI bool `mapstructure:"vercel_ai"`
	// OpenLLMetry promotes OpenLLMetry's `traceloop.association.properties.<key>` attributes.
	OpenLLMetry bool `mapstructure:"openllmetry"`
}

// MaskingConfig lists the masking rules. Masking is off when it has no rules and no keys.
type MaskingConfig struct {
	// BuiltinRules switches on ready rules by name (see builtinRules: email, card_number, api_key).
	BuiltinRules []string `mapstructure:"builtin_rules"`
	// Rules are regular expressions (RE2 syntax) with their replacements, applied in order
	// after the builtin rules.
	Rules []MaskRule `mapstructure:"rules"`
	// Keys are metadata / object keys whose values are masked whole, at any depth
	// (compared case-insensitively).
	Keys []string `mapstructure:"keys"`
	// KeyReplacement replaces the value of a masked key. Default "***".
	KeyReplacement string `mapstructure:"key_replacement"`
	// ExtraAttributes are further span attributes masked like input and output, for content
	// that other instrumentations write under their own names (e.g. OpenInference's
	// input.value). An entry ending in "*" is a prefix.
	ExtraAttributes []string `mapstructure:"extra_attributes"`
}

// MaskRule is a regular expression and the text that replaces each of its matches.
type MaskRule struct {
	// Name identifies the rule in errors and logs; optional.
	Name string `mapstructure:"name"`
	// Pattern is an RE2 regular expression.
	Pattern string `mapstructure:"pattern"`
	// Replacement replaces each match; `$1`, `${name}` expand capture groups. Default "***".
	Replacement string `mapstructure:"replacement"`
}

const defaultReplacement = "***"

func createDefaultConfig() *Config {
	return &Config{
		Promote: PromoteConfig{
			OpenInference: true,
			VercelAI:      true,
			OpenLLMetry:   true,
		},
		UpgradeTraceIO: true,
		Masking: MaskingConfig{
			KeyReplacement: defaultReplacement,
		},
	}
}

// Validate checks that every builtin rule exists and every pattern compiles.
func (cfg *Config) Validate() error {
	var errs []error
	for _, name := range cfg.Masking.BuiltinRules {
		if _, ok := builtinRules[name]; !ok {
			errs = append(errs, fmt.Errorf("masking.builtin_rules: unknown rule %q (known: %s)", name, strings.Join(builtinRuleNames(), ", ")))
		}
	}
	for i, rule := range cfg.Masking.Rules {
		if rule.Pattern == "" {
			errs = append(errs, fmt.Errorf("masking.rules[%d] %s: pattern must not be empty", i, rule.Name))
			continue
		}
		if _, err := regexp.Compile(rule.Pattern); err != nil {
			errs = append(errs, fmt.Errorf("masking.rules[%d] %s: invalid pattern: %w", i, rule.Name, err))
		}
	}
	for i, key := range cfg.Masking.Keys {
		if key == "" {
			errs = append(errs, fmt.Errorf("masking.keys[%d]: key must not be empty", i))
		}
	}
	for i, name := range cfg.Masking.ExtraAttributes {
		if name == "" || name == "*" {
			errs = append(errs, fmt.Errorf("masking.extra_attributes[%d]: %q names no attribute", i, name))
		}
	}
	return errors.Join(errs...)
}

func builtinRuleNames() []string {
	names := make([]string, 0, len(builtinRules))
	for name := range builtinRules {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
