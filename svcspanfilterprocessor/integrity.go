package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"container/list"
	"encoding/hex"
	"slices"
	"time"

	"github.com/svc/svc-collector/pkg/svcattr"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// reparentReason is the `reason` of the spans_reparented metric.
type reparentReason uint8

const (
	// reparentDroppedParent: moved to the nearest kept ancestor.
	reparentDroppedParent reparentReason = iota
	// The others make the span a root of its trace:
	reparentNoKeptAncestor // every ancestor up to the trace's root was dropped
	reparentWaitExpired    // the parent was never seen within the wait
	reparentTraceEvicted   // max_traces was reached while the span waited
	reparentShutdown       // the collector stopped while the span waited

	numReparentReasons
)

func (r reparentReason) String() string {
	return [...]string{
		reparentDroppedParent:  "dropped_parent",
		reparentNoKeptAncestor: "no_kept_ancestor",
		reparentWaitExpired:    "wait_expired",
		reparentTraceEvicted:   "trace_evicted",
		reparentShutdown:       "shutdown",
	}[r]
}

// seenSpan is what a trace remembers of each of its spans: enough to walk from a kept span up
// through dropped ancestors.
type seenSpan struct {
	parent pcommon.SpanID
	kept   bool
}

// requestOrigin is the client context of the request a held span came in with, so that a span
// released later is delivered with its own request's client metadata, not another request's.
type requestOrigin struct {
	info client.Info
}

// resourceOrigin and scopeOrigin carry the resource and scope of held spans; the spans held from one
// ResourceSpans / ScopeSpans of one batch share them.
type resourceOrigin struct {
	request   *requestOrigin
	resource  pcommon.Resource
	schemaURL string
}

type scopeOrigin struct {
	resource  *resourceOrigin
	scope     pcommon.InstrumentationScope
	schemaURL string
}

// heldSpan is a kept span waiting for its parent, moved out of its batch.
type heldSpan struct {
	span   ptrace.Span
	origin *scopeOrigin
	// gen is the batch that held it: spans held by the current batch need no second resolution.
	gen uint64
}

// traceState is the memory of one trace.
type traceState struct {
	id   pcommon.TraceID
	seen map[pcommon.SpanID]seenSpan
	held []heldSpan
	// lastActivity: the last time a span of the trace arrived or its waiting spans were released.
	lastActivity time.Time
	// waitingSince: when the trace went from no held span to some.
	waitingSince time.Time
	// elem is the trace's entry in integrityState.idle or .waiting, both ordered by lastActivity.
	elem *list.Element
	gen  uint64
}

// resolution of a kept span's parent.
type resolution uint8

const (
	resolvedUnchanged resolution = iota // the parent is kept (or the span is a root)
	resolvedAncestor                    // the parent was dropped; a kept ancestor takes its place
	resolvedRoot                        // every ancestor was dropped
	unresolved                          // an ancestor on the way up has not been seen yet
)

// integrityState is the per-trace memory of the processor. It is not safe for concurrent use: the
// processor guards it with its mutex.
type integrityState struct {
	cfg    TraceIntegrityConfig
	traces map[pcommon.TraceID]*traceState
	// idle holds traces without held spans, waiting the ones with; each ordered by lastActivity
	// (oldest first) so that expiry and eviction take from the front.
	idle      *list.List
	waiting   *list.List
	gen       uint64
	spansHeld int
}

func newIntegrityState(cfg TraceIntegrityConfig) *integrityState {
	return &integrityState{
		cfg:     cfg,
		traces:  map[pcommon.TraceID]*traceState{},
		idle:    list.New(),
		waiting: list.New(),
	}
}

// trace returns the state of id, created on first sight, and marks it active now.
func (s *integrityState) trace(id pcommon.TraceID, now time.Time) *traceState {
	ts, ok := s.traces[id]
	if !ok {
		ts = &traceState{id: id, seen: make(map[pcommon.SpanID]seenSpan, 8)}
		s.traces[id] = ts
		ts.elem = s.idle.PushBack(ts)
	}
	ts.lastActivity = now
	if len(ts.held) > 0 {
		s.waiting.MoveToBack(ts.elem)
	} else {
		s.idle.MoveToBack(ts.elem)
	}
	return ts
}

