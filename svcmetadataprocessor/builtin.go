package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"

import "strings"

// builtinRule is a ready masking rule a configuration switches on by name
// (masking.builtin_rules). The README lists them with their patterns.
type builtinRule struct {
	Pattern     string
	Replacement string
	// mayMatch is a cheap necessary condition for Pattern to match (see maskRule.mayMatch).
	mayMatch func(string) bool
	// accept vets each match (see maskRule.accept).
	accept func(string) bool
	// window holds every byte a match can contain (see window).
	window *window
}

var builtinRules = map[string]builtinRule{
	// E-mail addresses.
	"email": {
		Pattern:     `[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`,
		Replacement: "[EMAIL]",
		window:      &window{set: newASCIISet("A-Z", "a-z", "0-9", "._%+-@"), minLen: len("a@b.co"), next: nextByte('@')},
	},
	// Payment card numbers of the major networks (Visa, Mastercard, American Express, Discover,
	// Diners Club, JCB), 13 to 19 digits, optionally grouped by spaces or dashes, that pass the
	// Luhn check. Integers reach the rule as their decimal text, so a card number sent as a
	// number is masked as well.
	"card_number": {
		Pattern:     `\b(?:4\d{3}|5[1-5]\d{2}|2[2-7]\d{2}|3[0-9]\d{2}|6(?:011|5\d{2}))(?:[ -]?\d){9,15}\b`,
		Replacement: "[CARD]",
		mayMatch:    hasAtLeastDigits(13),
		accept:      luhnValid,
		window:      &window{set: newASCIISet("0-9", " -"), minLen: 13, next: nextDigit, qualifies: hasAtLeastDigits(13)},
	},
	// API keys and tokens of common shapes: OpenAI / Anthropic (sk-..., sk-proj-..., sk-ant-...),
	// AWS access key ids (AKIA...), GitHub (ghp_..., gho_..., ghs_..., ghu_..., ghr_...,
	// github_pat_...), GitLab (glpat-...), Slack (xoxb-..., xoxp-..., ...), Google (AIza...),
	// Stripe (sk_live_..., rk_live_..., sk_test_...).
	"api_key": {
		Pattern:     `\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,})`,
		Replacement: "[API_KEY]",
		mayMatch:    containsAPIKeyPrefix,
		window:      &window{set: newASCIISet("A-Z", "a-z", "0-9", "_-"), minLen: len("xoxb-") + 10},
	},
	// Bearer tokens in HTTP Authorization header values: the scheme is kept, the token masked.
	"bearer_token": {
		Pattern:     `(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}`,
		Replacement: "$1 [TOKEN]",
		mayMatch:    func(s string) bool { return containsFoldASCII(s, "bearer") },
	},
}

// hasAtLeastDigits returns a test for text holding at least n ASCII digits.
func hasAtLeastDigits(n int) func(string) bool {
	return func(s string) bool {
		count := 0
		for i := 0; i < len(s); i++ {
			i = skipNonDigits(s, i)
			if i < len(s) && s[i] >= '0' && s[i] <= '9' {
				count++
				if count >= n {
					return true
				}
			}
		}
		return false
	}
}

// luhnValid reports whether the digits of s (spaces and dashes ignored) pass the Luhn checksum.
func luhnValid(s string) bool {
	sum, double, digits := 0, false, 0
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
		digits++
	}
	return digits >= 13 && sum%10 == 0
}

// containsFoldASCII reports whether s contains the lower-case ASCII word, in any letter case.
func containsFoldASCII(s, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		if s[i]|0x20 == word[0] && strings.EqualFold(s[i:i+len(word)], word) {
			return true
		}
	}
	return false
}

// apiKeyPrefixes are literal prefixes one of which every match of the api_key rule starts with.
var apiKeyPrefixes = []string{"sk-", "sk_", "rk_", "AKIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "AIza"}

func containsAPIKeyPrefix(s string) bool {
	for _, p := range apiKeyPrefixes {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
