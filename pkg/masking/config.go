package masking // import "github.com/svc/svc-collector/pkg/masking"

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Config is the masking configuration, the `masking` section of the components that mask.
// Masking is off when it has no rules, no keys and no size limit.
type Config struct {
	// BuiltinRules switches on ready rules by name: email, card_number, api_key, bearer_token,
	// phone, iban.
	BuiltinRules []string `mapstructure:"builtin_rules"`
	// Rules are regular expressions (RE2 syntax) with their replacements, applied in order
	// after the builtin rules.
	Rules []Rule `mapstructure:"rules"`
	// Keys are metadata / object / attribute keys whose values are masked whole, at any depth
	// (compared case-insensitively).
	Keys []string `mapstructure:"keys"`
	// KeyReplacement replaces the value of a masked key. Default "***".
	KeyReplacement string `mapstructure:"key_replacement"`
	// SkipAttributes are attribute names whose values are not masked, in addition to the
	// builtin structural names (see StructuralAttributes). An entry ending in "*" is a prefix.
	SkipAttributes []string `mapstructure:"skip_attributes"`
	// MaxValueBytes replaces a string value longer than this many bytes by a marker that
	// states its size (e.g. "[svc: value removed, 1.4 MiB]"). 0 switches the limit off.
	MaxValueBytes int `mapstructure:"max_value_bytes"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Rule is a regular expression and the text that replaces each of its matches.
type Rule struct {
	// Name identifies the rule in errors and logs; optional.
	Name string `mapstructure:"name"`
	// Pattern is an RE2 regular expression.
	Pattern string `mapstructure:"pattern"`
	// Replacement replaces each match; `$1`, `${name}` expand capture groups. Default "***".
	Replacement string `mapstructure:"replacement"`
}

// DefaultReplacement replaces matches of user rules and values of masked keys by default.
const DefaultReplacement = "***"

// DefaultConfig is masking switched off, with the default key replacement.
func DefaultConfig() Config {
	return Config{KeyReplacement: DefaultReplacement}
}

// Enabled tells whether the configuration masks anything.
func (cfg Config) Enabled() bool {
	return len(cfg.BuiltinRules) > 0 || len(cfg.Rules) > 0 || len(cfg.Keys) > 0 || cfg.MaxValueBytes > 0
}

// Validate checks that every builtin rule exists, every pattern compiles and every key and
// skipped attribute names something. Errors name the option (under the `masking.` prefix).
func (cfg Config) Validate() error {
	var errs []error
	for _, name := range cfg.BuiltinRules {
		if _, ok := builtinRules[name]; !ok {
			errs = append(errs, fmt.Errorf("masking.builtin_rules: unknown rule %q (known: %s)", name, strings.Join(BuiltinRuleNames(), ", ")))
		}
	}
	for i, rule := range cfg.Rules {
		if rule.Pattern == "" {
			errs = append(errs, fmt.Errorf("masking.rules[%d] %s: pattern must not be empty", i, rule.Name))
			continue
		}
		if _, err := regexp.Compile(rule.Pattern); err != nil {
			errs = append(errs, fmt.Errorf("masking.rules[%d] %s: invalid pattern: %w", i, rule.Name, err))
		}
	}
	for i, key := range cfg.Keys {
		if key == "" {
			errs = append(errs, fmt.Errorf("masking.keys[%d]: key must not be empty", i))
		}
	}
	for i, name := range cfg.SkipAttributes {
		if name == "" || name == "*" {
			errs = append(errs, fmt.Errorf("masking.skip_attributes[%d]: %q names no attribute", i, name))
		}
	}
	if cfg.MaxValueBytes < 0 {
		errs = append(errs, fmt.Errorf("masking.max_value_bytes: %d is negative (0 switches the limit off)", cfg.MaxValueBytes))
	}
	return errors.Join(errs...)
}

// BuiltinRuleNames lists the builtin rules, sorted.
func BuiltinRuleNames() []string {
	names := make([]string, 0, len(builtinRules))
	for name := range builtinRules {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
