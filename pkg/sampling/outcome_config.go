package sampling

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/svc/svc-collector/pkg/observation"
	"github.com/svc/svc-collector/pkg/scorerecord"
)

// Kinds of outcome rules.
const (
	RuleError   = "error"
	RuleLatency = "latency"
	RuleTokens  = "tokens"
	RuleCost    = "cost"
	RuleScore   = "score"
	RuleFilter  = "filter"
)

var ruleKinds = []string{RuleError, RuleLatency, RuleTokens, RuleCost, RuleScore, RuleFilter}

// Reasons of a decision other than a rule's name. A rule may not take one of these names.
const (
	ReasonSample     = "sample"
	ReasonExperiment = "experiment"
	ReasonSession    = "session"
	ReasonDropped    = "dropped"
)

var reservedReasons = []string{ReasonSample, ReasonExperiment, ReasonSession, ReasonDropped}

// IsRuleReason reports whether a decision's reason names the rule that kept its trace.
func IsRuleReason(reason string) bool {
	return reason != "" && !slices.Contains(reservedReasons, reason)
}

// What a decision is taken for.
const (
	DecidePerTrace   = "trace"
	DecidePerSession = "session"
)

// Token counts a tokens rule reads (observation.View.Usage).
const (
	UsageTotal  = "total"
	UsageInput  = "input"
	UsageOutput = "output"
)

// Defaults of an outcome section, documented in the svcsampling extension's README.
const (
	DefaultDecisionWait        = 5 * time.Minute
	DefaultSettleDuration      = 5 * time.Second
	DefaultSessionKeepDuration = time.Hour
	DefaultMaxSessions         = 100_000
	DefaultMaxHeldMiB          = 128
)

// OutcomeConfig is outcome sampling: a trace is kept whole when any of its observations or scores
// matches a rule; the others at the sample rate (Ratio), experiments always.
type OutcomeConfig struct {
	// Rules are tried in order; the first that matches names the reason (whatever order the
	// spans arrive in).
	Rules []OutcomeRule `mapstructure:"rules"`
	// DecidePer is "trace" or "session": in session mode a trace kept by a rule keeps its
	// session's later traces for SessionKeepDuration, and the sample rate applies to session ids.
	DecidePer string `mapstructure:"decide_per"`
	// DecisionWait is the longest a trace waits for its decision, from its first span.
	DecisionWait time.Duration `mapstructure:"decision_wait"`
	// SettleDuration: once its root span arrived, a trace is decided when no span of it came
	// for this long.
	SettleDuration time.Duration `mapstructure:"settle_duration"`
	// SessionKeepDuration is how long a rule's decision keeps the later traces of its session.
	SessionKeepDuration time.Duration `mapstructure:"session_keep_duration"`
	// MaxSessions bounds the memory of kept sessions (least recently kept forgotten first).
	MaxSessions int `mapstructure:"max_sessions"`
	// MaxHeldMiB bounds the bytes of spans and scores waiting for a decision (within the trace
	// memory's budget); over it the oldest undecided traces are decided on what has arrived.
	MaxHeldMiB int `mapstructure:"max_held_mib"`
}

// DefaultOutcomeConfig is an outcome section without rules, with the default bounds.
func DefaultOutcomeConfig() OutcomeConfig {
	return OutcomeConfig{
		DecidePer:           DecidePerTrace,
		DecisionWait:        DefaultDecisionWait,
		SettleDuration:      DefaultSettleDuration,
		SessionKeepDuration: DefaultSessionKeepDuration,
		MaxSessions:         DefaultMaxSessions,
		MaxHeldMiB:          DefaultMaxHeldMiB,
	}
}

// OutcomeRule is one rule. Kind says which of the other keys apply:
//
//	error    span status ERROR, or level ERROR as the platform reads it
//	latency  latency_over: the observation lasted longer
//	tokens   tokens_over, usage (total, input or output; default total): more tokens
//	cost     cost_over: the observation cost more (the cost the span reports)
//	score    score_name and one of boolean (a BOOLEAN score equal to it), below (a NUMERIC score
//	         below it), values (a CATEGORICAL score with one of these values)
//	filter   filter: a v2 filter (the evaluators' selection language) any observation matches
type OutcomeRule struct {
	Name        string        `mapstructure:"name"`
	Kind        string        `mapstructure:"kind"`
	LatencyOver time.Duration `mapstructure:"latency_over"`
	TokensOver  float64       `mapstructure:"tokens_over"`
	Usage       string        `mapstructure:"usage"`
	CostOver    float64       `mapstructure:"cost_over"`
	ScoreName   string        `mapstructure:"score_name"`
	Boolean     *bool         `mapstructure:"boolean"`
	Below       *float64      `mapstructure:"below"`
	Values      []string      `mapstructure:"values"`
	Filter      string        `mapstructure:"filter"`
}