// record remembers a span of the trace, kept or dropped.
func (ts *traceState) record(spanID, parent pcommon.SpanID, kept bool) {
	if spanID.IsEmpty() {
		return
	}
	ts.seen[spanID] = seenSpan{parent: parent, kept: kept}
}

// resolve finds where a kept span with this id and parent belongs: the parent itself when kept, the
// nearest kept ancestor when the parent was dropped, a root when all ancestors were dropped, or
// unresolved when the walk reaches a span the trace has not seen.
func (ts *traceState) resolve(spanID, parent pcommon.SpanID) (resolution, pcommon.SpanID) {
	if parent.IsEmpty() {
		return resolvedUnchanged, parent
	}
	p := parent
	// A well-formed trace is a tree; the bound keeps a malformed parent cycle from looping.
	for steps := 0; steps <= len(ts.seen); steps++ {
		if p == spanID {
			return resolvedRoot, pcommon.SpanID{} // a cycle back to the span itself
		}
		rec, ok := ts.seen[p]
		switch {
		case !ok:
			return unresolved, pcommon.SpanID{}
		case rec.kept && p == parent:
			return resolvedUnchanged, p
		case rec.kept:
			return resolvedAncestor, p
		case rec.parent.IsEmpty():
			return resolvedRoot, pcommon.SpanID{}
		}
		p = rec.parent
	}
	return resolvedRoot, pcommon.SpanID{}
}

// hold moves span out of its batch into the trace's waiting spans. A span id already held (the same
// batch sent again after an error) replaces the earlier copy instead of being held twice.
func (s *integrityState) hold(ts *traceState, span ptrace.Span, origin *scopeOrigin, now time.Time) {
	held := heldSpan{span: ptrace.NewSpan(), origin: origin, gen: s.gen}
	span.MoveTo(held.span)
	id := held.span.SpanID()
	for i := range ts.held {
		if ts.held[i].span.SpanID() == id {
			ts.held[i] = held
			return
		}
	}
	if len(ts.held) == 0 {
		ts.waitingSince = now
		s.idle.Remove(ts.elem)
		ts.elem = s.waiting.PushBack(ts)
	}
	ts.held = append(ts.held, held)
	s.spansHeld++
}

// discardHeld forgets the held copy of spanID, if any.
func (s *integrityState) discardHeld(ts *traceState, spanID pcommon.SpanID, now time.Time) {
	for i := range ts.held {
		if ts.held[i].span.SpanID() == spanID {
			s.setHeld(ts, slices.Delete(ts.held, i, i+1), now)
			return
		}
	}
}

// releasedSpan is a held span leaving the processor, with what was done to its parent.
type releasedSpan struct {
	heldSpan
	reparented bool
	reason     reparentReason
}

// resolveHeld re-resolves the spans that ts held before the current batch and returns those that
// can go now.
func (s *integrityState) resolveHeld(ts *traceState, out []releasedSpan, now time.Time) []releasedSpan {
	kept := ts.held[:0]
	for _, h := range ts.held {
		if h.gen == s.gen {
			kept = append(kept, h)
			continue
		}
		res, ancestor := ts.resolve(h.span.SpanID(), h.span.ParentSpanID())
		if res == unresolved {
			kept = append(kept, h)
			continue
		}
		out = append(out, applyResolution(h, res, ancestor))
	}
	s.setHeld(ts, kept, now)
	return out
}

// releaseAll makes every held span of ts a root and returns them.
func (s *integrityState) releaseAll(ts *traceState, reason reparentReason, out []releasedSpan, now time.Time) []releasedSpan {
	for _, h := range ts.held {
		makeRoot(h.span)
		out = append(out, releasedSpan{heldSpan: h, reparented: true, reason: reason})
	}
	s.setHeld(ts, ts.held[:0], now)
	return out
}

