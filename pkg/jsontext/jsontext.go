// Package jsontext reads and rewrites JSON text in memory without decoding it into values: the
// masking engine rewrites only the strings it changes, and svcmetadata reads the members of
// metadata objects with it. It also writes JSON strings the way encoding/json does.
package jsontext // import "github.com/svc/svc-collector/pkg/jsontext"

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A small JSON reader over text that is already in memory. It exists so that masking can walk
// a JSON document, look at every string, number and boolean as its decoded value, and rewrite
// only the pieces that change: a document without matches is read without allocating and comes
// out byte for byte as it came in.

var (
	ErrSyntax  = errors.New("invalid JSON")
	ErrTooDeep = errors.New("JSON nested too deeply")
)

// MaxDepth bounds recursion into objects and arrays; deeper documents cannot be processed.
const MaxDepth = 128

// Visitor receives the members and scalars of a document.
type Visitor interface {
	// keyedValue is called for every object member before its value is read; replace=true
	// replaces the whole value by the JSON text replacement (the reader then skips the value).
	KeyedValue(key string) (replacement string, replace bool)
	// scalar is called for strings (decoded), numbers (their literal text) and booleans;
	// replace=true replaces the value by the JSON string of value.
	Scalar(kind byte, text string) (value string, replace bool)
}

const (
	KindString = 's'
	KindNumber = 'n'
	KindBool   = 'b'
)

// jsonRewriter reads src and collects replacements.
type jsonRewriter struct {
	src     string
	pos     int
	visitor Visitor
	out     []byte // nil until the first replacement
	copied  int    // src[:copied] is already in out
}

// Rewrite reads the JSON document src, lets v replace values, and returns the rewritten
// text and whether anything changed. It fails with ErrSyntax or ErrTooDeep.
func Rewrite(src string, v Visitor) (string, bool, error) {
	w := jsonRewriter{src: src, visitor: v}
	w.skipSpace()
	if err := w.value(0); err != nil {
		return "", false, err
	}
	w.skipSpace()
	if w.pos != len(src) {
		return "", false, ErrSyntax
	}
	if w.out == nil {
		return src, false, nil
	}
	w.out = append(w.out, src[w.copied:]...)
	return string(w.out), true, nil
}

// replace replaces src[start:end] by the JSON text text.
func (w *jsonRewriter) replace(start, end int, text string) {
	if w.src[start:end] == text {
		return
	}
	w.copyUpTo(start, len(text))
	w.out = append(w.out, text...)
	w.copied = end
}

// replaceWithString replaces src[start:end] by the JSON string of value.
func (w *jsonRewriter) replaceWithString(start, end int, value string) {
	w.copyUpTo(start, len(value)+2)
	w.out = AppendString(w.out, value)
	w.copied = end
}

func (w *jsonRewriter) copyUpTo(start, extra int) {
	if w.out == nil {
		w.out = make([]byte, 0, len(w.src)+extra+16)
	}
	w.out = append(w.out, w.src[w.copied:start]...)
}

