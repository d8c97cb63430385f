package masking // import "github.com/svc/svc-collector/pkg/masking"

import (
	"regexp"
	"strings"
)

// builtinRule is a ready rule a configuration switches on by name (masking.builtin_rules). Its
// pattern and accept function define what it masks (the reference); anchor and window only make
// finding it fast and must never change the result.
type builtinRule struct {
	pattern     string
	replacement string
	// accept, when set, vets each match; a rejected match is left as it is (e.g. Luhn).
	accept func(match string) bool
	// anchor says how to find the next index of a byte that every match contains (filtered
	// by a cheap test of its neighbours); see find.
	anchor anchorKind
	// window returns the stretch s[start:end] around anchor k that holds every match near k;
	// ok=false when no match can be there. The scan continues at end either way.
	window func(s string, from, k int) (start, end int, ok bool)
}

// The builtin rules. The README lists them with their patterns; keep both in sync.
var builtinRules = map[string]*builtinRule{
	// E-mail addresses. The top-level domain ends at a word boundary, so that an address run
	// into other text (example.com4111...) is not cut mid-word, which would leave a new word
	// boundary for a later rule and make masking twice differ from masking once.
	"email": {
		pattern:     `[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b`,
		replacement: "[EMAIL]",
		anchor:      anchorAt,
		window:      runWindow(newByteSet("A-Z", "a-z", "0-9", "._%+-@"), len("a@b.co"), nil),
	},
	// Payment card numbers of the major networks (Visa, Mastercard, American Express, Discover,
	// Diners Club, JCB), 13 to 19 digits, optionally grouped by spaces or dashes, that pass the
	// Luhn check. Integers reach the rule as their decimal text.
	"card_number": {
		pattern:     `\b(?:4\d{3}|5[1-5]\d{2}|2[2-7]\d{2}|3[0-9]\d{2}|6(?:011|5\d{2}))(?:[ -]?\d){9,15}\b`,
		replacement: "[CARD]",
		accept:      luhnValid,
		anchor:      anchorCardPrefix,
		window:      cardRunWindow,
	},
	// API keys and tokens: OpenAI / Anthropic (sk-, sk-proj-, sk-ant-; the part after the
	// prefix must hold a digit and a letter, as generated keys do and hyphenated words do
	// not), AWS access key ids (AKIA, ASIA), GitHub (ghp_, gho_, ghu_,
	// ghs_, ghr_, github_pat_), GitLab (glpat-), Slack (xoxb-, xoxp-, ...), Google (AIza),
	// Stripe (sk_/rk_/pk_ live and test), JSON Web Tokens (eyJ... . eyJ... . signature).
	"api_key": {
		pattern: `\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}` +
			`|(?:AKIA|ASIA)[0-9A-Z]{16}\b` +
			`|gh[pousr]_[A-Za-z0-9]{36,}` +
			`|github_pat_[A-Za-z0-9_]{22,}` +
			`|glpat-[A-Za-z0-9_-]{20,}` +
			`|xox[abposr]-[A-Za-z0-9-]{10,}` +
			`|AIza[0-9A-Za-z_-]{35}` +
			`|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}` +
			`|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})`,
		replacement: "[API_KEY]",
		accept:      apiKeyAccept,
		anchor:      anchorKeyPrefix,
		window:      runWindow(newByteSet("A-Z", "a-z", "0-9", "_.-"), len("xoxb-")+10, nil),
	},
	// Bearer tokens in HTTP Authorization values: the scheme is kept, the token masked.
	"bearer_token": {
		pattern:     `(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}`,
		replacement: "$1 [TOKEN]",
		anchor:      anchorBearerWord,
		window:      bearerWindow,
	},
	// International phone numbers: a '+', a country code, and groups of digits separated by
	// single spaces, dashes or dots (or a bracketed area code), 9 to 15 digits in all
	// (E.164). Numbers without the '+' are not masked: written that way they cannot be told
	// from order numbers, amounts and dates.
	"phone": {
		pattern:     `\+[1-9][0-9]{0,2}(?:[ .-]?(?:\([0-9]{1,4}\)|[0-9]{1,4})){2,6}\b`,
		replacement: "[PHONE]",
		accept:      phoneDigits,
		anchor:      anchorPlus,
		window:      runWindow(newByteSet("0-9", " .()+-"), 10, hasAtLeastDigits(9)),
	},
	// International bank account numbers, compact or in groups of four, whose country code
	// and length are those of the IBAN registry and whose check digits pass mod-97.
	"iban": {
		pattern:     `\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b`,
		replacement: "[IBAN]",
		accept:      ibanValid,
		anchor:      anchorCountryCode,
		window:      ibanRunWindow,
	},
}

