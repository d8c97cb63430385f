package sampling

import (
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func TestOutcomeConfigValidate(t *testing.T) {
	withRules := func(rules ...OutcomeRule) OutcomeConfig {
		c := DefaultOutcomeConfig()
		c.Rules = rules
		return c
	}
	valid := withRules(
		OutcomeRule{Name: "failed", Kind: RuleError},
		OutcomeRule{Name: "slow", Kind: RuleLatency, LatencyOver: 30 * time.Second},
		OutcomeRule{Name: "heavy", Kind: RuleTokens, TokensOver: 50000},
		OutcomeRule{Name: "long-prompt", Kind: RuleTokens, TokensOver: 20000, Usage: UsageInput},
		OutcomeRule{Name: "costly", Kind: RuleCost, CostOver: 0.5},
		OutcomeRule{Name: "flagged", Kind: RuleScore, ScoreName: "correctness", Boolean: ptr(false)},
		OutcomeRule{Name: "low_quality", Kind: RuleScore, ScoreName: "helpfulness", Below: ptr(0.5)},
		OutcomeRule{Name: "toxic", Kind: RuleScore, ScoreName: "toxicity", Values: []string{"toxic"}},
		OutcomeRule{Name: "vip", Kind: RuleFilter, Filter: `[{"type":"string","column":"userId","operator":"=","value":"vip"}]`},
	)
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}

	tests := []struct {
		name    string
		cfg     OutcomeConfig
		wantErr string
	}{
		{"no rules", withRules(), "rules must name at least one rule"},
		{"no name", withRules(OutcomeRule{Kind: RuleError}), `rules[0] "": name must be 1 to 64 characters`},
		{"bad name", withRules(OutcomeRule{Name: "Failed calls", Kind: RuleError}), `rules[0] "Failed calls": name may hold only a-z, 0-9, _ and -`},
		{"reserved name", withRules(OutcomeRule{Name: "sample", Kind: RuleError}), `name "sample" is a reason of its own`},
		{"duplicate name", withRules(OutcomeRule{Name: "a", Kind: RuleError}, OutcomeRule{Name: "a", Kind: RuleCost, CostOver: 1}), `rules[1] "a": the name is taken by rules[0]`},
		{"unknown kind", withRules(OutcomeRule{Name: "x", Kind: "status"}), `rules[0] "x": kind must be one of error, latency, tokens, cost, score, filter, got "status"`},
		{"latency without bound", withRules(OutcomeRule{Name: "slow", Kind: RuleLatency}), `"slow": kind latency needs latency_over`},
		{"key of another kind", withRules(OutcomeRule{Name: "slow", Kind: RuleLatency, LatencyOver: time.Second, CostOver: 1}), `"slow": cost_over does not apply to kind latency`},
		{"tokens without bound", withRules(OutcomeRule{Name: "heavy", Kind: RuleTokens, Usage: UsageTotal}), `"heavy": kind tokens needs tokens_over`},
		{"tokens bad usage", withRules(OutcomeRule{Name: "heavy", Kind: RuleTokens, TokensOver: 1, Usage: "cached"}), `"heavy": usage must be total, input or output, got "cached"`},
		{"negative cost", withRules(OutcomeRule{Name: "costly", Kind: RuleCost, CostOver: -1}), `"costly": kind cost needs cost_over`},
		{"score without name", withRules(OutcomeRule{Name: "flagged", Kind: RuleScore, Boolean: ptr(false)}), `"flagged": kind score needs score_name`},
		{"score without test", withRules(OutcomeRule{Name: "flagged", Kind: RuleScore, ScoreName: "c"}), `"flagged": kind score needs exactly one of boolean`},
		{"score with two tests", withRules(OutcomeRule{Name: "flagged", Kind: RuleScore, ScoreName: "c", Boolean: ptr(false), Below: ptr(0.5)}), "exactly one of"},
		{"score empty values", withRules(OutcomeRule{Name: "toxic", Kind: RuleScore, ScoreName: "c", Values: []string{}}), `"toxic": values must list at least one value`},
		{"filter without text", withRules(OutcomeRule{Name: "vip", Kind: RuleFilter}), `"vip": kind filter needs filter`},
		{"filter bad text", withRules(OutcomeRule{Name: "vip", Kind: RuleFilter, Filter: `[{"type":"number","column":"userId","operator":">","value":1}]`}), `"vip": filter[0]: column "userId": not a number column`},
		{"filter selects all", withRules(OutcomeRule{Name: "all", Kind: RuleFilter, Filter: `[]`}), `"all": filter selects every observation`},
		{"bad decide_per", func() OutcomeConfig { c := valid; c.DecidePer = "user"; return c }(), `decide_per must be "trace" or "session", got "user"`},
		{"zero decision_wait", func() OutcomeConfig { c := valid; c.DecisionWait = 0; return c }(), "decision_wait must be positive"},
		{"settle over wait", func() OutcomeConfig { c := valid; c.SettleDuration = time.Hour; return c }(), "settle_duration (1h0m0s) must not exceed decision_wait (5m0s)"},
		{"zero max_sessions", func() OutcomeConfig { c := valid; c.MaxSessions = 0; return c }(), "max_sessions must be positive"},
		{"zero max_held_mib", func() OutcomeConfig { c := valid; c.MaxHeldMiB = 0; return c }(), "max_held_mib must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
			if _, err := NewOutcome(tt.cfg, NewRatio(0.1)); err == nil {
				t.Fatal("NewOutcome compiled an invalid config")
			}
		})
	}
}

func TestIsRuleReason(t *testing.T) {
	for reason, want := range map[string]bool{"errors": true, "flagged": true, ReasonSample: false,
		ReasonExperiment: false, ReasonSession: false, ReasonDropped: false, "": false} {
		if got := IsRuleReason(reason); got != want {
			t.Errorf("IsRuleReason(%q) = %v, want %v", reason, got, want)
		}
	}
}
