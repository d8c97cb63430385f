package svcmetadataprocessor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingVisitor records what the reader hands it and replaces nothing.
type recordingVisitor struct {
	keys    []string
	scalars []string
}

func (r *recordingVisitor) keyedValue(key string) (string, bool) {
	r.keys = append(r.keys, key)
	return "", false
}

func (r *recordingVisitor) scalar(kind byte, text string) (string, bool) {
	r.scalars = append(r.scalars, string(kind)+":"+text)
	return "", false
}

func TestRewriteJSONReadsEveryScalar(t *testing.T) {
	src := ` { "a" : [1, -2.5e+3, true, false, null, "x\"y", "\u00e9"], "b": {"c": {}}, "d": [] } `
	v := &recordingVisitor{}
	out, changed, err := rewriteJSON(src, v)
	require.NoError(t, err)
	assert.False(t, changed)
	assert.Equal(t, src, out, "a document without replacements comes out as it came in")
	assert.Equal(t, []string{"a", "b", "c", "d"}, v.keys)
	assert.Equal(t, []string{"n:1", "n:-2.5e+3", "b:true", "b:false", `s:x"y`, "s:é"}, v.scalars)
}

func TestRewriteJSONErrors(t *testing.T) {
	tests := []struct {
		src  string
		want error
	}{
		{"", errJSONSyntax},
		{"   ", errJSONSyntax},
		{"{", errJSONSyntax},
		{`{"a"}`, errJSONSyntax},
		{`{"a":1,}`, errJSONSyntax},
		{`[1,]`, errJSONSyntax},
		{`[1 2]`, errJSONSyntax},
		{`{a:1}`, errJSONSyntax},
		{`"unterminated`, errJSONSyntax},
		{`"bad escape \x"`, errJSONSyntax},
		{"\"control \x01 char\"", errJSONSyntax},
		{`01`, errJSONSyntax},
		{`1.`, errJSONSyntax},
		{`1e`, errJSONSyntax},
		{`-`, errJSONSyntax},
		{`tru`, errJSONSyntax},
		{`nul`, errJSONSyntax},
		{`1 2`, errJSONSyntax},
		{`{} x`, errJSONSyntax},
		{strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1), errJSONTooDeep},
		{strings.Repeat(`{"a":`, maxJSONDepth+1) + "1" + strings.Repeat("}", maxJSONDepth+1), errJSONTooDeep},
	}
	for _, tt := range tests {
		_, _, err := rewriteJSON(tt.src, noopVisitor{})
		assert.ErrorIs(t, err, tt.want, "%q", tt.src)
	}
	deepest := strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth)
	_, _, err := rewriteJSON(deepest, noopVisitor{})
	assert.NoError(t, err, "nesting of exactly maxJSONDepth is accepted")
}

// replaceStrings upper-cases the marker "x" in strings and masks values under key "k".
type replaceStrings struct{}

func (replaceStrings) keyedValue(key string) (string, bool) {
	if key == "k" {
		return `"K"`, true
	}
	return "", false
}

func (replaceStrings) scalar(kind byte, text string) (string, bool) {
	if kind == kindString && text == "x" {
		return "X", true
	}
	return "", false
}

func TestRewriteJSONReplacesOnlyWhatChanges(t *testing.T) {
	out, changed, err := rewriteJSON(`{"a": "x", "k": {"deep": [1, "x"]}, "b": ["x", "y"], "c": "K"}`, replaceStrings{})
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, `{"a": "X", "k": "K", "b": ["X", "y"], "c": "K"}`, out)

	_, changed, err = rewriteJSON(`{"k": "K"}`, replaceStrings{})
	require.NoError(t, err)
	assert.False(t, changed, "a value already equal to its replacement is no change")

	_, _, err = rewriteJSON(`{"k": [1,}`, replaceStrings{})
	assert.ErrorIs(t, err, errJSONSyntax, "a value replaced whole is still checked")
}

func TestObjectMembers(t *testing.T) {
	var got [][2]string
	err := objectMembers(` {"env": "prod", "n": 5, "obj": { "a": [1, 2] }, "s": "a b", "e\u0301": null} `, func(k, v string) {
		got = append(got, [2]string{k, v})
	})
	require.NoError(t, err)
	assert.Equal(t, [][2]string{
		{"env", `"prod"`}, {"n", "5"}, {"obj", `{"a":[1,2]}`}, {"s", `"a b"`}, {"e\u0301", "null"},
	}, got)

	for _, bad := range []string{`[1]`, `"x"`, `{"a":1`, `{"a":1} {}`, `text`} {
		called := false
		err := objectMembers(bad, func(string, string) { called = true })
		assert.Error(t, err, bad)
		assert.False(t, called, "nothing is emitted for %q", bad)
	}
}