func (w *jsonRewriter) skipSpace() {
	for w.pos < len(w.src) {
		switch w.src[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

func (w *jsonRewriter) value(depth int) error {
	if w.pos >= len(w.src) {
		return ErrSyntax
	}
	start := w.pos
	switch c := w.src[w.pos]; {
	case c == '{':
		return w.object(depth + 1)
	case c == '[':
		return w.array(depth + 1)
	case c == '"':
		s, err := w.str()
		if err != nil {
			return err
		}
		if value, ok := w.visitor.Scalar(KindString, s); ok {
			w.replaceWithString(start, w.pos, value)
		}
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		if err := w.number(); err != nil {
			return err
		}
		if value, ok := w.visitor.Scalar(KindNumber, w.src[start:w.pos]); ok {
			w.replaceWithString(start, w.pos, value)
		}
		return nil
	case c == 't':
		return w.boolean("true", start)
	case c == 'f':
		return w.boolean("false", start)
	case c == 'n':
		if !strings.HasPrefix(w.src[w.pos:], "null") {
			return ErrSyntax
		}
		w.pos += 4
		return nil
	default:
		return ErrSyntax
	}
}

func (w *jsonRewriter) boolean(lit string, start int) error {
	if !strings.HasPrefix(w.src[w.pos:], lit) {
		return ErrSyntax
	}
	w.pos += len(lit)
	if value, ok := w.visitor.Scalar(KindBool, lit); ok {
		w.replaceWithString(start, w.pos, value)
	}
	return nil
}

func (w *jsonRewriter) object(depth int) error {
	if depth > MaxDepth {
		return ErrTooDeep
	}
	w.pos++ // '{'
	w.skipSpace()
	if w.pos < len(w.src) && w.src[w.pos] == '}' {
		w.pos++
		return nil
	}
	for {
		if w.pos >= len(w.src) || w.src[w.pos] != '"' {
			return ErrSyntax
		}
		key, err := w.str()
		if err != nil {
			return err
		}
		w.skipSpace()
		if w.pos >= len(w.src) || w.src[w.pos] != ':' {
			return ErrSyntax
		}
		w.pos++
		w.skipSpace()
		if repl, ok := w.visitor.KeyedValue(key); ok {
			start := w.pos
			// The value is read (and checked) with a visitor that changes nothing.
			inner := jsonRewriter{src: w.src, pos: w.pos, visitor: noopVisitor{}}
			if err := inner.value(depth); err != nil {
				return err
			}
			w.pos = inner.pos
			w.replace(start, w.pos, repl)
		} else if err := w.value(depth); err != nil {
			return err
		}
		w.skipSpace()
		if w.pos >= len(w.src) {
			return ErrSyntax
		}
		switch w.src[w.pos] {
		case ',':
			w.pos++
			w.skipSpace()
		case '}':
			w.pos++
			return nil
		default:
			return ErrSyntax
		}
	}
}

func (w *jsonRewriter) array(depth int) error {
	if depth > MaxDepth {
		return ErrTooDeep
	}
	w.pos++ // '['
	w.skipSpace()
	if w.pos < len(w.src) && w.src[w.pos] == ']' {
		w.pos++
		return nil
	}
	for {
		if err := w.value(depth); err != nil {
			return err
		}
		w.skipSpace()
		if w.pos >= len(w.src) {
			return ErrSyntax
		}
		switch w.src[w.pos] {
		case ',':
			w.pos++
			w.skipSpace()
		case ']':
			w.pos++
			return nil
		default:
			return ErrSyntax
		}
	}
}

// str reads a string token at w.pos and returns its decoded value. Strings without escapes
// are returned as a slice of src.
func (w *jsonRewriter) str() (string, error) {
	start := w.pos
	w.pos++ // opening quote
	escaped := false
	for {
		w.pos = skipJSONStringPlain(w.src, w.pos)
		if w.pos >= len(w.src) {
			return "", ErrSyntax
		}
		c := w.src[w.pos]
		switch {
		case c == '"':
			w.pos++
			if !escaped {
				return w.src[start+1 : w.pos-1], nil
			}
			return decodeEscapedString(w.src[start:w.pos])
		case c == '\\':
			escaped = true
			w.pos += 2
		case c < 0x20:
			return "", ErrSyntax
		default:
			w.pos++
		}
	}
}

// decodeEscapedString decodes a quoted JSON string with escapes (the rare path).
func decodeEscapedString(quoted string) (string, error) {
	var s string
	if err := json.Unmarshal([]byte(quoted), &s); err != nil {
		return "", ErrSyntax
	}
	return s, nil
}

func (w *jsonRewriter) number() error {
	src, i := w.src, w.pos
	if i < len(src) && src[i] == '-' {
		i++
	}
	switch {
	case i < len(src) && src[i] == '0':
		i++
	case i < len(src) && src[i] >= '1' && src[i] <= '9':
		i = skipDigits(src, i)
	default:
		return ErrSyntax
	}
	if i < len(src) && src[i] == '.' {
		j := skipDigits(src, i+1)
		if j == i+1 {
			return ErrSyntax
		}
		i = j
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		j := skipDigits(src, i)
		if j == i {
			return ErrSyntax
		}
		i = j
	}
	w.pos = i
	return nil
}

func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

type noopVisitor struct{}

func (noopVisitor) KeyedValue(string) (string, bool)   { return "", false }
func (noopVisitor) Scalar(byte, string) (string, bool) { return "", false }

// ObjectMembers calls fn with each member of the JSON object src: its decoded key and the
// compact JSON text of its value, in document order. It fails when src is not a JSON object.
func ObjectMembers(src string, fn func(key, valueJSON string)) error {
	w := jsonRewriter{src: src, visitor: noopVisitor{}}
	w.skipSpace()
	if w.pos >= len(src) || src[w.pos] != '{' {
		return ErrSyntax
	}
	// Validate the whole document first so that nothing is emitted for a broken one.
	if err := w.value(0); err != nil {
		return err
	}
	w.skipSpace()
	if w.pos != len(src) {
		return ErrSyntax
	}
	w = jsonRewriter{src: src, visitor: noopVisitor{}}
	w.skipSpace()
	w.pos++ // '{'
	for {
		w.skipSpace()
		if src[w.pos] == '}' {
			return nil
		}
		key, _ := w.str()
		w.skipSpace()
		w.pos++ // ':'
		w.skipSpace()
		start := w.pos
		_ = w.value(1)
		fn(key, Compact(src[start:w.pos]))
		w.skipSpace()
		if src[w.pos] == ',' {
			w.pos++
		}
	}
}

// Compact removes insignificant whitespace from valid JSON text.
func Compact(s string) string {
	if !strings.ContainsAny(s, " \t\r\n") {
		return s
	}
	b := make([]byte, 0, len(s))
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString:
			b = append(b, c)
			if c == '\\' && i+1 < len(s) {
				i++
				b = append(b, s[i])
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
			b = append(b, c)
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

const hexDigits = "0123456789abcdef"

// AppendString writes s as a JSON string. Invalid UTF-8 becomes U+FFFD, as in encoding/json;
// U+2028 and U+2029 are escaped so the text is also valid JavaScript.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if j := skipJSONSafeASCII(s, i); j > i {
			i = j
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendFloat writes a finite float in the shortest form that reads back exactly, in exponent
// form only for very small or very large magnitudes, as JavaScript prints numbers (ES6
// Number.prototype.toString): the JSON text of a double, and the text masking rules see for it.
func AppendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 -> 1e-7, as JavaScript writes it.
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
