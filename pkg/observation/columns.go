package observation

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// column is how a filter reads one observation column; a nil getter is a type the column does
// not have.
type column struct {
	name    string
	str     func(v *View) (string, bool)
	num     func(v *View) (float64, bool)
	boolean func(v *View) (bool, bool)
	time    func(v *View) time.Time
	present func(v *View) bool
}

// kinds lists the filter types the column takes, for error messages.
func (c column) kinds() string {
	var k []string
	if c.str != nil {
		k = append(k, "string", "stringOptions")
	}
	if c.num != nil {
		k = append(k, "number")
	}
	if c.boolean != nil {
		k = append(k, "boolean")
	}
	if c.time != nil {
		k = append(k, "datetime")
	}
	if c.present != nil {
		k = append(k, "null")
	}
	return fmt.Sprintf(" (%s takes %s)", c.name, strings.Join(k, ", "))
}

// always is a string that every observation has.
func always(get func(v *View) string) func(v *View) (string, bool) {
	return func(v *View) (string, bool) { return get(v), true }
}

// optional is a string that is absent when empty.
func optional(get func(v *View) string) func(v *View) (string, bool) {
	return func(v *View) (string, bool) { s := get(v); return s, s != "" }
}

func presentString(get func(v *View) (string, bool)) func(v *View) bool {
	return func(v *View) bool { _, ok := get(v); return ok }
}

func presentNumber(get func(v *View) (float64, bool)) func(v *View) bool {
	return func(v *View) bool { _, ok := get(v); return ok }
}

var (
	colID     = optional(func(v *View) string { return v.Span.SpanID().String() })
	colTrace  = optional(func(v *View) string { return v.Span.TraceID().String() })
	colParent = optional(func(v *View) string { return v.Span.ParentSpanID().String() })
	colStatus = optional(func(v *View) string { return v.StatusMessage() })
	colSess   = optional(func(v *View) string { return v.SessionID() })
	colUser   = optional(func(v *View) string { return v.UserID() })
	colModel  = optional(func(v *View) string { return v.Model() })
)

// fixedColumns are the observation's own columns.
var fixedColumns = map[string]column{
	"id":                  {str: colID, present: presentString(colID)},
	"traceId":             {str: colTrace, present: presentString(colTrace)},
	"parentObservationId": {str: colParent, present: presentString(colParent)},
	"name":                {str: always((*View).Name)},
	"type":                {str: always((*View).Type)},
	"level":               {str: always((*View).Level)},
	"statusMessage":       {str: colStatus, present: presentString(colStatus)},
	"environment":         {str: always((*View).Environment)},
	"sessionId":           {str: colSess, present: presentString(colSess)},
	"userId":              {str: colUser, present: presentString(colUser)},
	"model":               {str: colModel, present: presentString(colModel)},
	"latency":             {num: func(v *View) (float64, bool) { return v.Latency(), true }},
	"inputTokens":         usageColumn(func(in, _, _ float64) float64 { return in }),
	"outputTokens":        usageColumn(func(_, out, _ float64) float64 { return out }),
	"totalTokens":         usageColumn(func(_, _, total float64) float64 { return total }),
	"totalCost":           {num: (*View).Cost, present: presentNumber((*View).Cost)},
	"startTime":           {time: (*View).StartTime},
	"endTime":             {time: (*View).EndTime},
}

func usageColumn(pick func(in, out, total float64) float64) column {
	get := func(v *View) (float64, bool) {
		in, out, total, ok := v.Usage()
		return pick(in, out, total), ok
	}
	return column{num: get, present: presentNumber(get)}
}

// columnOf resolves a column name: a fixed column, or a metadata path or attribute key.
func columnOf(name string) (column, error) {
	if c, ok := fixedColumns[name]; ok {
		c.name = name
		return c, nil
	}
	for _, dyn := range []struct {
		prefix string
		get    func(v *View, key string) (any, bool)
	}{
		{"metadata.", (*View).Metadata},
		{"traceMetadata.", (*View).TraceMetadata},
		{"attributes.", (*View).Attribute},
	} {
		if key, ok := strings.CutPrefix(name, dyn.prefix); ok {
			if key == "" {
				return column{}, fmt.Errorf("column %q names no key (%s<key>)", name, dyn.prefix)
			}
			return valueColumn(name, key, dyn.get), nil
		}
	}
	names := make([]string, 0, len(fixedColumns))
	for n := range fixedColumns {
		names = append(names, n)
	}
	sort.Strings(names)
	return column{}, fmt.Errorf("unknown column %q (one of %s, metadata.<path>, traceMetadata.<path>, attributes.<key>)", name, strings.Join(names, ", "))
}

// valueColumn reads a typed value (metadata, attribute): each filter type sees only values of
// its own type, as the platform's typed metadata filters do.
func valueColumn(name, key string, get func(v *View, key string) (any, bool)) column {
	return column{
		name: name,
		str: func(v *View) (string, bool) {
			x, ok := get(v, key)
			s, isStr := x.(string)
			return s, ok && isStr
		},
		num: func(v *View) (float64, bool) {
			x, _ := get(v, key)
			switch n := x.(type) {
			case float64:
				return n, true
			case int64:
				return float64(n), true
			}
			return 0, false
		},
		boolean: func(v *View) (bool, bool) {
			x, _ := get(v, key)
			b, ok := x.(bool)
			return b, ok
		},
		present: func(v *View) bool { x, ok := get(v, key); return ok && x != nil },
	}
}
