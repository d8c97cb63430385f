package observation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Filter is a v2 observation filter (docs/contract.md §13): a JSON array of objects with the keys
// type, column, operator and value, all of which must hold for an observation to match. The
// same text selects observations in the Python SDK's run_batched_evaluation() and at the
// gateway.
//
// Types, operators and columns:
//
//	string       =, !=, contains, does not contain, starts with, ends with
//	stringOptions any of, none of (value: array of strings)
//	number       =, !=, >, >=, <, <=
//	boolean      =, !=
//	datetime     >, >=, <, <= (value: RFC 3339 text)
//	null         is null, is not null (value: "" or null; tests that the column has a value)
//
//	string columns:   id, traceId, parentObservationId, name, type, level, statusMessage,
//	                  environment, sessionId, model
//	number columns:   latency (seconds), inputTokens, outputTokens, totalTokens, totalCost
//	datetime columns: startTime, endTime
//	any type:         metadata.<path>, traceMetadata.<path> (typed, docs/contract.md §5: a number
//	                  filter never matches the string "5"), attributes.<span attribute key>
//
// A column that the observation lacks (no model, no such metadata key) matches no operator but
// "!=", "does not contain", "none of" and "is null".
type Filter []Condition

// Condition is one object of a filter, compiled.
type Condition struct {
	Type, Column, Operator string
	match                  func(v *View) bool
}

// Match reports whether the observation satisfies every condition.
func (f Filter) Match(v *View) bool {
	for i := range f {
		if !f[i].match(v) {
			return false
		}
	}
	return true
}

// conditionJSON is one object of the filter text.
type conditionJSON struct {
	Type     *string         `json:"type"`
	Column   *string         `json:"column"`
	Operator *string         `json:"operator"`
	Value    json.RawMessage `json:"value"`
}

// Operators by filter type, in the order error messages list them.
var operatorsByType = map[string][]string{
	"string":        {"=", "!=", "contains", "does not contain", "starts with", "ends with"},
	"stringOptions": {"any of", "none of"},
	"number":        {"=", "!=", ">", ">=", "<", "<="},
	"boolean":       {"=", "!="},
	"datetime":      {">", ">=", "<", "<="},
	"null":          {"is null", "is not null"},
}

var filterTypes = []string{"string", "stringOptions", "number", "boolean", "datetime", "null"}

// ParseFilter compiles the text of a v2 filter. An empty text, or "[]", selects every
// observation. Every mistake is reported with the index of its object and what is allowed.
func ParseFilter(text string) (Filter, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var objs []conditionJSON
	if err := dec.Decode(&objs); err != nil {
		return nil, fmt.Errorf("filter must be a JSON array of objects with the keys type, column, operator, value: %w", err)
	}
	if dec.More() {
		return nil, errors.New("filter must be one JSON array; found text after it")
	}
	f := make(Filter, 0, len(objs))
	for i, o := range objs {
		c, err := o.compile()
		if err != nil {
			return nil, fmt.Errorf("filter[%d]: %w", i, err)
		}
		f = append(f, c)
	}
	return f, nil
}

