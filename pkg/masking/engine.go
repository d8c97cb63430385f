package masking // import "github.com/svc/svc-collector/pkg/masking"

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/svc/svc-collector/pkg/jsontext"
)

// Placeholder replaces, whole, a value that masking cannot process (metadata that is not valid
// JSON, nesting deeper than 128 levels), so that it is never passed on unmasked.
const Placeholder = "[svc: value removed, masking failed]"

// Result says what masking did to a value. Results combine with max.
type Result uint8

const (
	Unchanged Result = iota
	Masked           // rules or masked keys changed the value
	Oversized        // the value was longer than max_value_bytes and replaced by a size marker
	Failed           // the value could not be processed and was replaced by Placeholder
)

// rule is a compiled rule: a builtin (with its fast scan) or a user rule.
type rule struct {
	name        string
	re          *regexp.Regexp
	replacement string
	builtin     *builtinRule // nil for user rules
	// literal is a user rule's literal prefix: text without it cannot match.
	literal string
}

// Engine applies a masking configuration. It is safe for concurrent use.
type Engine struct {
	rules          []rule
	keys           []string
	keyReplacement string
	maxValueBytes  int
	skipNames      map[string]struct{}
	skipPrefixes   []string
	// keyReplacementJSON and placeholderJSON are the JSON texts written into JSON documents.
	keyReplacementJSON string
	placeholderJSON    string
}

// New compiles cfg. It returns nil (and no error) when cfg masks nothing; every method of a nil
// *Engine leaves values unchanged.
func New(cfg Config) (*Engine, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{keys: cfg.Keys, keyReplacement: cfg.KeyReplacement, maxValueBytes: cfg.MaxValueBytes}
	if e.keyReplacement == "" {
		e.keyReplacement = DefaultReplacement
	}
	for _, name := range cfg.BuiltinRules {
		b := builtinRules[name]
		e.rules = append(e.rules, rule{name: name, re: compiledBuiltins[name], replacement: b.replacement, builtin: b})
	}
	for i, r := range cfg.Rules {
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return nil, fmt.Errorf("masking.rules[%d] %s: %w", i, r.Name, err)
		}
		replacement := r.Replacement
		if replacement == "" {
			replacement = DefaultReplacement
		}
		prefix, _ := re.LiteralPrefix()
		e.rules = append(e.rules, rule{name: r.Name, re: re, replacement: replacement, literal: prefix})
	}
	e.skipNames = map[string]struct{}{}
	for _, list := range [][]string{StructuralAttributes, cfg.SkipAttributes} {
		for _, name := range list {
			if prefix, ok := strings.CutSuffix(name, "*"); ok {
				e.skipPrefixes = append(e.skipPrefixes, prefix)
			} else {
				e.skipNames[name] = struct{}{}
			}
		}
	}
	e.keyReplacementJSON = string(jsontext.AppendString(nil, e.keyReplacement))
	e.placeholderJSON = string(jsontext.AppendString(nil, Placeholder))
	return e, nil
}

// IsMaskedKey reports whether masking.keys names key (case-insensitively).
func (e *Engine) IsMaskedKey(key string) bool {
	if e == nil {
		return false
	}
	for _, k := range e.keys {
		if strings.EqualFold(k, key) {
			return true
		}
	}
	return false
}

// KeyReplacement is the text that replaces the value of a masked key.
func (e *Engine) KeyReplacement() string { return e.keyReplacement }

// String applies every rule, in order, to s as plain text (no JSON, no size limit) and tells
// whether anything changed.
func (e *Engine) String(s string) (string, bool) {
	if e == nil {
		return s, false
	}
	out := s
	// digitsOf is the text digitWindows last looked at (valid while no rule changed it).
	var digitsOf string
	var cardFrom, ibanFrom int
	digitsKnown := false
	for i := range e.rules {
		r := &e.rules[i]
		if r.builtin != nil {
			from := 0
			if a := r.builtin.anchor; a == anchorCardPrefix || a == anchorCountryCode {
				if !digitsKnown || len(digitsOf) != len(out) || digitsOf != out {
					cardFrom, ibanFrom = digitWindows(out)
					digitsOf, digitsKnown = out, true
				}
				from = cardFrom
				if a == anchorCountryCode {
					from = ibanFrom
				}
				if from < 0 {
					continue
				}
			}
			out = r.scan(out, from)
			continue
		}
		if r.literal != "" && !strings.Contains(out, r.literal) {
			continue
		}
		if r.re.MatchString(out) {
			out = r.replaceAll(out)
		}
	}
	return out, out != s
}

