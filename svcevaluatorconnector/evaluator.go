package svcevaluatorconnector

import (
	"math"
	"strconv"

	"github.com/svc/svc-collector/pkg/observation"
	"github.com/svc/svc-collector/pkg/scorerecord"
)

// evaluator is one compiled evaluator.
type evaluator struct {
	name, scoreName string
	filter          observation.Filter
	check           string // the check's config key, for messages
	// Exactly one of measure and predicate is set.
	measure      func(*observation.View) (float64, bool)
	above, below *float64
	predicate    func(*observation.View) (bool, bool)
	dataType     string
	comment      commentTemplate
	traceLevel   bool
	onlyWhenTrue bool
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
}

// evaluate runs the check on a selected observation. It returns outcomeScored with the result,
// outcomeSkipped when the observation lacks what the check reads (or the check does not hold
// and only_when_true is set), outcomeError when the check computed no finite value.
func (e *evaluator) evaluate(v *observation.View) (result, outcome) {
	var value, measure float64
	hasMeasure := false
	if e.measure != nil {
		m, ok := e.measure(v)
		if !ok {
			return result{}, outcomeSkipped
		}
		if math.IsNaN(m) || math.IsInf(m, 0) {
			return result{}, outcomeError
		}
		measure, hasMeasure = m, true
		if e.dataType == scorerecord.DataTypeNumeric {
			value = m
		} else if (e.above != nil && m > *e.above) || (e.below != nil && m < *e.below) {
			value = 1
		}
	} else {
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