// The windows of card_number and iban, also used by digitWindows.
var (
	cardRunWindow = runWindow(newByteSet("0-9", " -"), 13, hasAtLeastDigits(13))
	ibanRunWindow = runWindow(newByteSet("A-Z", "0-9", " "), 15, nil)
)

// compiledBuiltins holds each builtin's compiled pattern, built once.
var compiledBuiltins = func() map[string]*regexp.Regexp {
	m := make(map[string]*regexp.Regexp, len(builtinRules))
	for name, r := range builtinRules {
		m[name] = regexp.MustCompile(r.pattern)
	}
	return m
}()

// byteSet is a set of bytes.
type byteSet [256]bool

func newByteSet(ranges ...string) *byteSet {
	var s byteSet
	for _, r := range ranges {
		if len(r) == 3 && r[1] == '-' {
			for c := int(r[0]); c <= int(r[2]); c++ {
				s[c] = true
			}
			continue
		}
		for i := 0; i < len(r); i++ {
			s[r[i]] = true
		}
	}
	return &s
}

// runWindow returns a window that is the maximal run of bytes of set around the anchor. It is
// exact for rules whose matches consist only of bytes of set: every match lies inside one such
// run, and the engine runs the pattern on the run with one byte of context on either side
// (bytes outside the set, which no match includes, but which \b looks at). Runs shorter than
// the shortest match, or failing qualifies, cannot hold a match.
func runWindow(set *byteSet, minLen int, qualifies func(string) bool) func(string, int, int) (int, int, bool) {
	return func(s string, from, k int) (int, int, bool) {
		start, end := k, k+1
		for start > from && set[s[start-1]] {
			start--
		}
		for end < len(s) && set[s[end]] {
			end++
		}
		ok := end-start >= minLen && (qualifies == nil || qualifies(s[start:end]))
		return start, end, ok
	}
}

type anchorKind uint8

const (
	anchorAt          anchorKind = iota // '@'
	anchorCardPrefix                    // 4 digits in a row
	anchorKeyPrefix                     // a byte of an API key prefix
	anchorBearerWord                    // "bearer"
	anchorPlus                          // '+' and a digit
	anchorCountryCode                   // two capitals and a digit
)

// find returns the next anchor at or after from, or -1. st is fresh for each pass over a text.
// (A switch rather than a function value, so that st stays on the stack.)
func (a anchorKind) find(s string, from int, st *anchorState) int {
	switch a {
	case anchorAt:
		if k := strings.IndexByte(s[from:], '@'); k >= 0 {
			return from + k
		}
		return -1
	case anchorCardPrefix:
		return anchorCard(s, from)
	case anchorKeyPrefix:
		return anchorAPIKey(s, from, st)
	case anchorBearerWord:
		return anchorBearer(s, from, st)
	case anchorPlus:
		return anchorPhone(s, from)
	default:
		return anchorIBAN(s, from)
	}
}