// replaceAll replaces every (accepted) match in s.
func (r *rule) replaceAll(s string) string {
	if r.builtin == nil || r.builtin.accept == nil {
		return r.re.ReplaceAllString(s, r.replacement)
	}
	accept := r.builtin.accept
	return r.re.ReplaceAllStringFunc(s, func(match string) string {
		if !accept(match) {
			return match
		}
		// Builtins with an accept function have replacements without $ groups.
		return r.replacement
	})
}

// scan applies a builtin rule: the pattern runs only on the windows around its anchors. start
// is where the search for anchors begins: 0, or a position that the scan from 0 reaches
// without a window that can hold a match (digitWindows).
func (r *rule) scan(s string, start int) string {
	b := r.builtin
	// out is nil until the first replacement; a strings.Builder hands its bytes over as the
	// string without copying them again.
	var out *strings.Builder
	copied := 0
	var st anchorState
	for from := start; from < len(s); {
		k := b.anchor.find(s, from, &st)
		if k < 0 {
			break
		}
		start, end, ok := b.window(s, from, k)
		from = end
		if !ok {
			continue
		}
		// One byte of context on either side: outside every match, but \b looks at it.
		cs, ce := max(start-1, 0), min(end+1, len(s))
		seg := s[cs:ce]
		replaced := r.replaceAll(seg)
		if replaced == seg {
			continue
		}
		if out == nil {
			out = new(strings.Builder)
			out.Grow(len(s) + 16)
		}
		out.WriteString(s[copied:start])
		out.WriteString(replaced[start-cs : len(replaced)-(ce-end)])
		copied = end
	}
	if out == nil {
		return s
	}
	out.WriteString(s[copied:])
	return out.String()
}

// Text masks free text (input, output, message content, a comment): a string that is a JSON
// object, array or string is masked inside its decoded values and written back with its
// structure; other text (or JSON that does not parse) is masked as it is. Text longer than
// max_value_bytes is replaced by a size marker.
func (e *Engine) Text(s string) (string, Result) {
	return e.text(s, true)
}

// text is Text; with prefilter=false it decodes every JSON document (the reference for
// jsonMayChange in FuzzTextPrefilter).
func (e *Engine) text(s string, prefilter bool) (string, Result) {
	if e == nil {
		return s, Unchanged
	}
	if e.oversized(len(s)) {
		return SizeMarker(len(s)), Oversized
	}
	if looksLikeJSONDocument(s) {
		if prefilter && !e.jsonMayChange(s) {
			return s, Unchanged
		}
		out, changed, err := jsontext.Rewrite(s, jsonMaskVisitor{e})
		switch {
		case err == nil && changed:
			return out, Masked
		case err == nil:
			return s, Unchanged
		case err == jsontext.ErrTooDeep && json.Valid([]byte(s)):
			// JSON too deep to walk cannot be masked inside: replaced whole.
			return Placeholder, Failed
		}
		// Not JSON after all (perhaps text that starts with many brackets): mask the raw text.
	}
	if out, changed := e.String(s); changed {
		return out, Masked
	}
	return s, Unchanged
}

// JSON masks JSON text held under key (e.g. an encoded metadata value): the value is replaced
// whole when key is a masked key, else its decoded strings, numbers and booleans are masked
// and it is re-encoded. Text that is not valid JSON cannot be masked and becomes the JSON string
// of Placeholder; text longer than max_value_bytes becomes the JSON string of a size marker.
func (e *Engine) JSON(key, text string) (string, Result) {
	if e == nil {
		return text, Unchanged
	}
	if e.IsMaskedKey(key) {
		if text == e.keyReplacementJSON {
			return text, Unchanged
		}
		return e.keyReplacementJSON, Masked
	}
	if e.oversized(len(text)) {
		return string(jsontext.AppendString(nil, SizeMarker(len(text)))), Oversized
	}
	out, changed, err := jsontext.Rewrite(text, jsonMaskVisitor{e})
	switch {
	case err != nil:
		if text == e.placeholderJSON {
			return text, Unchanged
		}
		return e.placeholderJSON, Failed
	case changed:
		return out, Masked
	default:
		return text, Unchanged
	}
}

