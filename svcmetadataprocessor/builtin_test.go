package svcmetadataprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuiltinRules(t *testing.T) {
	tests := []struct {
		rule, in, want string
	}{
		{"email", "write to jane.doe+llm@mail.example.co.uk today", "write to [EMAIL] today"},
		{"email", "a@b.io,c_d@e-f.org", "[EMAIL],[EMAIL]"},
		{"email", "not an email: a@b, @handle, x@localhost", "not an email: a@b, @handle, x@localhost"},
		{"card_number", "visa 4111111111111111 end", "visa [CARD] end"},
		{"card_number", "grouped 4111 1111 1111 1111 and 5555-5555-5555-4444", "grouped [CARD] and [CARD]"},
		{"card_number", "amex 378282246310005", "amex [CARD]"},
		{"card_number", "fails Luhn 4111111111111112", "fails Luhn 4111111111111112"},
		{"card_number", "timestamp 1700000000000 and order 12345678901234", "timestamp 1700000000000 and order 12345678901234"},
		{"card_number", "glued x4111111111111111 or 41111111111111111111", "glued x4111111111111111 or 41111111111111111111"},
		{"api_key", "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx", "OPENAI_API_KEY=[API_KEY]"},
		{"api_key", "anthropic sk-ant-api03-abcdefghijklmnopqrstuv", "anthropic [API_KEY]"},
		{"api_key", "aws AKIAIOSFODNN7EXAMPLE ok", "aws [API_KEY] ok"},
		{"api_key", "gh ghp_abcdefghijklmnopqrstuvwxyz0123456789", "gh [API_KEY]"},
		{"api_key", "google AIzaSyA-abcdefghijklmnopqrstuvwxyz01234", "google [API_KEY]"},
		{"api_key", "slack xoxb-1234567890-abcdef", "slack [API_KEY]"},
		{"api_key", "stripe sk_live_abcdefghijklmnop1234", "stripe [API_KEY]"},
		{"api_key", "words like task-list or risk-based stay", "words like task-list or risk-based stay"},
		{"bearer_token", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc", "Authorization: Bearer [TOKEN]"},
		{"bearer_token", "authorization: bEaReR abcdefgh12345", "authorization: bEaReR [TOKEN]"},
		{"bearer_token", "the bearer of news", "the bearer of news"},
	}
	for _, tt := range tests {
		t.Run(tt.rule+"/"+tt.in, func(t *testing.T) {
			m, err := newMasker(MaskingConfig{BuiltinRules: []string{tt.rule}})
			require.NoError(t, err)
			got, changed := m.maskString(tt.in)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.want != tt.in, changed)
			// Masked text is masked already.
			again, changedAgain := m.maskString(got)
			assert.Equal(t, got, again)
			assert.False(t, changedAgain)
		})
	}
}

// windowSamples hold matches of every builtin rule in awkward places: at the edges, glued to
// letters, next to each other, separated by one byte, inside JSON and non-ASCII text.
var windowSamples = []string{
	"jane@example.com", "a@b.io@c.io", "x a@b.io,c@d.io;e@f.gh", "é@ü.de a@b.io", "@@a@b.cc@@",
	"4111111111111111", "4111 1111 1111 1111", "x4111111111111111", "4111111111111111x", "4111111111111111 5555555555554444",
	"4111111111111111-5555555555554444", "a 4111-1111-1111-1111 é", "é4111111111111111é", "41111111111111111111",
	"sk-proj-abcdefghijklmnopqrstuvwx", "xsk-abcdefghijklmnopqrstuvwxyz", "-sk-abcdefghijklmnopqrstuvwxyz-",
	"AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLEXYZ", "ghs_abcdefghijklmnopqrstuvwxyz0123456789",
	"github_pat_abcdefghijklmnopqrstuvwxyz", "glpat-abcdefghijklmnopqrstu", "xoxp-1234567890",
	"AIzaSyA-abcdefghijklmnopqrstuvwxyz01234", "rk_test_abcdefghijklmnop", "Bearer abcdefghijk", "BEARER abcdefghijk",
	`{"k":"sk-abcdefghijklmnopqrstuvwxyz","m":"a@b.io","c":4111111111111111}`,
}

// A builtin rule restricted to its windows gives exactly what its expression gives on the
// whole text; its prefilter never hides a match.
func TestBuiltinRulesWindowsAreExact(t *testing.T) {
	for name := range builtinRules {
		m, err := newMasker(MaskingConfig{BuiltinRules: []string{name}})
		require.NoError(t, err)
		rule := &m.rules[0]
		for _, s := range windowSamples {
			got, _ := m.maskString(s)
			assert.Equal(t, rule.replaceAll(s), got, "%s on %q", name, s)
			if rule.mayMatch != nil && rule.re.MatchString(s) {
				assert.True(t, rule.mayMatch(s), "%s: prefilter rejects %q", name, s)
			}
		}
	}
}

func TestLuhn(t *testing.T) {
	assert.True(t, luhnValid("4111111111111111"))
	assert.True(t, luhnValid("4111-1111-1111-1111"))
	assert.True(t, luhnValid("378282246310005"))
	assert.False(t, luhnValid("4111111111111112"))
	assert.False(t, luhnValid("0000000000"), "fewer than 13 digits")
}
