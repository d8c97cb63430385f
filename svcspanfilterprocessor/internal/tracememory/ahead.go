package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// writeAhead marks the spans of a call that the memory may hold or release as its own deliveries
// (spanRef.mayHold) and writes copies of them, one KindSpans record whose id ref takes, before the
// call changes anything (it only reads the memory). A kept span may be held when it may wait for
// its content or its parent walk through the call's own spans leaves the call, and it goes on as
// a delivery carrying content that waits for it or replacing a held copy of it; a dropped span
// goes on as a connector span when delivered spans point at it. A call of whole traces (every
// ancestor up to a kept one or the root in the call) with no content waiting writes nothing here.
func (m *Memory) writeAhead(ref *RecordRef, sc *admitScratch, refs []spanRef, og *origins,
	heldAt time.Time) error {
	var local map[callKey]int32
	var copies *heldCopy
	m.planVerdicts(refs)
	for i := range refs {
		r := &refs[i]
		switch {
		case r.planned == Drop:
			r.mayHold = m.cfg.ConnectorSpans && m.known(r.span, mayConnect)
		case r.scopeAwaits && m.join.AwaitsContent(r.span):
			r.mayHold = true
		default:
			if local == nil {
				local = sc.indexCall(refs)
			}
			r.mayHold = !resolvesInCall(refs, local, r) || m.known(r.span, waitedForOrHeld)
		}
		if !r.mayHold {
			continue
		}
		if copies == nil {
			copies = newHeldCopy()
		}
		if cp := copies.add(og.get(r), r.span); r.planned == Drop {
			toConnector(cp)
		}
	}
	if copies == nil {
		return nil
	}
	payload, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(copies.td)
	if err != nil {
		return err
	}
	md := Metadata(og.request.info)
	id, err := m.journal.Append(context.Background(), journal.KindSpans, heldAt, md, payload)
	ref.id = id
	return err
}

// mayConnect and waitedForOrHeld are what writeAhead asks the memory of a span (under its
// shard's lock): delivered spans point at it, or it went on as a connector before; content waits
// for it, or a copy of it is held (this call releases it, so it must carry it durably).
func mayConnect(t *trace, id pcommon.SpanID) bool {
	_, open := t.open[id]
	return open || t.records[id].state == stateConnector
}

func waitedForOrHeld(t *trace, id pcommon.SpanID) bool {
	_, waited := t.content[id]
	return waited || t.held[id] != nil
}

// known asks what of span's trace, if the memory has it.
func (m *Memory) known(span ptrace.Span, what func(*trace, pcommon.SpanID) bool) bool {
	sh := m.shards[m.shardOf(span.TraceID())]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.traces[span.TraceID()]
	return t != nil && what(t, span.SpanID())
}

// planVerdicts plans the spans kept only in an experiment (the others keep their verdict): kept
// when a span of the call marks its trace or the memory knows the trace as one, else dropped, so
// that no copy of it is written ahead (and recovered as kept) unless its trace is an experiment.
// Marked between the plan and apply, the trace keeps the span, which then goes on at once (rule 1:
// at most a connector copy of it was written, so it is never held).
func (m *Memory) planVerdicts(refs []spanRef) {
	var marked map[pcommon.TraceID]bool // made on first use: most calls mark no experiment
	for i := range refs {
		if refs[i].decision.MarksExperiment {
			if marked == nil {
				marked = map[pcommon.TraceID]bool{}
			}
			marked[refs[i].span.TraceID()] = true
		}
	}
	for i := range refs {
		if r := &refs[i]; r.planned == KeepIfExperiment {
			r.planned = Drop
			if marked[r.span.TraceID()] || m.known(r.span, isExperiment) {
				r.planned = Keep
			}
		}
	}
}

func isExperiment(t *trace, _ pcommon.SpanID) bool { return t.experiment }

// callKey is a span of one call.
type callKey struct {
	trace pcommon.TraceID
	span  pcommon.SpanID
}

// indexCall indexes the call's spans in the scratch's map, kept from call to call: made and grown
// for every call, it was half the plan's CPU. One much larger call does not leave every later one
// clearing its room (clear costs the map's size).
func (sc *admitScratch) indexCall(refs []spanRef) map[callKey]int32 {
	if sc.local == nil || len(sc.local) > 2*len(refs)+1024 {
		sc.local = make(map[callKey]int32, len(refs))
	}
	clear(sc.local)
	for i := range refs {
		sc.local[callKey{refs[i].span.TraceID(), refs[i].span.SpanID()}] = int32(i)
	}
	return sc.local
}

// resolvesInCall reports whether the parent walk of r through the call's dropped spans ends at a
// kept span of the call or at the root (a cycle ends there too).
func resolvesInCall(refs []spanRef, local map[callKey]int32, r *spanRef) bool {
	tid, self := r.span.TraceID(), r.span.SpanID()
	p := r.span.ParentSpanID()
	for range len(refs) + 1 {
		if p.IsEmpty() || p == self {
			return true
		}
		j, ok := local[callKey{tid, p}]
		if !ok {
			return false
		}
		if refs[j].planned == Keep {
			return true
		}
		p = refs[j].span.ParentSpanID()
	}
	return true
}

// Metadata is the client metadata of a request, as the journal keeps it.
func Metadata(info client.Info) map[string][]string {
	var md map[string][]string
	for k := range info.Metadata.Keys() {
		if md == nil {
			md = map[string][]string{}
		}
		md[k] = info.Metadata.Get(k)
	}
	return md
}