// jsonMayChange tells whether masking the JSON document s (or the text s, when it does not
// parse) may change it, from the raw text, without decoding it: the rules look at each decoded
// string, number and boolean alone, and each of those is a stretch of s, set apart by quotes
// and JSON punctuation that no rule's window contains. A rule that has no window that can hold
// a match in the whole of s has none in any of its stretches either (its windows there are
// parts of its windows in s). Escapes are where decoded text differs from s: \uXXXX can be
// any character (then decoding decides); every other escape decodes to a character that
// splits windows as its backslash does in s, except white space and '/' for bearer_token (then
// the word bearer alone counts) and for user rules (then decoding decides). Masked keys are
// found by decoding, and documents nested too deeply to walk are replaced whole.
func (e *Engine) jsonMayChange(s string) bool {
	if len(e.keys) > 0 || strings.Count(s, "[")+strings.Count(s, "{") > jsontext.MaxDepth {
		return true
	}
	escaped := strings.IndexByte(s, '\\') >= 0
	if escaped && strings.Contains(s, `\u`) {
		return true
	}
	digitsKnown := false
	var cardFrom, ibanFrom int
	for i := range e.rules {
		r := &e.rules[i]
		switch {
		case r.builtin == nil:
			if escaped || r.literal == "" || strings.Contains(s, r.literal) {
				return true
			}
		case r.builtin.anchor == anchorCardPrefix || r.builtin.anchor == anchorCountryCode:
			if !digitsKnown {
				cardFrom, ibanFrom = digitWindows(s)
				digitsKnown = true
			}
			if (r.builtin.anchor == anchorCardPrefix && cardFrom >= 0) || (r.builtin.anchor == anchorCountryCode && ibanFrom >= 0) {
				return true
			}
		case r.builtin.anchor == anchorBearerWord && escaped:
			var st anchorState
			if anchorBearer(s, 0, &st) >= 0 {
				return true
			}
		default:
			if r.hasWindow(s) {
				return true
			}
		}
	}
	return false
}

// hasWindow tells whether a builtin rule finds a window that can hold a match in s.
func (r *rule) hasWindow(s string) bool {
	b := r.builtin
	var st anchorState
	for from := 0; from < len(s); {
		k := b.anchor.find(s, from, &st)
		if k < 0 {
			return false
		}
		_, end, ok := b.window(s, from, k)
		if ok {
			return true
		}
		from = end
	}
	return false
}

// looksLikeJSONDocument tells whether s starts like a JSON object, array or string.
func looksLikeJSONDocument(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[', '"':
			return true
		default:
			return false
		}
	}
	return false
}

// jsonMaskVisitor masks the values of a JSON document.
type jsonMaskVisitor struct{ e *Engine }

func (v jsonMaskVisitor) KeyedValue(key string) (string, bool) {
	if v.e.IsMaskedKey(key) {
		return v.e.keyReplacementJSON, true
	}
	return "", false
}

// Scalar hands strings to the rules as their decoded text and numbers and booleans as their
// literal text; a changed number or boolean becomes a JSON string.
func (v jsonMaskVisitor) Scalar(_ byte, text string) (string, bool) {
	return v.e.String(text)
}

func (e *Engine) oversized(n int) bool { return e.maxValueBytes > 0 && n > e.maxValueBytes }

// SizeMarker is the text that replaces a value of n bytes above max_value_bytes.
func SizeMarker(n int) string {
	const unit = 1024
	switch {
	case n < unit:
		return fmt.Sprintf("[svc: value removed, %d B]", n)
	case n < unit*unit:
		return fmt.Sprintf("[svc: value removed, %.1f KiB]", float64(n)/unit)
	case n < unit*unit*unit:
		return fmt.Sprintf("[svc: value removed, %.1f MiB]", float64(n)/(unit*unit))
	default:
		return fmt.Sprintf("[svc: value removed, %.1f GiB]", float64(n)/(unit*unit*unit))
	}
}
