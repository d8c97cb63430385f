package svcevaluatorconnector

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/svc/svc-collector/pkg/observation"
	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/pkg/scorerecord"
)

// Config of the svcevaluator connector.
type Config struct {
	// SampleRate is the TraceIdRatioBased rate the traces were sampled with (svcspanfilter's
	// sample_rate): evaluations of a sampled-out trace make no score, unless a span marks the
	// trace as an experiment (pkg/sampling, the rule of event scores).
	SampleRate float64 `mapstructure:"sample_rate"`

	// Evaluators run on every span, in order; none configured: the connector emits nothing.
	Evaluators []EvaluatorConfig `mapstructure:"evaluators"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// EvaluatorConfig is one evaluator: which observations, which check, which score.
type EvaluatorConfig struct {
	// Name identifies the evaluator: in score ids, metrics and the score's metadata. Unique.
	Name string `mapstructure:"name"`
	// Filter selects the observations: a v2 filter, a JSON array of {type, column, operator,
	// value} objects (docs/contract.md §13; pkg/observation). Empty: every observation.
	Filter string `mapstructure:"filter"`
	// Check is what the evaluator computes: exactly one check.
	Check CheckConfig `mapstructure:"check"`
	// Score is the score it makes.
	Score ScoreConfig `mapstructure:"score"`
}

// Threshold bounds a measure: a BOOLEAN score is true when the measure is above Above or below
// Below (both: outside the range).
type Threshold struct {
	Above *float64 `mapstructure:"above"`
	Below *float64 `mapstructure:"below"`
}

// CheckConfig names the check; exactly one field is set.
type CheckConfig struct {
	// Latency is the observation's duration in seconds.
	Latency *Threshold `mapstructure:"latency"`
	// Error is true for the check "the observation's status is Error" (level ERROR).
	Error bool `mapstructure:"error"`
	// JSONOutput is true for the check "the output is valid JSON".
	JSONOutput bool `mapstructure:"json_output"`
	// JSONSchema (with JSONOutput) is a JSON Schema (draft 2020-12 or draft-07, as JSON text,
	// no remote $ref) the output must also conform to.
	JSONSchema string `mapstructure:"json_schema"`
	// Regular expressions (Go RE2 syntax) the input or output matches / does not match.
	OutputMatches    string `mapstructure:"output_matches"`
	OutputNotMatches string `mapstructure:"output_not_matches"`
	InputMatches     string `mapstructure:"input_matches"`
	InputNotMatches  string `mapstructure:"input_not_matches"`
	// OutputLength is the output's length in characters (Unicode code points).
	OutputLength *Threshold `mapstructure:"output_length"`
	// Tokens is the total token usage (input + output), Cost the total cost.
	Tokens *Threshold `mapstructure:"tokens"`
	Cost   *Threshold `mapstructure:"cost"`
	// OTTLCondition is an OTTL condition on the span (span context: span.*, resource.*,
	// instrumentation_scope.*): a BOOLEAN score, 1 when it holds.
	OTTLCondition string `mapstructure:"ottl_condition"`
	// OTTLValue is an OTTL value expression: a NUMERIC score of its value (int, double or bool);
	// no score when it is nil (an absent attribute).
	OTTLValue string `mapstructure:"ottl_value"`
}

// ScoreConfig is the score an evaluator makes.
type ScoreConfig struct {
	// Name of the score; default the evaluator's name.
	Name string `mapstructure:"name"`
	// DataType: BOOLEAN (default; 1 when the check holds, else 0) or NUMERIC (the measure itself:
	// latency, output_length, tokens and cost checks only).
	DataType string `mapstructure:"data_type"`
	// Comment is a template of the score's comment; placeholders: see commentPlaceholders.
	Comment string `mapstructure:"comment"`
	// Target: observation (default) or trace (a trace-level score, as span.score_trace()).
	Target string `mapstructure:"target"`
	// OnlyWhenTrue makes a BOOLEAN evaluator emit a score only when its check holds (a flag),
	// instead of a 1 or a 0 for every observation it selects.
	OnlyWhenTrue bool `mapstructure:"only_when_true"`
}

func createDefaultConfig() *Config {
	return &Config{SampleRate: 1}
}

// Validate checks the configuration when the collector loads it: every evaluator compiles.
func (c *Config) Validate() error {
	if err := sampling.ValidateRate(c.SampleRate); err != nil {
		return err
	}
	_, err := compileEvaluators(c.Evaluators)
	return err
}

// compileEvaluators turns the evaluators' configuration into what the connector runs.
func compileEvaluators(cfgs []EvaluatorConfig) ([]*evaluator, error) {
	seen := make(map[string]bool, len(cfgs))
	evs := make([]*evaluator, 0, len(cfgs))
	var errs []error
	for i, cfg := range cfgs {
		label := fmt.Sprintf("evaluators[%d]", i)
		if cfg.Name != "" {
			label = fmt.Sprintf("evaluators[%d] (%s)", i, cfg.Name)
		}
		switch {
		case cfg.Name == "":
			errs = append(errs, fmt.Errorf("%s: name is required", label))
			continue
		case seen[cfg.Name]:
			errs = append(errs, fmt.Errorf("%s: name is used by an earlier evaluator; names must be unique (they are part of the score ids)", label))
			continue
		}
		seen[cfg.Name] = true
		ev, err := compileEvaluator(cfg)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", label, err))
			continue
		}
		evs = append(evs, ev)
	}
	return evs, errors.Join(errs...)
}

func compileEvaluator(cfg EvaluatorConfig) (*evaluator, error) {
	filter, err := observation.ParseFilter(cfg.Filter)
	if err != nil {
		return nil, err
	}
	ev := &evaluator{name: cfg.Name, scoreName: cfg.Score.Name, filter: filter, onlyWhenTrue: cfg.Score.OnlyWhenTrue}
	if ev.scoreName == "" {
		ev.scoreName = cfg.Name
	}
	dataType := strings.ToUpper(cfg.Score.DataType)
	if dataType == "" && cfg.Check.OTTLValue != "" {
		dataType = scorerecord.DataTypeNumeric
	}
	switch dataType {
	case "", scorerecord.DataTypeBoolean:
		ev.dataType = scorerecord.DataTypeBoolean
	case scorerecord.DataTypeNumeric:
		ev.dataType = scorerecord.DataTypeNumeric
	default:
		return nil, fmt.Errorf("score.data_type must be BOOLEAN or NUMERIC, got %q", cfg.Score.DataType)
	}
	switch cfg.Score.Target {
	case "", scorerecord.TargetObservation:
	case scorerecord.TargetTrace:
		ev.traceLevel = true
	default:
		return nil, fmt.Errorf("score.target must be %q or %q, got %q", scorerecord.TargetObservation, scorerecord.TargetTrace, cfg.Score.Target)
	}
	if ev.comment, err = parseComment(cfg.Score.Comment); err != nil {
		return nil, fmt.Errorf("score.comment: %w", err)
	}
	if err := cfg.Check.compile(ev); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	if ev.check == "output_length" && ev.dataType == scorerecord.DataTypeBoolean && !ev.comment.uses("measure") {
		// Only the threshold's side matters: count no further than it.
		limit := 0.0
		if ev.above != nil {
			limit = *ev.above + 1
		}
		if ev.below != nil {
			limit = max(limit, *ev.below)
		}
		if limit >= 0 && limit < math.MaxInt32 {
			ev.measure = boundedOutputLength(int(math.Ceil(limit)))
		}
	}
	numeric := ev.dataType == scorerecord.DataTypeNumeric
	switch {
	case ev.ottlValue != nil && !numeric:
		return nil, errors.New("check.ottl_value makes a NUMERIC score; for a BOOLEAN one write an ottl_condition")
	case ev.ottlValue != nil:
	case numeric && ev.measure == nil:
		return nil, fmt.Errorf("score.data_type NUMERIC needs a check with a measure (latency, output_length, tokens, cost, ottl_value); %s is a yes/no check", ev.check)
	case numeric && (ev.above != nil || ev.below != nil):
		return nil, fmt.Errorf("check.%s: a NUMERIC score is the measure itself; above and below apply to BOOLEAN scores", ev.check)
	case !numeric && ev.measure != nil && ev.above == nil && ev.below == nil:
		return nil, fmt.Errorf("check.%s: a BOOLEAN score needs above or below (or set score.data_type: NUMERIC to record the measure)", ev.check)
	case numeric && ev.onlyWhenTrue:
		return nil, errors.New("score.only_when_true applies to BOOLEAN scores")
	}
	return ev, nil
}

// compile sets the evaluator's check; exactly one must be configured.
func (c CheckConfig) compile(ev *evaluator) error {
	var set []string
	measure := func(name string, t *Threshold, m func(*observation.View) (float64, bool)) error {
		set = append(set, name)
		ev.check, ev.measure = name, m
		ev.above, ev.below = t.Above, t.Below
		for _, b := range []*float64{t.Above, t.Below} {
			if b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0)) {
				return fmt.Errorf("%s: thresholds must be finite numbers", name)
			}
		}
		return nil
	}
	predicate := func(name string, p func(*observation.View) (bool, bool)) {
		set = append(set, name)
		ev.check, ev.predicate = name, p
	}
	pattern := func(name, expr string, field func(*observation.View) (string, bool), want bool) error {
		re, err := regexp.Compile(expr)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		predicate(name, regexpCheck(re, field, want))
		return nil
	}
	var errs []error
	if c.Latency != nil {
		errs = append(errs, measure("latency", c.Latency, latency))
	}
	if c.Error {
		predicate("error", errorStatus)
	}
	switch {
	case c.JSONSchema != "" && !c.JSONOutput:
		errs = append(errs, errors.New("json_schema applies to json_output: set json_output: true"))
	case c.JSONSchema != "":
		schema, err := compileJSONSchema(c.JSONSchema)
		if err != nil {
			errs = append(errs, fmt.Errorf("json_schema: %w", err))
		}
		predicate("json_output", conformingJSONOutput(schema))
	case c.JSONOutput:
		predicate("json_output", validJSONOutput)
	}
	if c.OutputMatches != "" {
		errs = append(errs, pattern("output_matches", c.OutputMatches, (*observation.View).Output, true))
	}
	if c.OutputNotMatches != "" {
		errs = append(errs, pattern("output_not_matches", c.OutputNotMatches, (*observation.View).Output, false))
	}
	if c.InputMatches != "" {
		errs = append(errs, pattern("input_matches", c.InputMatches, (*observation.View).Input, true))
	}
	if c.InputNotMatches != "" {
		errs = append(errs, pattern("input_not_matches", c.InputNotMatches, (*observation.View).Input, false))
	}
	if c.OutputLength != nil {
		errs = append(errs, measure("output_length", c.OutputLength, outputLength))
	}
	if c.Tokens != nil {
		errs = append(errs, measure("tokens", c.Tokens, totalTokens))
	}
	if c.Cost != nil {
		errs = append(errs, measure("cost", c.Cost, (*observation.View).Cost))
	}
	if c.OTTLCondition != "" {
		set = append(set, "ottl_condition")
		ev.check = "ottl_condition"
		cond, err := compileOTTLCondition(c.OTTLCondition)
		if err != nil {
			errs = append(errs, fmt.Errorf("ottl_condition: %w", err))
		}
		ev.ottlCondition = cond
	}
	if c.OTTLValue != "" {
		set = append(set, "ottl_value")
		ev.check = "ottl_value"
		value, err := compileOTTLValue(c.OTTLValue)
		if err != nil {
			errs = append(errs, fmt.Errorf("ottl_value: %w", err))
		}
		ev.ottlValue = value
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	switch len(set) {
	case 0:
		return errors.New("no check configured: set one of latency, error, json_output, output_matches, output_not_matches, input_matches, input_not_matches, output_length, tokens, cost, ottl_condition, ottl_value")
	case 1:
		return nil
	default:
		return fmt.Errorf("one check per evaluator, got %s: split them into evaluators of their own", strings.Join(set, ", "))
	}
}
