package platform

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// observationFilterJSON is one object of the `filter` parameter of the v2 observations API
// (docs/contract.md §13): a JSON array of objects with exactly these keys.
type observationFilterJSON struct {
	Type     string          `json:"type"`
	Column   string          `json:"column"`
	Operator string          `json:"operator"`
	Value    json.RawMessage `json:"value"`
}

// stringColumns are the observation columns a "string" filter can test.
var stringColumns = map[string]func(o *Observation) string{
	"id":                  func(o *Observation) string { return o.ID },
	"traceId":             func(o *Observation) string { return o.TraceID },
	"parentObservationId": func(o *Observation) string { return o.ParentObservationID },
	"name":                func(o *Observation) string { return o.Name },
	"type":                func(o *Observation) string { return o.Type },
	"level":               func(o *Observation) string { return o.Level },
	"environment":         func(o *Observation) string { return o.Environment },
	"sessionId":           func(o *Observation) string { return o.SessionID },
	"model":               func(o *Observation) string { return o.Model },
}

var timeColumns = map[string]func(o *Observation) time.Time{
	"startTime": func(o *Observation) time.Time { return o.StartTime },
	"endTime":   func(o *Observation) time.Time { return o.EndTime },
}

// metadataColumns are the prefixes of typed metadata filters: "metadata.a.b" tests the value at
// path a → b of the observation's metadata, "traceMetadata.k" the trace metadata.
var metadataColumns = map[string]func(o *Observation) map[string]any{
	"metadata.":      func(o *Observation) map[string]any { return o.Metadata },
	"traceMetadata.": func(o *Observation) map[string]any { return o.TraceMetadata },
}

// predicate tests one observation.
type predicate func(o *Observation) bool

type observationFilters []predicate

func (fs observationFilters) match(o *Observation) bool {
	for _, f := range fs {
		if !f(o) {
			return false
		}
	}
	return true
}

// parseObservationFilters reads the `filter` parameter. Supported:
//   - type "string" on id, traceId, parentObservationId, name, type, level, environment,
//     sessionId, model, or a metadata path: operators =, !=, contains;
//   - type "number" on a metadata path: =, !=, >, >=, <, <=;
//   - type "boolean" on a metadata path: =, !=;
//   - type "datetime" on startTime, endTime (RFC 3339 value): >, >=, <, <=.
//
// Metadata paths are typed, as on the platform for the new SDKs (docs/contract.md §5): a number
// filter never matches the string "5", and a path that is absent matches no operator. Filters
// see values as stored: a number is a decoded JSON number of a new SDK's span or an int or
// double that another span sent with its OTLP type (the stand-in's choice; docs/contract.md does not
// say how the platform filters the old shape).
func parseObservationFilters(param string) (observationFilters, *httpError) {
	if param == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(param))
	dec.DisallowUnknownFields()
	var objs []observationFilterJSON
	if err := dec.Decode(&objs); err != nil {
		return nil, errorf(http.StatusBadRequest, "filter must be a JSON array of {type, column, operator, value} objects: %v", err)
	}
	fs := make(observationFilters, 0, len(objs))
	for i, f := range objs {
		pred, msg := f.predicate()
		if msg != "" {
			return nil, errorf(http.StatusBadRequest, "filter[%d]: %s", i, msg)
		}
		fs = append(fs, pred)
	}
	return fs, nil
}