// anchorCard finds 4 digits in a row, at the start of a run of digits (every card match starts
// with its 4-digit network prefix, and the run can only start there or earlier).
func anchorCard(s string, from int) int {
	for i := from; ; {
		i = anchorDigit(s, i)
		if i < 0 {
			return -1
		}
		j := i + 1
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j-i >= 4 {
			return i
		}
		i = j
	}
}

// anchorDigit finds the next ASCII digit.
func anchorDigit(s string, from int) int {
	for i := skipNonDigits(s, from); i < len(s); i++ {
		if isDigit(s[i]) {
			return i
		}
	}
	return -1
}

func isDigit(c byte) bool { return c-'0' < 10 }
func isUpper(c byte) bool { return c-'A' < 26 }
func isLower(c byte) bool { return c-'a' < 26 }

// anchorPhone finds a '+' followed by a digit 1-9 (the start of every phone match).
func anchorPhone(s string, from int) int {
	for from < len(s) {
		k := strings.IndexByte(s[from:], '+')
		if k < 0 {
			return -1
		}
		k += from
		if k+1 < len(s) && s[k+1]-'1' < 9 {
			return k
		}
		from = k + 1
	}
	return -1
}

// anchorIBAN finds a digit preceded by two capital letters (the country code and first check
// digit of every IBAN match).
func anchorIBAN(s string, from int) int {
	for i := from; ; {
		i = anchorDigit(s, i)
		if i < 0 {
			return -1
		}
		if i >= 2 && isUpper(s[i-1]) && isUpper(s[i-2]) {
			return i
		}
		// The rest of this run of digits is preceded by a digit.
		for i++; i < len(s) && isDigit(s[i]); i++ {
		}
	}
}

// anchorAPIKey finds a byte of a key prefix: the '-' or '_' after sk, rk, pk, gh?, github,
// glpat, xox?; the 'A' of AKIA, ASIA, AIza; the 'J' of eyJ. Every api_key match has one.
func anchorAPIKey(s string, from int, st *anchorState) int {
	st.init("-_AJ")
	for {
		k := st.next(s, from)
		if k < 0 || apiKeyPrefixAt(s, k) {
			return k
		}
		from = k + 1
	}
}

func apiKeyPrefixAt(s string, i int) bool {
	switch s[i] {
	case '-':
		return endsWith(s, i, "sk") || endsWith(s, i, "glpat") ||
			(i >= 4 && s[i-4:i-1] == "xox")
	case '_':
		return endsWith(s, i, "sk") || endsWith(s, i, "rk") || endsWith(s, i, "pk") ||
			(i >= 3 && s[i-3:i-1] == "gh") || endsWith(s, i, "github")
	case 'A':
		if i+4 > len(s) {
			return false
		}
		switch s[i+1 : i+4] {
		case "KIA", "SIA", "Iza":
			return true
		}
	case 'J':
		return endsWith(s, i, "ey")
	}
	return false
}

// endsWith reports whether s[:i] ends with p.
func endsWith(s string, i int, p string) bool {
	return i >= len(p) && s[i-len(p):i] == p
}

// apiKeyAccept rejects sk- matches whose random part lacks a digit or a letter (hyphenated
// words such as sk-learn-compatible-...).
func apiKeyAccept(m string) bool {
	tail, ok := strings.CutPrefix(m, "sk-")
	if !ok {
		return true
	}
	var digit, letter bool
	for i := 0; i < len(tail); i++ {
		c := tail[i]
		digit = digit || isDigit(c)
		letter = letter || isUpper(c) || isLower(c)
	}
	return digit && letter
}

// anchorBearer finds "bearer" in any letter case.
func anchorBearer(s string, from int, st *anchorState) int {
	st.init("bB")
	for {
		k := st.next(s, from)
		if k < 0 || (k+6 <= len(s) && strings.EqualFold(s[k:k+6], "bearer")) {
			return k
		}
		from = k + 1
	}
}

// isSpace is \s of RE2.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

var bearerTokenSet = newByteSet("A-Z", "a-z", "0-9", "._~+/=-")

