package masking // import "github.com/svc/svc-collector/pkg/masking"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/scorerecord"
)

// Span masks everything of a span that carries content: its attributes (see Attributes; skip
// may be nil), the attributes of its events (prompt and completion events of the earlier GenAI
// conventions, exception events) and links, and its status message. Names, ids, kinds and
// timestamps are structure and stay.
func (e *Engine) Span(span ptrace.Span, skip func(name string) bool, st *Stats) Result {
	if e == nil {
		return Unchanged
	}
	res := e.Attributes(span.Attributes(), skip, st)
	events := span.Events()
	for i := 0; i < events.Len(); i++ {
		res = max(res, e.Attributes(events.At(i).Attributes(), skip, st))
	}
	links := span.Links()
	for i := 0; i < links.Len(); i++ {
		res = max(res, e.Attributes(links.At(i).Attributes(), skip, st))
	}
	if msg := span.Status().Message(); msg != "" {
		if out, r := e.Text(msg); r != Unchanged {
			span.Status().SetMessage(out)
			st.Add(r)
			res = max(res, r)
		}
	}
	return res
}

// Score masks a score record's content: its comment, a string value (a categorical value that
// no rule changes stays as it is) and its metadata (as Attributes masks attributes, masked keys
// whole). Name, ids, numbers and data type stay. A changed value is a new Value: s.Value may
// still be the producer's input, which is not changed.
func (e *Engine) Score(s *scorerecord.Score, st *Stats) Result {
	if e == nil {
		return Unchanged
	}
	res := Unchanged
	if s.Comment != "" {
		var r Result
		s.Comment, r = e.Text(s.Comment)
		st.Add(r)
		res = max(res, r)
	}
	if s.Value != (pcommon.Value{}) && s.Value.Type() == pcommon.ValueTypeStr {
		if out, r := e.Text(s.Value.Str()); r != Unchanged {
			s.Value = pcommon.NewValueStr(out)
			st.Add(r)
			res = max(res, r)
		}
	}
	if s.Metadata != (pcommon.Map{}) {
		res = max(res, e.Attributes(s.Metadata, nil, st))
	}
	return res
}