// setHeld replaces the held spans of ts and moves the trace to the idle list when none is left.
func (s *integrityState) setHeld(ts *traceState, held []heldSpan, now time.Time) {
	wasWaiting := len(ts.held) > 0
	s.spansHeld -= len(ts.held) - len(held)
	clear(ts.held[len(held):]) // let released spans be collected
	ts.held = held
	if wasWaiting && len(held) == 0 {
		s.waiting.Remove(ts.elem)
		ts.lastActivity = now
		ts.waitingSince = time.Time{}
		ts.elem = s.idle.PushBack(ts)
	}
}

// expire releases, as roots, the held spans of traces idle for wait_duration or waiting for
// max_wait_duration, and forgets traces idle for remember_duration.
func (s *integrityState) expire(now time.Time, out []releasedSpan) []releasedSpan {
	for e := s.waiting.Front(); e != nil; {
		next := e.Next()
		ts := e.Value.(*traceState)
		if now.Sub(ts.lastActivity) >= s.cfg.WaitDuration || now.Sub(ts.waitingSince) >= s.cfg.MaxWaitDuration {
			out = s.releaseAll(ts, reparentWaitExpired, out, now)
		}
		e = next
	}
	for e := s.idle.Front(); e != nil; {
		ts := e.Value.(*traceState)
		if now.Sub(ts.lastActivity) < s.cfg.RememberDuration {
			break
		}
		e = e.Next()
		s.forget(ts)
	}
	return out
}

// evict enforces max_traces: it forgets the traces idle the longest first; only when every trace in
// memory holds spans does it release the oldest waiting trace's spans as roots. It reports how many
// waiting traces it evicted.
func (s *integrityState) evict(out []releasedSpan, now time.Time) ([]releasedSpan, int) {
	evictedWaiting := 0
	for len(s.traces) > s.cfg.MaxTraces {
		if e := s.idle.Front(); e != nil {
			s.forget(e.Value.(*traceState))
			continue
		}
		ts := s.waiting.Front().Value.(*traceState)
		out = s.releaseAll(ts, reparentTraceEvicted, out, now)
		s.forget(ts)
		evictedWaiting++
	}
	return out, evictedWaiting
}

// drain releases every held span as a root and forgets every trace (shutdown).
func (s *integrityState) drain(out []releasedSpan, now time.Time) []releasedSpan {
	for _, ts := range s.traces {
		out = s.releaseAll(ts, reparentShutdown, out, now)
		s.forget(ts)
	}
	return out
}

func (s *integrityState) forget(ts *traceState) {
	if len(ts.held) > 0 {
		s.waiting.Remove(ts.elem)
	} else {
		s.idle.Remove(ts.elem)
	}
	delete(s.traces, ts.id)
}

func applyResolution(h heldSpan, res resolution, ancestor pcommon.SpanID) releasedSpan {
	r := releasedSpan{heldSpan: h}
	switch res {
	case resolvedAncestor:
		reparent(h.span, ancestor)
		r.reparented, r.reason = true, reparentDroppedParent
	case resolvedRoot:
		makeRoot(h.span)
		r.reparented, r.reason = true, reparentNoKeptAncestor
	}
	return r
}

// reparent points span at newParent and records the parent it had.
func reparent(span ptrace.Span, newParent pcommon.SpanID) {
	original := span.ParentSpanID()
	if _, ok := span.Attributes().Get(svcattr.OriginalParentSpanID); !ok && !original.IsEmpty() {
		// A span already re-parented by an earlier gateway keeps its first original parent.
		span.Attributes().PutStr(svcattr.OriginalParentSpanID, hex.EncodeToString(original[:]))
	}
	span.SetParentSpanID(newParent)
}

// makeRoot makes span a root of its trace.
func makeRoot(span ptrace.Span) { reparent(span, pcommon.SpanID{}) }