// bearerWindow: a match of bearer_token at k is "bearer", all the white space after it and
// the whole run of token bytes after that (the pattern is greedy), so that is the window.
// When the word is not a match there, the scan continues right after its first byte.
func bearerWindow(s string, _ int, k int) (int, int, bool) {
	if k > 0 && isWordByte(s[k-1]) {
		return k, k + 1, false
	}
	end := k + 6
	for end < len(s) && isSpace(s[end]) {
		end++
	}
	if end == k+6 {
		return k, k + 1, false
	}
	// Only now read the token (a token is read at most once: it is matched or shorter than 8).
	tokenStart := end
	for end < len(s) && bearerTokenSet[s[end]] {
		end++
	}
	if end-tokenStart < 8 {
		return k, k + 1, false
	}
	return k, end, true
}

func isWordByte(c byte) bool { return isDigit(c) || isUpper(c) || isLower(c) || c == '_' }

// hasAtLeastDigits returns a test for text holding at least n ASCII digits.
func hasAtLeastDigits(n int) func(string) bool {
	return func(s string) bool {
		count := 0
		for i := 0; i < len(s); i++ {
			if isDigit(s[i]) {
				count++
				if count >= n {
					return true
				}
			}
		}
		return false
	}
}

// anchorState remembers, during one pass over a text, where each anchor byte occurs next, so
// that a rule anchored on several bytes finds them with strings.IndexByte (vector
// instructions) without searching the same stretch twice.
type anchorState struct {
	n    int
	byte [4]byte
	at   [4]int // next index of byte[i] at or after the last search; -1: none left
}

func (st *anchorState) init(bytes string) {
	if st.n != 0 {
		return
	}
	st.n = copy(st.byte[:], bytes)
	for i := range st.n {
		st.at[i] = -2 // not searched yet
	}
}

// next returns the smallest index >= from of any of the bytes, or -1.
func (st *anchorState) next(s string, from int) int {
	best := -1
	for i := 0; i < st.n; i++ {
		at := st.at[i]
		if at == -1 {
			continue
		}
		if at < from {
			k := strings.IndexByte(s[from:], st.byte[i])
			if k < 0 {
				st.at[i] = -1
				continue
			}
			at = from + k
			st.at[i] = at
		}
		if best < 0 || at < best {
			best = at
		}
	}
	return best
}

// digitWindows runs the anchor and window search of card_number and of iban over s in one
// pass over its digits, and returns for each the position from which its scan reaches its
// first window that can hold a match (the scan's from there, so that scanning from it gives
// what scanning from 0 gives), or -1 when s has no such window: then the rule cannot match.
// Both rules would scan every digit; prose, whose numbers are short and rarely follow two
// capitals, has no such window and skips both rules after this one pass.
func digitWindows(s string) (cardFrom, ibanFrom int) {
	cardDone, ibanDone := false, false
	for i := 0; !(cardDone && ibanDone); {
		i = anchorDigit(s, i)
		if i < 0 {
			break
		}
		j := i + 1
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		// A window of either rule ends at a byte that is not a digit, so the digit runs
		// seen from 0 are those anchorIBAN and anchorCard see from the end of a window.
		if !ibanDone && i >= ibanFrom && i >= 2 && isUpper(s[i-1]) && isUpper(s[i-2]) {
			if _, end, ok := ibanRunWindow(s, ibanFrom, i); ok {
				ibanDone = true
			} else {
				ibanFrom = end
			}
		}
		if !cardDone && i >= cardFrom && j-i >= 4 {
			if _, end, ok := cardRunWindow(s, cardFrom, i); ok {
				cardDone = true
			} else {
				cardFrom = end
			}
		}
		i = j
	}
	if !cardDone {
		cardFrom = -1
	}
	if !ibanDone {
		ibanFrom = -1
	}
	return cardFrom, ibanFrom
}