func (f observationFilterJSON) predicate() (predicate, string) {
	if len(f.Value) == 0 || string(bytes.TrimSpace(f.Value)) == "null" {
		return nil, "value is required"
	}
	metadataOf, path := metadataColumn(f.Column)
	switch f.Type {
	case "string":
		var want string
		if json.Unmarshal(f.Value, &want) != nil {
			return nil, "a string filter needs a string value"
		}
		cmp, ok := stringOperators[f.Operator]
		if !ok {
			return nil, "string operators are =, !=, contains"
		}
		if metadataOf != nil {
			return func(o *Observation) bool {
				got, ok := lookupPath(metadataOf(o), path).(string)
				return ok && cmp(got, want)
			}, ""
		}
		column, ok := stringColumns[f.Column]
		if !ok {
			return nil, "unsupported string column " + quote(f.Column)
		}
		return func(o *Observation) bool { return cmp(column(o), want) }, ""
	case "number":
		var want float64
		if json.Unmarshal(f.Value, &want) != nil {
			return nil, "a number filter needs a numeric value"
		}
		cmp, ok := numberOperators[f.Operator]
		if !ok {
			return nil, "number operators are =, !=, >, >=, <, <="
		}
		if metadataOf == nil {
			return nil, "number filters apply to metadata.<path> and traceMetadata.<path>"
		}
		return func(o *Observation) bool {
			got, ok := asNumber(lookupPath(metadataOf(o), path))
			return ok && cmp(got, want)
		}, ""
	case "boolean":
		var want bool
		if json.Unmarshal(f.Value, &want) != nil {
			return nil, "a boolean filter needs true or false"
		}
		if f.Operator != "=" && f.Operator != "!=" {
			return nil, "boolean operators are = and !="
		}
		if metadataOf == nil {
			return nil, "boolean filters apply to metadata.<path> and traceMetadata.<path>"
		}
		equal := f.Operator == "="
		return func(o *Observation) bool {
			got, ok := lookupPath(metadataOf(o), path).(bool)
			return ok && (got == want) == equal
		}, ""
	case "datetime":
		var s string
		if json.Unmarshal(f.Value, &s) != nil {
			return nil, "a datetime filter needs an RFC 3339 string"
		}
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, "a datetime filter needs an RFC 3339 string"
		}
		column, ok := timeColumns[f.Column]
		if !ok {
			return nil, "datetime filters apply to startTime and endTime"
		}
		cmp, ok := timeOperators[f.Operator]
		if !ok {
			return nil, "datetime operators are >, >=, <, <="
		}
		return func(o *Observation) bool { return cmp(column(o), want) }, ""
	default:
		return nil, "unsupported filter type " + quote(f.Type) + " (string, number, boolean, datetime)"
	}
}

var stringOperators = map[string]func(got, want string) bool{
	"=":        func(got, want string) bool { return got == want },
	"!=":       func(got, want string) bool { return got != want },
	"contains": strings.Contains,
}

var numberOperators = map[string]func(got, want float64) bool{
	"=":  func(got, want float64) bool { return got == want },
	"!=": func(got, want float64) bool { return got != want },
	">":  func(got, want float64) bool { return got > want },
	">=": func(got, want float64) bool { return got >= want },
	"<":  func(got, want float64) bool { return got < want },
	"<=": func(got, want float64) bool { return got <= want },
}

var timeOperators = map[string]func(got, want time.Time) bool{
	">":  func(got, want time.Time) bool { return got.After(want) },
	">=": func(got, want time.Time) bool { return !got.Before(want) },
	"<":  func(got, want time.Time) bool { return got.Before(want) },
	"<=": func(got, want time.Time) bool { return !got.After(want) },
}

// metadataColumn splits "metadata.a.b" into the metadata accessor and the path "a.b".
func metadataColumn(column string) (func(o *Observation) map[string]any, string) {
	for prefix, of := range metadataColumns {
		if path, ok := strings.CutPrefix(column, prefix); ok && path != "" {
			return of, path
		}
	}
	return nil, ""
}

// lookupPath walks a dotted path through nested objects (docs/contract.md §5: `a.b = 1`). A key that
// itself contains dots is found too: the longest key that exists wins at each level.
func lookupPath(m map[string]any, path string) any {
	parts := strings.Split(path, ".")
	for n := len(parts); n >= 1; n-- {
		v, ok := m[strings.Join(parts[:n], ".")]
		if !ok {
			continue
		}
		if n == len(parts) {
			return v
		}
		if child, ok := v.(map[string]any); ok {
			if found := lookupPath(child, strings.Join(parts[n:], ".")); found != nil {
				return found
			}
		}
	}
	return nil
}

func quote(s string) string { return `"` + s + `"` }

// asNumber is a stored metadata number: a decoded JSON number (float64) or an OTLP int.
func asNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int64:
		return float64(n), true
	}
	return 0, false
}
