package svcidguardextension // import "github.com/svc/svc-collector/svcidguardextension"

import (
	"fmt"
	"sort"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
)

// Reasons a span is refused (the metric's reason attribute): the id that is empty or all zero.
// OTLP decoding reads an absent id as all zero, so the two are one reason.
const (
	reasonTraceID = "trace_id"
	reasonSpanID  = "span_id"
)

// refusals counts the spans a request loses, by reason, and where they came from (service and
// scope names: enough to find the instrumentation, nothing of the spans' content).
type refusals struct {
	byReason map[string]int64
	sources  map[string]struct{}
}

func (r *refusals) total() int64 {
	var n int64
	for _, c := range r.byReason {
		n += c
	}
	return n
}

// message is the partial-success error message the sender gets.
func (r *refusals) message() string {
	reasons := make([]string, 0, len(r.byReason))
	for reason, n := range r.byReason {
		reasons = append(reasons, fmt.Sprintf("%d with an empty or all-zero %s", n, strings.ReplaceAll(reason, "_", " ")))
	}
	sort.Strings(reasons)
	return fmt.Sprintf("svc gateway refused %d span(s): %s; the other spans were accepted",
		r.total(), strings.Join(reasons, ", "))
}

func (r *refusals) sourceList() []string {
	list := make([]string, 0, len(r.sources))
	for s := range r.sources {
		list = append(list, s)
	}
	sort.Strings(list)
	return list
}

// invalidReason is why a span's ids are refused, "" when they are fine.
func invalidReason(traceID pcommon.TraceID, spanID pcommon.SpanID) string {
	switch {
	case traceID.IsEmpty():
		return reasonTraceID
	case spanID.IsEmpty():
		return reasonSpanID
	}
	return ""
}

// removeInvalidSpans removes the spans with an empty or all-zero trace or span id from td, and the
// scopes and resources left without spans, and says what it removed.
func removeInvalidSpans(td ptrace.Traces) *refusals {
	r := &refusals{byReason: map[string]int64{}, sources: map[string]struct{}{}}
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		service, _ := rs.Resource().Attributes().Get("service.name")
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(span ptrace.Span) bool {
				reason := invalidReason(span.TraceID(), span.SpanID())
				if reason == "" {
					return false
				}
				r.byReason[reason]++
				r.sources[fmt.Sprintf("service %q, scope %q", service.AsString(), ss.Scope().Name())] = struct{}{}
				return true
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	return r
}

// Field numbers of the OTLP trace messages the wire scan walks.
const (
	fieldResourceSpans = 1 // ExportTraceServiceRequest.resource_spans
	fieldScopeSpans    = 2 // ResourceSpans.scope_spans
	fieldSpans         = 2 // ScopeSpans.spans
	fieldTraceID       = 1 // Span.trace_id
	fieldSpanID        = 2 // Span.span_id
)

// hasInvalidSpan reports whether an OTLP/protobuf ExportTraceServiceRequest holds a span with an
// empty or all-zero trace id or span id. It reads the ids in place, without decoding the request:
// the common request, with none, costs a walk over its bytes. Text that is not valid protobuf
// answers true, so that the full decode decides (and the receiver reports the error).
func hasInvalidSpan(body []byte) bool {
	invalid := false
	ok := eachField(body, func(num protowire.Number, rs []byte) bool {
		if num != fieldResourceSpans {
			return true
		}
		return eachField(rs, func(num protowire.Number, ss []byte) bool {
			if num != fieldScopeSpans {
				return true
			}
			return eachField(ss, func(num protowire.Number, span []byte) bool {
				if num != fieldSpans {
					return true
				}
				if !validSpanIDs(span) {
					invalid = true
					return false
				}
				return true
			})
		})
	})
	return invalid || !ok
}

// validSpanIDs reads a Span message's trace_id and span_id; the last occurrence of a field wins,
// as protobuf decoding does.
func validSpanIDs(span []byte) bool {
	var traceID, spanID []byte
	ok := eachField(span, func(num protowire.Number, v []byte) bool {
		switch num {
		case fieldTraceID:
			traceID = v
		case fieldSpanID:
			spanID = v
		}
		return true
	})
	return ok && nonZero(traceID) && nonZero(spanID)
}

func nonZero(id []byte) bool {
	for _, b := range id {
		if b != 0 {
			return true
		}
	}
	return false
}

// eachField calls fn with the number and bytes of every length-delimited field of a message
// and skips the others; it stops when fn returns false. It returns false when the message is not
// valid protobuf (or fn stopped).
func eachField(msg []byte, fn func(num protowire.Number, value []byte) bool) bool {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return false
		}
		msg = msg[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				return false
			}
			if !fn(num, v) {
				return false
			}
			msg = msg[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, msg)
		if m < 0 {
			return false
		}
		msg = msg[m:]
	}
	return true
}
