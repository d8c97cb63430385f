package jsontext

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// recordingVisitor records what the reader hands it and replaces nothing.
type recordingVisitor struct {
	keys    []string
	scalars []string
}

func (r *recordingVisitor) KeyedValue(key string) (string, bool) {
	r.keys = append(r.keys, key)
	return "", false
}

func (r *recordingVisitor) Scalar(kind byte, text string) (string, bool) {
	r.scalars = append(r.scalars, string(kind)+":"+text)
	return "", false
}

func TestRewriteJSONReadsEveryScalar(t *testing.T) {
	src := ` { "a" : [1, -2.5e+3, true, false, null, "x\"y", "\u00e9"], "b": {"c": {}}, "d": [] } `
	v := &recordingVisitor{}
	out, changed, err := Rewrite(src, v)
	if err != nil {
		t.Fatal(err)
	}
	if changed {
		t.Error("changed")
	}
	if out != src {
		t.Errorf("a document without replacements comes out as it came in: %q", out)
	}
	if want := []string{"a", "b", "c", "d"}; !reflect.DeepEqual(v.keys, want) {
		t.Errorf("keys %q, want %q", v.keys, want)
	}
	if want := []string{"n:1", "n:-2.5e+3", "b:true", "b:false", `s:x"y`, "s:é"}; !reflect.DeepEqual(v.scalars, want) {
		t.Errorf("scalars %q, want %q", v.scalars, want)
	}
}

func TestRewriteJSONErrors(t *testing.T) {
	tests := []struct {
		src  string
		want error
	}{
		{"", ErrSyntax},
		{"   ", ErrSyntax},
		{"{", ErrSyntax},
		{`{"a"}`, ErrSyntax},
		{`{"a":1,}`, ErrSyntax},
		{`[1,]`, ErrSyntax},
		{`[1 2]`, ErrSyntax},
		{`{a:1}`, ErrSyntax},
		{`"unterminated`, ErrSyntax},
		{`"bad escape \x"`, ErrSyntax},
		{"\"control \x01 char\"", ErrSyntax},
		{`01`, ErrSyntax},
		{`1.`, ErrSyntax},
		{`1e`, ErrSyntax},
		{`-`, ErrSyntax},
		{`tru`, ErrSyntax},
		{`nul`, ErrSyntax},
		{`1 2`, ErrSyntax},
		{`{} x`, ErrSyntax},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), ErrTooDeep},
		{strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), ErrTooDeep},
	}
	for _, tt := range tests {
		_, _, err := Rewrite(tt.src, noopVisitor{})
		if !errors.Is(err, tt.want) {
			t.Errorf("%q: %v, want %v", tt.src, err, tt.want)
		}
	}
	deepest := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	_, _, err := Rewrite(deepest, noopVisitor{})
	if err != nil {
		t.Errorf("nesting of exactly MaxDepth is accepted: %v", err)
	}
}

// replaceStrings upper-cases the marker "x" in strings and masks values under key "k".
type replaceStrings struct{}

func (replaceStrings) KeyedValue(key string) (string, bool) {
	if key == "k" {
		return `"K"`, true
	}
	return "", false
}

func (replaceStrings) Scalar(kind byte, text string) (string, bool) {
	if kind == KindString && text == "x" {
		return "X", true
	}
	return "", false
}

func TestRewriteJSONReplacesOnlyWhatChanges(t *testing.T) {
	out, changed, err := Rewrite(`{"a": "x", "k": {"deep": [1, "x"]}, "b": ["x", "y"], "c": "K"}`, replaceStrings{})
	if err != nil {
		t.Fatal(err)
	}
	if !changed {
		t.Error("not changed")
	}
	if want := `{"a": "X", "k": "K", "b": ["X", "y"], "c": "K"}`; out != want {
		t.Errorf("%s, want %s", out, want)
	}

	_, changed, err = Rewrite(`{"k": "K"}`, replaceStrings{})
	if err != nil {
		t.Fatal(err)
	}
	if changed {
		t.Error("a value already equal to its replacement is no change")
	}

	_, _, err = Rewrite(`{"k": [1,}`, replaceStrings{})
	if !errors.Is(err, ErrSyntax) {
		t.Errorf("a value replaced whole is still checked: %v", err)
	}
}

func TestObjectMembers(t *testing.T) {
	var got [][2]string
	err := ObjectMembers(` {"env": "prod", "n": 5, "obj": { "a": [1, 2] }, "s": "a b", "e\u0301": null} `, func(k, v string) {
		got = append(got, [2]string{k, v})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{
		{"env", `"prod"`}, {"n", "5"}, {"obj", `{"a":[1,2]}`}, {"s", `"a b"`}, {"e\u0301", "null"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("members %q, want %q", got, want)
	}

	for _, bad := range []string{`[1]`, `"x"`, `{"a":1`, `{"a":1} {}`, `text`} {
		called := false
		err := ObjectMembers(bad, func(string, string) { called = true })
		if err == nil {
			t.Errorf("%q: no error", bad)
		}
		if called {
			t.Errorf("something was emitted for %q", bad)
		}
	}
}