func (o conditionJSON) compile() (Condition, error) {
	var missing []string
	if o.Type == nil {
		missing = append(missing, "type")
	}
	if o.Column == nil {
		missing = append(missing, "column")
	}
	if o.Operator == nil {
		missing = append(missing, "operator")
	}
	if o.Value == nil {
		missing = append(missing, "value")
	}
	if len(missing) > 0 {
		return Condition{}, fmt.Errorf("missing key(s) %s (each filter object has type, column, operator, value)", strings.Join(missing, ", "))
	}
	c := Condition{Type: *o.Type, Column: *o.Column, Operator: *o.Operator}
	ops, ok := operatorsByType[c.Type]
	if !ok {
		return c, fmt.Errorf("unknown type %q (one of %s)", c.Type, strings.Join(filterTypes, ", "))
	}
	if !contains(ops, c.Operator) {
		return c, fmt.Errorf("operator %q is not a %s operator (one of %s)", c.Operator, c.Type, quoteAll(ops))
	}
	col, err := columnOf(c.Column)
	if err != nil {
		return c, err
	}
	var match func(v *View) bool
	switch c.Type {
	case "string":
		match, err = stringCondition(col, c.Operator, o.Value)
	case "stringOptions":
		match, err = optionsCondition(col, c.Operator, o.Value)
	case "number":
		match, err = numberCondition(col, c.Operator, o.Value)
	case "boolean":
		match, err = booleanCondition(col, c.Operator, o.Value)
	case "datetime":
		match, err = datetimeCondition(col, c.Operator, o.Value)
	case "null":
		match, err = nullCondition(col, c.Operator, o.Value)
	}
	if err != nil {
		return c, fmt.Errorf("column %q: %w", c.Column, err)
	}
	c.match = match
	return c, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func quoteAll(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func stringCondition(col column, op string, raw json.RawMessage) (func(*View) bool, error) {
	if col.str == nil {
		return nil, errors.New("not a string column" + col.kinds())
	}
	var want string
	if json.Unmarshal(raw, &want) != nil {
		return nil, fmt.Errorf("a string filter needs a string value, got %s", raw)
	}
	get := col.str
	// The negative operators hold for an observation without the column, as they do on the
	// platform: "model != gpt-4o" selects the spans that name no model.
	switch op {
	case "=":
		return func(v *View) bool { s, ok := get(v); return ok && s == want }, nil
	case "!=":
		return func(v *View) bool { s, ok := get(v); return !ok || s != want }, nil
	case "contains":
		return func(v *View) bool { s, ok := get(v); return ok && strings.Contains(s, want) }, nil
	case "does not contain":
		return func(v *View) bool { s, ok := get(v); return !ok || !strings.Contains(s, want) }, nil
	case "starts with":
		return func(v *View) bool { s, ok := get(v); return ok && strings.HasPrefix(s, want) }, nil
	default: // "ends with"
		return func(v *View) bool { s, ok := get(v); return ok && strings.HasSuffix(s, want) }, nil
	}
}

func optionsCondition(col column, op string, raw json.RawMessage) (func(*View) bool, error) {
	if col.str == nil {
		return nil, errors.New("not a string column" + col.kinds())
	}
	var options []string
	if json.Unmarshal(raw, &options) != nil || len(options) == 0 {
		return nil, fmt.Errorf("a stringOptions filter needs a non-empty array of strings, got %s", raw)
	}
	set := make(map[string]struct{}, len(options))
	for _, s := range options {
		set[s] = struct{}{}
	}
	get := col.str
	anyOf := op == "any of"
	return func(v *View) bool {
		s, ok := get(v)
		if !ok {
			return !anyOf
		}
		_, in := set[s]
		return in == anyOf
	}, nil
}

func numberCondition(col column, op string, raw json.RawMessage) (func(*View) bool, error) {
	if col.num == nil {
		return nil, errors.New("not a number column" + col.kinds())
	}
	var want float64
	if json.Unmarshal(raw, &want) != nil {
		return nil, fmt.Errorf("a number filter needs a numeric value, got %s", raw)
	}
	get := col.num
	var cmp func(got float64) bool
	switch op {
	case "=":
		cmp = func(got float64) bool { return got == want }
	case "!=":
		return func(v *View) bool { n, ok := get(v); return !ok || n != want }, nil
	case ">":
		cmp = func(got float64) bool { return got > want }
	case ">=":
		cmp = func(got float64) bool { return got >= want }
	case "<":
		cmp = func(got float64) bool { return got < want }
	default: // "<="
		cmp = func(got float64) bool { return got <= want }
	}
	return func(v *View) bool { n, ok := get(v); return ok && cmp(n) }, nil
}

func booleanCondition(col column, op string, raw json.RawMessage) (func(*View) bool, error) {
	if col.boolean == nil {
		return nil, errors.New("not a boolean column" + col.kinds())
	}
	var want bool
	if json.Unmarshal(raw, &want) != nil {
		return nil, fmt.Errorf("a boolean filter needs true or false, got %s", raw)
	}
	get := col.boolean
	if op == "=" {
		return func(v *View) bool { b, ok := get(v); return ok && b == want }, nil
	}
	return func(v *View) bool { b, ok := get(v); return !ok || b != want }, nil
}

func datetimeCondition(col column, op string, raw json.RawMessage) (func(*View) bool, error) {
	if col.time == nil {
		return nil, errors.New("not a datetime column" + col.kinds())
	}
	var text string
	if json.Unmarshal(raw, &text) != nil {
		return nil, fmt.Errorf("a datetime filter needs an RFC 3339 string, got %s", raw)
	}
	want, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return nil, fmt.Errorf("a datetime filter needs an RFC 3339 string, got %q", text)
	}
	get := col.time
	switch op {
	case ">":
		return func(v *View) bool { return get(v).After(want) }, nil
	case ">=":
		return func(v *View) bool { return !get(v).Before(want) }, nil
	case "<":
		return func(v *View) bool { return get(v).Before(want) }, nil
	default: // "<="
		return func(v *View) bool { return !get(v).After(want) }, nil
	}
}

func nullCondition(col column, op string, raw json.RawMessage) (func(*View) bool, error) {
	if col.present == nil {
		return nil, errors.New("always has a value; null filters apply to id, traceId, parentObservationId, statusMessage, sessionId, model, the token and cost columns, metadata.<path>, traceMetadata.<path>, attributes.<key>")
	}
	if v := string(bytes.TrimSpace(raw)); v != "null" && v != `""` {
		return nil, fmt.Errorf("a null filter takes the value \"\" or null, got %s", raw)
	}
	present := col.present
	if op == "is null" {
		return func(v *View) bool { return !present(v) }, nil
	}
	return present, nil
}
