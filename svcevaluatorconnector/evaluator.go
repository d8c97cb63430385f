package svcevaluatorconnector

import (
	"context"
	"math"
	"strconv"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/observation"
	"github.com/svc/svc-collector/pkg/scorerecord"
)

// evaluator is one compiled evaluator.
type evaluator struct {
	name, scoreName string
	filter          observation.Filter
	check           string // the check's config key, for messages
	// Exactly one of measure, predicate, ottlCondition and ottlValue is set.
	measure       func(*observation.View) (float64, bool)
	above, below  *float64
	predicate     func(*observation.View) (bool, bool)
	ottlCondition *ottl.Condition[*ottlspan.TransformContext]
	ottlValue     *ottl.ValueExpression[*ottlspan.TransformContext]
	dataType      string
	comment       commentTemplate
	traceLevel    bool
	onlyWhenTrue  bool
}

// outcome of one evaluation; a metric attribute.
type outcome int

const (
	outcomeScored outcome = iota
	outcomeSkipped
	outcomeSampledOut
	outcomeError
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"scored", "skipped", "sampled_out", "error"}

// result of one evaluation.
type result struct {
	value   float64
	comment string
	err     error // why the evaluation failed, with outcomeError
}

// spanRef is where a span sits in its batch, for OTTL's span context.
type spanRef struct {
	rs ptrace.ResourceSpans
	ss ptrace.ScopeSpans
}

// evaluate runs the check on a selected observation. It returns outcomeScored with the result,
// outcomeSkipped when the observation lacks what the check reads (or the check does not hold
// and only_when_true is set), outcomeError when the check computed no finite value.
func (e *evaluator) evaluate(ctx context.Context, v *observation.View, ref spanRef) (result, outcome) {
	var value, measure float64
	hasMeasure := false
	switch {
	case e.ottlCondition != nil || e.ottlValue != nil:
		tCtx := ottlspan.NewTransformContext(ref.rs, ref.ss, v.Span)
		defer tCtx.Close()
		if e.ottlCondition != nil {
			holds, err := e.ottlCondition.Eval(ctx, tCtx)
			if err != nil {
				return result{err: err}, outcomeError
			}
			if holds {
				value = 1
			}
			break
		}
		n, ok, err := ottlNumber(ctx, e.ottlValue, tCtx)
		if err != nil {
			return result{err: err}, outcomeError
		}
		if !ok {
			return result{}, outcomeSkipped
		}
		value, measure, hasMeasure = n, n, true
	case e.measure != nil:
		m, ok := e.measure(v)
		if !ok {
			return result{}, outcomeSkipped
		}
		if math.IsNaN(m) || math.IsInf(m, 0) {
			return result{err: errNotANumber{m}}, outcomeError
		}
		measure, hasMeasure = m, true
		if e.dataType == scorerecord.DataTypeNumeric {
			value = m
		} else if (e.above != nil && m > *e.above) || (e.below != nil && m < *e.below) {
			value = 1
		}
	default:
		holds, ok := e.predicate(v)
		if !ok {
			return result{}, outcomeSkipped
		}
		if holds {
			value = 1
		}
	}
	if e.onlyWhenTrue && value == 0 {
		return result{}, outcomeSkipped
	}
	r := result{value: value}
	if len(e.comment) > 0 {
		r.comment = e.comment.render(commentValues{
			evaluator: e.name, name: v.Name(), typ: v.Type(), model: v.Model(),
			measure: measure, hasMeasure: hasMeasure, value: value, threshold: e.threshold(),
		})
	}
	return r, outcomeScored
}

// threshold describes the bounds, for comments: "> 5", "< 10", "> 5 or < 1".
func (e *evaluator) threshold() string {
	var s string
	if e.above != nil {
		s = "> " + strconv.FormatFloat(*e.above, 'g', -1, 64)
	}
	if e.below != nil {
		if s != "" {
			s += " or "
		}
		s += "< " + strconv.FormatFloat(*e.below, 'g', -1, 64)
	}
	return s
}
