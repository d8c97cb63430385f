package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"encoding/hex"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/svcattr"
)

// The methods below run under the shard's lock.

// touch returns the trace of id (created on first sight) marked active at now.
func (sh *shard) touch(m *Memory, id pcommon.TraceID, now time.Time) *trace {
	t, ok := sh.traces[id]
	if !ok {
		t = newTrace(id)
		t.lastActivity = now
		sh.traces[id] = t
		sh.pending.traces++
		sh.pending.bytes += t.bytes
	} else if now.After(t.lastActivity) {
		t.lastActivity = now
	}
	sh.place(t)
	return t
}

// place puts t at the back of the list its state belongs to. A trace whose activity lies in the
// past (recovery) goes to the back too: expiry scans the waiting list whole, and the idle lists are
// only approximately ordered then, which only delays forgetting it.
func (sh *shard) place(t *trace) {
	want := sh.idle
	if len(t.held) > 0 {
		want = sh.waiting
	}
	if t.list == want && want.tail == t {
		return
	}
	if t.list != nil {
		t.list.remove(t)
	}
	want.pushBack(t)
}

// addBytes changes the size of t and of the memory (under t's shard lock).
func (m *Memory) addBytes(t *trace, n int64) {
	t.bytes += n
	m.shards[m.shardOf(t.id)].pending.bytes += n
}

// hold makes it a held item of t; the caller has taken any earlier copy out.
func (sh *shard) hold(m *Memory, t *trace, it *item) {
	if t.held == nil {
		t.held = map[pcommon.SpanID]*item{}
	}
	it.held = true
	t.held[it.span.SpanID()] = it
	if !it.sized {
		sh.unsized.push(it)
	}
	m.addBytes(t, it.bytes)
	sh.pending.heldBytes += it.bytes
	sh.pending.heldSpans++
	if len(t.held) == 1 {
		sh.place(t)
	}
}

// unhold takes it out of t's held spans (it is released or discarded). Content it gathered and did
// not join goes back to wait among the trace's content.
func (sh *shard) unhold(m *Memory, t *trace, it *item) {
	sh.returnHeldContent(t, it)
	t.removeWaiting(it)
	delete(t.held, it.span.SpanID())
	if !it.sized {
		sh.unsized.remove(it) // never sized: it keeps its estimate
	}
	it.held = false
	m.addBytes(t, -it.bytes)
	sh.pending.heldBytes -= it.bytes
	sh.pending.heldSpans--
	if len(t.held) == 0 {
		t.held = nil // a remembered trace keeps no empty index (the GC marks it in every cycle)
		sh.place(t)
	}
}

// settleParent gives held item it the parent it goes on with; it is released unless it still waits
// for content.
func (sh *shard) settleParent(m *Memory, t *trace, it *item, parent pcommon.SpanID, reparent ReparentReason, why ReleaseReason, out *released) {
	t.removeWaiting(it)
	it.reason &^= WaitParent
	it.waitOn = pcommon.SpanID{}
	if parent != it.span.ParentSpanID() {
		setParent(it.span, parent)
		out.stats.Reparented[reparent]++
	}
	if it.reason == 0 {
		sh.release(m, t, it, why, out)
	}
}

// release hands a settled item to out.
func (sh *shard) release(m *Memory, t *trace, it *item, why ReleaseReason, out *released) {
	sh.joinHeldContent(m, t, it, out) // what it gathered, complete or not: its wait is over
	sh.unhold(m, t, it)
	it.reason = 0
	out.items = append(out.items, it)
	out.stats.Released[why]++
}

// expireParent ends the parent wait of it at the unknown span its walk stopped at: rule 1, the span
// keeps pointing at its (unknown) parent, never becomes a root, and that parent is now open.
func (sh *shard) expireParent(m *Memory, t *trace, it *item, why ReleaseReason, out *released) {
	open := it.waitOn
	out.open(m, t, open, it.span.SpanID())
	sh.settleParent(m, t, it, open, ReparentOpenAncestor, why, out)
}

// forget removes a trace that holds nothing.
func (sh *shard) forget(m *Memory, t *trace, out *released) {
	for id, cs := range t.content {
		out.done = append(out.done, refsOf(cs)...)
		out.stats.ContentUnmatched[UnmatchedNoSpan] += recordsOf(cs)
		delete(t.content, id)
	}
	delete(sh.withContent, t)
	if t.refs != nil {
		out.done = append(append(out.done, t.refs.records...), t.refs.joinedRecs...)
	}
	if t.list != nil {
		t.list.remove(t)
	}
	delete(sh.traces, t.id)
	sh.pending.traces--
	sh.pending.bytes -= t.bytes
	t.bytes = 0
}

// compact forgets the records of the kept spans of an idle trace but keeps, for the late parent
// window, its open parents, its experiment flag and the records of its dropped spans (and
// connectors): a late parent, or a late kept span, whose parent walk passes through spans dropped
// long ago still reaches the nearest kept ancestor. A walk that reaches a forgotten kept span stops
// there as at an unknown one, which only delays the span by wait_duration: it then goes on pointing
// at that kept span, which is in the delivered tree. The kept spans that went on pointing at an
// open parent stay too: that parent arriving with one of them as its own parent is a cycle to cut.
func (sh *shard) compact(m *Memory, t *trace, out *released) {
	var bridges map[pcommon.SpanID]record
	for id, rec := range t.records {
		if rec.state == stateKept {
			end, at := t.walk(id, rec.parent)
			if _, open := t.open[at]; end != endUnknown || !open {
				continue
			}
		}
		if bridges == nil {
			bridges = map[pcommon.SpanID]record{}
		}
		bridges[id] = rec
	}
	m.addBytes(t, -int64(len(t.records)-len(bridges))*recordCost)
	t.records = bridges // a new map: a Go map does not shrink when entries are deleted
	for id := range t.joinedMap() {
		sh.forgetJoined(m, t, id) // its kept spans are forgotten: no copy of them is recognised
	}
	if t.refs != nil {
		out.done = append(out.done, t.refs.joinedRecs...)
		t.refs.joinedRecs = nil
	}
	if t.list != nil {
		t.list.remove(t)
	}
	sh.late.pushBack(t)
}

// spareAttributes is the room setParent makes for attributes added after its own (the next
// processors may add some).
const spareAttributes = 4

// setParent points span at parent and records the parent it had, once: a span re-parented by an
// earlier gateway keeps its true original parent (and its attributes are not copied for nothing).
func setParent(span ptrace.Span, parent pcommon.SpanID) {
	if original := span.ParentSpanID(); !original.IsEmpty() {
		attrs := span.Attributes()
		if _, had := attrs.Get(svcattr.OriginalParentSpanID); !had {
			// Room for a few more: a span's attributes usually fill their slice, which an append
			// would double (twice the bytes to allocate and clear, for the GC to scan).
			attrs.EnsureCapacity(attrs.Len() + spareAttributes)
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
	// done are journal records to mark done once the shard locks are released (Done may write to
	// the journal: no disk I/O under a shard lock).
	done []*RecordRef
	// opened are the parents that became open and dropped the dropped spans, to journal
	// (journalAfterApply).
	opened, dropped entries
}

// finishRefs marks the collected records done; call it with no shard lock held.
func (out *released) finishRefs() {
	for _, r := range out.done {
		r.Done(1)
	}
	out.done = nil
}
