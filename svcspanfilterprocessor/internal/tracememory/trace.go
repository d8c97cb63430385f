package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"encoding/hex"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/svcattr"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
)

// spanState is what the memory knows of a span it has seen.
type spanState uint8

const (
	stateKept      spanState = iota + 1 // kept: delivered (or held, to be delivered)
	stateDropped                        // dropped by the filter
	stateConnector                      // dropped, but delivered as a connector span
)

// record is what a trace remembers of one span: enough to walk up through dropped ancestors.
type record struct {
	parent pcommon.SpanID
	state  spanState
}

// Memory costs counted in the byte budget for what is not a held span (Go map entries with overhead).
const (
	traceCost   = 256
	recordCost  = 48
	openCost    = 32
	itemCost    = 256
	contentCost = 64
)

type trace struct {
	id      pcommon.TraceID
	records map[pcommon.SpanID]record
	held    map[pcommon.SpanID]*item // by their own span id (a copy sent again replaces the held one)
	// waitingOn: the first held item whose walk stopped at a span (the rest linked through waitNext).
	waitingOn map[pcommon.SpanID]*item
	open      map[pcommon.SpanID]struct{}         // open parents
	content   map[pcommon.SpanID][]waitingContent // waiting for its span, by span id
	// refs holds what few traces need (nil until then): a remembered trace stays 128 bytes.
	refs       *traceRefs
	experiment bool
	gate       gate.Status // with a gate (gated.go)

	lastActivity time.Time
	bytes        int64
	list         *traceList // the shard list it is on (idle, waiting or late)
	prev, next   *trace     // its neighbours there
}

// traceRefs: the journal records a trace keeps until it is forgotten, and content joined onto its spans.
type traceRefs struct {
	records []*RecordRef // of its dropped spans and open parents (journaled.go)
	// joinedRecs: of content joined onto spans that went on in their own call (a resend after a
	// refusal of that call joins it again); joined: that content, by span id, for a copy sent again.
	joinedRecs []*RecordRef
	joined     map[pcommon.SpanID][]waitingContent
	gate       any   // the gate's state of the trace (gated.go)
	gateHeld   int64 // bytes the gate holds itself for the trace
}

// made is *m, made on first use: a remembered trace keeps no empty map (the GC marks each).
func made[K comparable, V any](m *map[K]V) map[K]V {
	if *m == nil {
		*m = map[K]V{}
	}
	return *m
}

func (t *trace) keepRefs() *traceRefs {
	if t.refs == nil {
		t.refs = &traceRefs{}
	}
	return t.refs
}

// walk goes up from p through spans known to be dropped to the first span the trace has not seen
// (unknown) or a delivered one; at is empty for a root (no parent, every ancestor dropped, a cycle).
func (t *trace) walk(self, p pcommon.SpanID) (at pcommon.SpanID, unknown bool) {
	for range len(t.records) + 1 {
		if p.IsEmpty() || p == self {
			break
		}
		rec, ok := t.records[p]
		if !ok || rec.state != stateDropped {
			return p, !ok
		}
		p = rec.parent
	}
	return pcommon.SpanID{}, false
}

// parentOf walks up from p: the span waits on the unknown span at, or goes on below at (empty: a
// root), counted for why (only then). When the parents from at lead back to self (a hostile tree), self goes on
// as a root and its record forgets its parent: no later walk follows the cycle.
func (t *trace) parentOf(self, p pcommon.SpanID) (at pcommon.SpanID, why ReparentReason, wait bool) {
	at, unknown := t.walk(self, p)
	if unknown || at.IsEmpty() {
		return at, ReparentNoKeptAncestor, unknown
	}
	for steps, q := 0, at; steps <= len(t.records) && !q.IsEmpty(); steps++ {
		if q == self {
			if rec, ok := t.records[self]; ok {
				t.records[self] = record{state: rec.state}
			}
			return pcommon.SpanID{}, ReparentCycle, false
		}
		rec, ok := t.records[q]
		if !ok {
			break
		}
		q = rec.parent
	}
	return at, ReparentDroppedParent, false
}

// setRecord remembers a span and returns the bytes that added.
func (t *trace) setRecord(id, parent pcommon.SpanID, st spanState) int64 {
	if id.IsEmpty() {
		return 0
	}
	old, had := t.records[id]
	if had && old.state == stateConnector && st == stateDropped {
		st = stateConnector // the dropped span sent again: its connector is already out
	}
	made(&t.records)[id] = record{parent: parent, state: st}
	if had {
		return 0
	}
	return recordCost
}

// open makes id an open parent of t, child going on pointing at it; journalAfterApply writes it
// for every child (any may be the parent's own parent: after a restart a cycle is still cut).
func (out *released) open(m *Memory, t *trace, id, child pcommon.SpanID) {
	t.addOpen(m, id)
	if m.cfg.Journaled {
		out.opened.add(t, id[:], child[:])
	}
}