// Validate checks every rule (each error names its rule) and the bounds.
func (c *OutcomeConfig) Validate() error {
	var errs []error
	if len(c.Rules) == 0 {
		errs = append(errs, errors.New("outcome: rules must name at least one rule (without rules, leave the outcome section out)"))
	}
	if len(c.Rules) > math.MaxInt16 {
		errs = append(errs, fmt.Errorf("outcome: at most %d rules, got %d", math.MaxInt16, len(c.Rules)))
	}
	seen := make(map[string]int, len(c.Rules))
	for i := range c.Rules {
		r := &c.Rules[i]
		if j, dup := seen[r.Name]; dup && r.Name != "" {
			errs = append(errs, fmt.Errorf("outcome: rules[%d] %q: the name is taken by rules[%d]: each rule's name is the reason it reports", i, r.Name, j))
		}
		seen[r.Name] = i
		if err := r.validate(); err != nil {
			errs = append(errs, fmt.Errorf("outcome: rules[%d] %q: %w", i, r.Name, err))
		}
	}
	if c.DecidePer != DecidePerTrace && c.DecidePer != DecidePerSession {
		errs = append(errs, fmt.Errorf("outcome: decide_per must be %q or %q, got %q", DecidePerTrace, DecidePerSession, c.DecidePer))
	}
	for _, d := range []struct {
		key string
		val time.Duration
	}{{"decision_wait", c.DecisionWait}, {"settle_duration", c.SettleDuration}, {"session_keep_duration", c.SessionKeepDuration}} {
		if d.val <= 0 {
			errs = append(errs, fmt.Errorf("outcome: %s must be positive, got %v", d.key, d.val))
		}
	}
	if c.SettleDuration > c.DecisionWait {
		errs = append(errs, fmt.Errorf("outcome: settle_duration (%v) must not exceed decision_wait (%v)", c.SettleDuration, c.DecisionWait))
	}
	if c.MaxSessions <= 0 {
		errs = append(errs, fmt.Errorf("outcome: max_sessions must be positive, got %d", c.MaxSessions))
	}
	if c.MaxHeldMiB <= 0 {
		errs = append(errs, fmt.Errorf("outcome: max_held_mib must be positive, got %d", c.MaxHeldMiB))
	}
	return errors.Join(errs...)
}

func validName(name string) error {
	if name == "" || len(name) > 64 {
		return errors.New("name must be 1 to 64 characters (it is the reason reported in metrics and on the root span)")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("name may hold only a-z, 0-9, _ and -, got %q", name)
		}
	}
	if slices.Contains(reservedReasons, name) {
		return fmt.Errorf("name %q is a reason of its own (%s): choose another", name, strings.Join(reservedReasons, ", "))
	}
	return nil
}

func (r *OutcomeRule) validate() error {
	if err := validName(r.Name); err != nil {
		return err
	}
	// keys set, by the kind they belong to
	set := map[string]bool{
		"latency_over": r.LatencyOver != 0, "tokens_over": r.TokensOver != 0, "usage": r.Usage != "",
		"cost_over": r.CostOver != 0, "score_name": r.ScoreName != "", "boolean": r.Boolean != nil,
		"below": r.Below != nil, "values": r.Values != nil, "filter": r.Filter != "",
	}
	allowed := map[string][]string{
		RuleError: nil, RuleLatency: {"latency_over"}, RuleTokens: {"tokens_over", "usage"}, RuleCost: {"cost_over"},
		RuleScore: {"score_name", "boolean", "below", "values"}, RuleFilter: {"filter"},
	}
	keys, ok := allowed[r.Kind]
	if !ok {
		return fmt.Errorf("kind must be one of %s, got %q", strings.Join(ruleKinds, ", "), r.Kind)
	}
	for _, k := range []string{"latency_over", "tokens_over", "usage", "cost_over", "score_name", "boolean", "below", "values", "filter"} {
		if set[k] && !slices.Contains(keys, k) {
			return fmt.Errorf("%s does not apply to kind %s", k, r.Kind)
		}
	}
	switch r.Kind {
	case RuleLatency:
		if r.LatencyOver <= 0 {
			return errors.New("kind latency needs latency_over, a positive duration (e.g. 30s)")
		}
	case RuleTokens:
		if !(r.TokensOver > 0) || math.IsInf(r.TokensOver, 0) {
			return errors.New("kind tokens needs tokens_over, a positive number of tokens")
		}
		if r.Usage != "" && r.Usage != UsageTotal && r.Usage != UsageInput && r.Usage != UsageOutput {
			return fmt.Errorf("usage must be %s, %s or %s, got %q", UsageTotal, UsageInput, UsageOutput, r.Usage)
		}
	case RuleCost:
		if !(r.CostOver > 0) || math.IsInf(r.CostOver, 0) {
			return errors.New("kind cost needs cost_over, a positive cost")
		}
	case RuleScore:
		if r.ScoreName == "" {
			return errors.New("kind score needs score_name, the name of the score it reads")
		}
		n := 0
		for _, k := range []string{"boolean", "below", "values"} {
			if set[k] {
				n++
			}
		}
		if n != 1 {
			return errors.New("kind score needs exactly one of boolean (a BOOLEAN score equal to it), below (a NUMERIC score below it), values (a CATEGORICAL score with one of these values)")
		}
		if r.Below != nil && (math.IsNaN(*r.Below) || math.IsInf(*r.Below, 0)) {
			return fmt.Errorf("below must be a finite number, got %v", *r.Below)
		}
		if r.Values != nil && (len(r.Values) == 0 || slices.Contains(r.Values, "")) {
			return errors.New("values must list at least one value, none of them empty")
		}
	case RuleFilter:
		if strings.TrimSpace(r.Filter) == "" {
			return errors.New("kind filter needs filter, a v2 filter JSON array")
		}
		f, err := observation.ParseFilter(r.Filter)
		if err != nil {
			return err
		}
		if len(f) == 0 {
			return errors.New("filter selects every observation: the rule would keep every trace")
		}
	}
	return nil
}

// scoreDataType is the data type a score rule matches.
func (r *OutcomeRule) scoreDataType() string {
	switch {
	case r.Boolean != nil:
		return scorerecord.DataTypeBoolean
	case r.Below != nil:
		return scorerecord.DataTypeNumeric
	}
	return scorerecord.DataTypeCategorical
}
