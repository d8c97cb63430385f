package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// MaskPlaceholder replaces, whole, a value that masking cannot process (encoded metadata that is
// not valid JSON, or nesting deeper than 128 levels), so that it is never passed on unmasked.
const MaskPlaceholder = "[svc: value removed, masking failed]"

// maskRule is a compiled rule.
type maskRule struct {
	name        string
	re          *regexp.Regexp
	replacement string
	// mayMatch is a cheap test that must be true whenever re can match; it lets the rule skip
	// text without running the regular expression (nil: always run).
	mayMatch func(s string) bool
	// accept, when set, vets each match; a rejected match is left as it is (e.g. the Luhn check).
	accept func(match string) bool
	// window, when set, restricts the expression to the runs of text that can hold a match.
	window *window
}

// replaceAll replaces every (accepted) match in s.
func (r *maskRule) replaceAll(s string) string {
	if r.accept == nil {
		return r.re.ReplaceAllString(s, r.replacement)
	}
	return r.re.ReplaceAllStringFunc(s, func(match string) string {
		if r.accept(match) {
			return r.replacement
		}
		return match
	})
}

// masker applies the configured rules and masked keys. It is safe for concurrent use.
type masker struct {
	rules          []maskRule
	keys           []string
	keyReplacement string
	// keyReplacementJSON and placeholderJSON are the JSON texts written into JSON documents.
	keyReplacementJSON string
	placeholderJSON    string
	// extraNames and extraPrefixes are masking.extra_attributes.
	extraNames    map[string]struct{}
	extraPrefixes []string
}

// newMasker compiles the masking configuration; it returns nil when masking is off.
func newMasker(cfg MaskingConfig) (*masker, error) {
	if len(cfg.BuiltinRules) == 0 && len(cfg.Rules) == 0 && len(cfg.Keys) == 0 {
		return nil, nil
	}
	m := &masker{keys: cfg.Keys, keyReplacement: cfg.KeyReplacement}
	for _, name := range cfg.ExtraAttributes {
		if prefix, ok := strings.CutSuffix(name, "*"); ok {
			m.extraPrefixes = append(m.extraPrefixes, prefix)
			continue
		}
		if m.extraNames == nil {
			m.extraNames = map[string]struct{}{}
		}
		m.extraNames[name] = struct{}{}
	}
	for _, name := range cfg.BuiltinRules {
		b, ok := builtinRules[name]
		if !ok {
			return nil, fmt.Errorf("unknown builtin masking rule %q", name)
		}
		m.rules = append(m.rules, maskRule{
			name:        name,
			re:          regexp.MustCompile(b.Pattern),
			replacement: b.Replacement,
			mayMatch:    b.mayMatch,
			accept:      b.accept,
			window:      b.window,
		})
	}
	for i, r := range cfg.Rules {
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return nil, fmt.Errorf("masking rule %d %s: %w", i, r.Name, err)
		}
		replacement := r.Replacement
		if replacement == "" {
			replacement = defaultReplacement
		}
		m.rules = append(m.rules, maskRule{name: r.Name, re: re, replacement: replacement})
	}
	m.keyReplacementJSON = string(appendJSONString(nil, m.keyReplacement))
	m.placeholderJSON = string(appendJSONString(nil, MaskPlaceholder))
	return m, nil
}

// maskResult says what masking did to a value.
type maskResult uint8

const (
	unchanged maskResult = iota
	masked
	placeholder // the value could not be processed and was replaced whole
)