func (t *trace) addOpen(m *Memory, id pcommon.SpanID) {
	if _, ok := t.open[id]; !ok {
		made(&t.open)[id] = struct{}{}
		m.addBytes(t, openCost)
	}
}

func (t *trace) closeOpen(m *Memory, id pcommon.SpanID) bool {
	_, ok := t.open[id]
	if ok {
		delete(t.open, id)
		m.addBytes(t, -openCost)
	}
	return ok
}

// setWaitingHead makes first the first item of the list waiting on on; nil removes the list.
func (t *trace) setWaitingHead(on pcommon.SpanID, first *item) {
	if first != nil {
		made(&t.waitingOn)[on] = first
	} else if delete(t.waitingOn, on); len(t.waitingOn) == 0 {
		t.waitingOn = nil // a remembered trace keeps no empty index
	}
}

// removeWaiting takes it out of the waiting index, if it is in, in constant time (settling n is linear).
func (t *trace) removeWaiting(it *item) {
	if !it.indexed {
		return
	}
	it.indexed = false
	if it.waitPrev != nil {
		it.waitPrev.waitNext = it.waitNext
	} else { // the first of its list
		t.setWaitingHead(it.waitOn, it.waitNext)
	}
	if it.waitNext != nil {
		it.waitNext.waitPrev = it.waitPrev
	}
	it.waitPrev, it.waitNext = nil, nil
}

func (t *trace) addWaiting(it *item, on pcommon.SpanID) {
	it.waitOn, it.indexed = on, true
	next := t.waitingOn[on]
	it.waitPrev, it.waitNext = nil, next
	if next != nil {
		next.waitPrev = it
	}
	t.setWaitingHead(on, it)
}

// takeWaiting takes the items waiting on id out of the index: the first, the rest through waitNext.
func (t *trace) takeWaiting(id pcommon.SpanID) *item {
	first := t.waitingOn[id]
	if first == nil {
		return nil
	}
	t.setWaitingHead(id, nil)
	for it := first; it != nil; it = it.waitNext {
		it.indexed = false
	}
	return first
}

// touch returns the trace of id, made on first sight, active at now.
func (sh *shard) touch(m *Memory, id pcommon.TraceID, now time.Time) *trace {
	t, ok := sh.traces[id]
	if !ok {
		t = &trace{id: id, bytes: traceCost, lastActivity: now}
		sh.traces[id] = t
		sh.pending.traces++
		sh.pending.bytes += t.bytes
	} else if now.After(t.lastActivity) {
		t.lastActivity = now
	}
	sh.place(t)
	return t
}

// place puts t at the back of its state's list, also when its activity lies in the past
// (recovery): the idle list is then only roughly ordered, which only delays forgetting it.
func (sh *shard) place(t *trace) {
	want := &sh.idle
	if len(t.held) > 0 || (t.refs != nil && t.refs.gateHeld > 0) {
		want = &sh.waiting
	}
	if t.list != want || want.tail != t {
		t.unlist()
		want.pushBack(t)
	}
}

func (m *Memory) addBytes(t *trace, n int64) {
	t.bytes += n
	m.shards[m.shardOf(t.id)].pending.bytes += n
}

// hold makes it a held item of t; the caller has taken any earlier copy out.
func (sh *shard) hold(m *Memory, t *trace, it *item) {
	made(&t.held)[it.span.SpanID()] = it
	if !it.sized {
		sh.unsized.push(it)
	}
	m.addBytes(t, it.bytes)
	sh.pending.heldBytes += it.bytes
	sh.pending.heldSpans++
	if it.reason&WaitGate != 0 {
		sh.pending.gatedBytes += it.bytes
	}
	if len(t.held) == 1 {
		sh.place(t)
	}
}

// unhold takes it out of t's held spans; content it gathered and did not join waits again.
func (sh *shard) unhold(m *Memory, t *trace, it *item) {
	if id := it.span.SpanID(); len(it.content) > 0 {
		sh.setContent(t, id, append(it.content, t.content[id]...))
		it.content = nil
	}
	t.removeWaiting(it)
	delete(t.held, it.span.SpanID())
	if !it.sized {
		sh.unsized.remove(it) // never sized: it keeps its estimate
	}
	sh.gateWaitOver(it)
	m.addBytes(t, -it.bytes)
	sh.pending.heldBytes -= it.bytes
	sh.pending.heldSpans--
	if len(t.held) == 0 {
		t.held = nil // a remembered trace keeps no empty map
		sh.place(t)
	}
}

