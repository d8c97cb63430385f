package svcevaluatorconnector

import (
	"encoding/json"
	"regexp"
	"unicode/utf8"
	"unsafe"

	"github.com/svc/svc-collector/pkg/observation"
)

// The ready checks. A measure returns the quantity a threshold is applied to (or a NUMERIC
// score records); a predicate the yes/no answer. ok is false when the observation lacks what
// the check reads (no output, no usage, no cost): the evaluator then makes no score.

func latency(v *observation.View) (float64, bool) { return v.Latency(), true }

func outputLength(v *observation.View) (float64, bool) {
	out, ok := v.Output()
	return float64(utf8.RuneCountInString(out)), ok
}

func totalTokens(v *observation.View) (float64, bool) {
	_, _, total, ok := v.Usage()
	return total, ok
}

func errorStatus(v *observation.View) (bool, bool) {
	return v.Level() == observation.LevelError, true
}

func validJSONOutput(v *observation.View) (bool, bool) {
	out, ok := v.Output()
	if !ok {
		return false, false
	}
	// json.Valid reads the bytes only; no copy of a possibly large output.
	return json.Valid(unsafe.Slice(unsafe.StringData(out), len(out))), true
}

// regexpCheck holds when field matches re (want true) or does not match it (want false).
func regexpCheck(re *regexp.Regexp, field func(*observation.View) (string, bool), want bool) func(*observation.View) (bool, bool) {
	return func(v *observation.View) (bool, bool) {
		s, ok := field(v)
		if !ok {
			return false, false
		}
		return re.MatchString(s) == want, true
	}
}
