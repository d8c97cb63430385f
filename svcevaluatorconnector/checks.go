package svcevaluatorconnector

import (
	"encoding/json"
	"errors"
	"regexp"
	"unicode/utf8"
	"unsafe"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/svc/svc-collector/pkg/observation"
)

// The ready checks. A measure returns the quantity a threshold is applied to (or a NUMERIC
// score records); a predicate the yes/no answer. ok is false when the observation lacks what
// the check reads (no output, no usage, no cost): the evaluator then makes no score.

func latency(v *observation.View) (float64, bool) { return v.Latency(), true }

// The checks on input and output read the text of the messages (observation.View.OutputText),
// not the JSON that carries them: a refusal inside gen_ai.output.messages starts with its words,
// and a Vercel AI SDK generation's JSON answer is checked as the model wrote it.

func outputLength(v *observation.View) (float64, bool) {
	out, ok := v.OutputText()
	return float64(utf8.RuneCountInString(out)), ok
}

// boundedOutputLength is outputLength for a BOOLEAN threshold: it counts at most limit+1
// characters, which decides "above limit-or-less" as well as the full count does, without
// reading the rest of a long output.
func boundedOutputLength(limit int) func(v *observation.View) (float64, bool) {
	return func(v *observation.View) (float64, bool) {
		out, ok := v.OutputText()
		if !ok {
			return 0, false
		}
		if len(out) <= limit {
			// Never more characters than bytes: the exact count is cheap and within the limit.
			return float64(utf8.RuneCountInString(out)), true
		}
		n := 0
		for range out {
			if n++; n > limit {
				break
			}
		}
		return float64(n), true
	}
}

func totalTokens(v *observation.View) (float64, bool) {
	_, _, total, ok := v.Usage()
	return total, ok
}

func errorStatus(v *observation.View) (bool, bool) {
	return v.Level() == observation.LevelError, true
}

func validJSONOutput(v *observation.View) (bool, bool) {
	out, ok := v.OutputText()
	if !ok {
		return false, false
	}
	if !mayStartJSON(out) {
		// Prose, the common invalid output: answered without json.Valid, which builds an
		// error value for every invalid text.
		return false, true
	}
	// json.Valid reads the bytes only; no copy of a possibly large output.
	return json.Valid(unsafe.Slice(unsafe.StringData(out), len(out))), true
}

// mayStartJSON reports whether the first character after white space can start a JSON value.
func mayStartJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{', '[', '"', 't', 'f', 'n', '-':
			return true
		default:
			return c >= '0' && c <= '9'
		}
	}
	return false
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

// compileJSONSchema reads and resolves a JSON Schema given as JSON text.
func compileJSONSchema(text string) (*jsonschema.Resolved, error) {
	var schema jsonschema.Schema
	if err := json.Unmarshal([]byte(text), &schema); err != nil {
		return nil, err
	}
	if schema.Schema == "" {
		// The draft the library validates by default; a schema may name draft-07 instead.
		schema.Schema = "https://json-schema.org/draft/2020-12/schema"
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return nil, err
	}
	if resolved == nil {
		return nil, errors.New("empty schema")
	}
	return resolved, nil
}

// conformingJSONOutput holds when the output is valid JSON that conforms to schema.
func conformingJSONOutput(schema *jsonschema.Resolved) func(*observation.View) (bool, bool) {
	return func(v *observation.View) (bool, bool) {
		out, ok := v.OutputText()
		if !ok {
			return false, false
		}
		var instance any
		if json.Unmarshal([]byte(out), &instance) != nil {
			return false, true
		}
		return schema.Validate(instance) == nil, true
	}
}