// settleParent gives held item it its parent; it is released unless it still waits for content.
func (sh *shard) settleParent(m *Memory, t *trace, it *item, parent pcommon.SpanID, reparent ReparentReason, why ReleaseReason, out *released) {
	t.removeWaiting(it)
	it.reason &^= WaitParent
	it.waitOn = pcommon.SpanID{}
	out.reparent(it.span, parent, reparent)
	m.settled(sh, t, out, it.span, it.origin)
	if it.reason == 0 {
		sh.release(m, t, it, why, out)
	}
}

func (sh *shard) release(m *Memory, t *trace, it *item, why ReleaseReason, out *released) {
	if len(it.content) > 0 { // what it gathered, complete or not: its wait is over
		m.apply(t, it.span, it.content, it.content, out)
		m.addBytes(t, -sumOf(it.content, waitingContent.bytes))
		sh.resize(m, it, itemSize(it.span)) // sized again, it counts the content
		it.contentRefs = append(it.contentRefs, refsOf(it.content)...)
		it.content = nil
	}
	sh.unhold(m, t, it)
	out.items = append(out.items, it)
	out.stats.Released[why]++
}

// endWaits ends the waits in ends that it has, its parent wait by rule 1 (it points at the unknown
// span its walk stopped at, now open); it is released for why when it waits for nothing else.
func (sh *shard) endWaits(m *Memory, it *item, ends HeldReason, now time.Time, why ReleaseReason,
	out *released) {
	if it.reason&ends&WaitContent != 0 {
		it.reason &^= WaitContent
		out.stats.ContentWaits = append(out.stats.ContentWaits, now.Sub(it.heldAt))
	}
	if it.reason&ends&WaitParent != 0 {
		out.open(m, it.trace, it.waitOn, it.span.SpanID())
		sh.settleParent(m, it.trace, it, it.waitOn, ReparentOpenAncestor, why, out)
	} else if it.reason == 0 {
		sh.release(m, it.trace, it, why, out)
	}
}

// forget removes a trace that holds nothing.
func (sh *shard) forget(m *Memory, t *trace, out *released) {
	for id, cs := range t.content {
		sh.dropContent(m, t, id, cs, UnmatchedNoSpan, out) // the last takes t out of withContent
	}
	if t.refs != nil {
		out.done = append(append(out.done, t.refs.records...), t.refs.joinedRecs...)
	}
	t.unlist()
	delete(sh.traces, t.id)
	sh.pending.traces--
	sh.pending.bytes -= t.bytes
	t.bytes = 0
}

// compact makes an idle trace late (doc.go): a walk reaching a forgotten kept span waits as at an
// unknown one, then goes on pointing at it (it is in the delivered tree). Kept spans pointing at an
// open parent stay: that parent arriving with one of them as its own parent is a cycle to cut.
func (sh *shard) compact(m *Memory, t *trace, out *released) {
	var bridges map[pcommon.SpanID]record
	for id, rec := range t.records {
		if rec.state == stateKept {
			at, unknown := t.walk(id, rec.parent)
			if _, open := t.open[at]; !unknown || !open {
				continue
			}
		}
		made(&bridges)[id] = rec
	}
	m.addBytes(t, -int64(len(t.records)-len(bridges))*recordCost)
	t.records = bridges        // a new map: a Go map does not shrink when entries are deleted
	if r := t.refs; r != nil { // its kept spans are forgotten: no copy of them is recognised
		for _, cs := range r.joined {
			m.addBytes(t, -sumOf(cs, waitingContent.bytes))
		}
		out.done = append(out.done, r.joinedRecs...)
		r.joined, r.joinedRecs = nil, nil
	}
	t.unlist()
	sh.late.pushBack(t)
}

// reparent points span at parent, counted for why, unless that is its parent already; the parent
// it had is recorded once: a span re-parented by an earlier gateway keeps its true original parent.
func (out *released) reparent(span ptrace.Span, parent pcommon.SpanID, why ReparentReason) {
	original := span.ParentSpanID()
	if parent == original {
		return
	}
	out.stats.Reparented[why]++
	if attrs := span.Attributes(); !original.IsEmpty() {
		if _, had := attrs.Get(svcattr.OriginalParentSpanID); !had {
			// Room for a few more: an append would double the slice, which attributes usually fill.
			attrs.EnsureCapacity(attrs.Len() + 4)
			var buf [2 * len(original)]byte
			hex.Encode(buf[:], original[:])
			attrs.PutStr(svcattr.OriginalParentSpanID, string(buf[:]))
		}
	}
	span.SetParentSpanID(parent)
}

// released collects what one operation released, and its events.
type released struct {
	items []*item
	stats Stats
	done  []*RecordRef // done once the shard locks are released (no I/O under them)
	// to journal: open parents, dropped spans, the gate's per-trace entries (gated.go)
	opened, dropped, gated entries
	after                  []any // the gate's, for gate.Finished
}