// isExtraAttribute reports whether masking.extra_attributes names the attribute.
func (m *masker) isExtraAttribute(name string) bool {
	if _, ok := m.extraNames[name]; ok {
		return true
	}
	for _, p := range m.extraPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func (m *masker) isMaskedKey(key string) bool {
	for _, k := range m.keys {
		if strings.EqualFold(k, key) {
			return true
		}
	}
	return false
}

// maskString applies every rule, in order, to s.
func (m *masker) maskString(s string) (string, bool) {
	out := s
	for i := range m.rules {
		r := &m.rules[i]
		if r.mayMatch != nil && !r.mayMatch(out) {
			continue
		}
		if r.window != nil {
			out, _ = replaceWindowed(out, r)
			continue
		}
		if r.re.MatchString(out) {
			out = r.replaceAll(out)
		}
	}
	return out, out != s
}

// maskText masks a free-text attribute (input, output, GenAI content). Text that is a JSON
// object, array or string is masked inside its decoded strings and scalars and written back with
// its structure; other text is masked as it is.
func (m *masker) maskText(s string) (string, maskResult) {
	if looksLikeJSONDocument(s) {
		out, changed, err := rewriteJSON(s, jsonMaskVisitor{m})
		switch {
		case err == nil && changed:
			return out, masked
		case err == nil:
			return s, unchanged
		case err == errJSONTooDeep:
			return MaskPlaceholder, placeholder
		}
		// Not JSON after all: mask the raw text.
	}
	if out, changed := m.maskString(s); changed {
		return out, masked
	}
	return s, unchanged
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

// maskMetadataJSON masks the JSON text of an observation metadata value under key: the decoded
// value is masked (whole when key is a masked key) and re-encoded. Text that is not valid JSON
// cannot be decoded and therefore cannot be masked: it is replaced by the placeholder.
func (m *masker) maskMetadataJSON(key, text string) (string, maskResult) {
	if m.isMaskedKey(key) {
		if text == m.keyReplacementJSON {
			return text, unchanged
		}
		return m.keyReplacementJSON, masked
	}
	out, changed, err := rewriteJSON(text, jsonMaskVisitor{m})
	switch {
	case err != nil:
		if text == m.placeholderJSON {
			return text, unchanged
		}
		return m.placeholderJSON, placeholder
	case changed:
		return out, masked
	default:
		return text, unchanged
	}
}

// maskWhole replaces a raw value under a masked key by key_replacement (a string), whatever
// its type.
func (m *masker) maskWhole(v pcommon.Value) maskResult {
	if v.Type() == pcommon.ValueTypeStr && v.Str() == m.keyReplacement {
		return unchanged
	}
	v.SetStr(m.keyReplacement)
	return masked
}

// jsonMaskVisitor masks the values of a JSON document.
type jsonMaskVisitor struct{ m *masker }

func (v jsonMaskVisitor) keyedValue(key string) (string, bool) {
	if v.m.isMaskedKey(key) {
		return v.m.keyReplacementJSON, true
	}
	return "", false
}

// scalar hands strings to the rules as their decoded text and numbers and booleans as their
// literal text; a changed number or boolean becomes a JSON string.
func (v jsonMaskVisitor) scalar(_ byte, text string) (string, bool) {
	return v.m.maskString(text)
}

// maskValue masks a structured attribute value (a map or slice, or a scalar of another type than
// string) in place: strings, and the decimal text of numbers and booleans, go through the rules;
// values under masked keys are replaced whole. A number or boolean that a rule changes becomes
// the masked string.
func (m *masker) maskValue(v pcommon.Value) maskResult {
	res, tooDeep := m.maskValueAt(v, 0)
	if tooDeep {
		v.SetStr(MaskPlaceholder)
		return placeholder
	}
	return res
}

func (m *masker) maskValueAt(v pcommon.Value, depth int) (maskResult, bool) {
	res := unchanged
	maskScalar := func(text string) {
		if out, changed := m.maskString(text); changed {
			v.SetStr(out)
			res = masked
		}
	}
	switch v.Type() {
	case pcommon.ValueTypeStr:
		maskScalar(v.Str())
	case pcommon.ValueTypeInt:
		maskScalar(strconv.FormatInt(v.Int(), 10))
	case pcommon.ValueTypeDouble:
		maskScalar(string(appendFloatText(nil, v.Double())))
	case pcommon.ValueTypeBool:
		maskScalar(strconv.FormatBool(v.Bool()))
	case pcommon.ValueTypeBytes:
		maskScalar(string(v.Bytes().AsRaw()))
	case pcommon.ValueTypeMap:
		if depth >= maxJSONDepth {
			return unchanged, true
		}
		for k, mv := range v.Map().All() {
			if m.isMaskedKey(k) {
				res = max(res, m.maskWhole(mv))
				continue
			}
			r, tooDeep := m.maskValueAt(mv, depth+1)
			if tooDeep {
				return unchanged, true
			}
			res = max(res, r)
		}
	case pcommon.ValueTypeSlice:
		if depth >= maxJSONDepth {
			return unchanged, true
		}
		s := v.Slice()
		for i := 0; i < s.Len(); i++ {
			r, tooDeep := m.maskValueAt(s.At(i), depth+1)
			if tooDeep {
				return unchanged, true
			}
			res = max(res, r)
		}
	}
	return res, false
}
