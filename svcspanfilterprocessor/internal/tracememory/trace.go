package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// spanState is what the memory knows of a span it has seen.
type spanState uint8

const (
	stateKept      spanState = iota + 1 // kept: delivered (or held, to be delivered)
	stateDropped                        // dropped by the filter
	stateConnector                      // dropped, but delivered as a connector span
)

// delivered reports whether a span in this state is (or will be) in the delivered tree.
func (s spanState) delivered() bool { return s == stateKept || s == stateConnector }

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

// trace is the memory of one trace.
type trace struct {
	id      pcommon.TraceID
	records map[pcommon.SpanID]record
	// held are the held items by their own span id (a span sent twice replaces its held copy).
	held map[pcommon.SpanID]*item
	// waitingOn indexes held items by the unknown span their parent walk stopped at, so the arrival
	// of that span resolves exactly them: the first of a list linked through item.waitNext. Change
	// it through setWaitingHead, addWaiting, removeWaiting and takeWaiting.
	waitingOn map[pcommon.SpanID]*item
	// open are parents that delivered spans point at and that were not seen when they were delivered.
	open map[pcommon.SpanID]struct{}
	// content waits for its span (issue 18), by span id.
	content map[pcommon.SpanID][]waitingContent
	// refs holds what few traces need (nil until then): a remembered trace stays 128 bytes, the
	// heap per remembered trace that BenchmarkRememberedTraces measures.
	refs       *traceRefs
	experiment bool

	lastActivity time.Time
	bytes        int64
	// list is the shard list the trace is on (idle, waiting or late), prev and next its neighbours
	// there.
	list       *traceList
	prev, next *trace
}

// traceRefs are the journal records a trace keeps until it is forgotten and the content joined
// onto its spans.
type traceRefs struct {
	// records are those of its dropped spans and open parents (dropped.go).
	records []*RecordRef
	// joinedRecs are the records of content joined onto spans that went on in their own call (a
	// resend after a refusal of that call joins the content again).
	joinedRecs []*RecordRef
	// joined is the content joined onto spans that went on (or are held carrying it), by span id:
	// a copy of such a span sent again (a client retrying) gets it too, for as long as the trace
	// is remembered, so that the copy the platform keeps last is never one without it.
	joined map[pcommon.SpanID][]waitingContent
}

// joinedOf is the content joined onto span id; joinedMap all of it, by span id.
func (t *trace) joinedOf(id pcommon.SpanID) []waitingContent {
	if t.refs == nil {
		return nil
	}
	return t.refs.joined[id]
}

func (t *trace) joinedMap() map[pcommon.SpanID][]waitingContent {
	if t.refs == nil {
		return nil
	}
	return t.refs.joined
}

// keepRefs is t's traceRefs, made on first use.
func (t *trace) keepRefs() *traceRefs {
	if t.refs == nil {
		t.refs = &traceRefs{}
	}
	return t.refs
}

func newTrace(id pcommon.TraceID) *trace {
	return &trace{id: id, bytes: traceCost}
}

// walkEnd is where a parent walk through known-dropped spans ends.
type walkEnd uint8

const (
	endRoot      walkEnd = iota // no parent, or every ancestor is known dropped
	endDelivered                // a kept span or a connector
	endUnknown                  // a span the trace has not seen
)

// walk goes up from parent through spans known to be dropped and returns where it ends and the id
// there (empty for endRoot). A malformed cycle ends as a root.
func (t *trace) walk(self, parent pcommon.SpanID) (walkEnd, pcommon.SpanID) {
	p := parent
	for steps := 0; steps <= len(t.records); steps++ {
		if p.IsEmpty() || p == self {
			return endRoot, pcommon.SpanID{}
		}
		rec, ok := t.records[p]
		switch {
		case !ok:
			return endUnknown, p
		case rec.state.delivered():
			return endDelivered, p
		}
		p = rec.parent
	}
	return endRoot, pcommon.SpanID{}
}

// cutsCycle is asked before span id goes on below at, a span in the delivered tree: when the
// chain of parents from at, through every span the trace knows, leads back to id, the two would
// form a cycle (a span that is its own ancestor: a hostile or broken tree, within a request or
// across requests). It then reports true, and id's record forgets its parent, so that id goes on
// as a root and no later walk follows the cycle.
func (t *trace) cutsCycle(id, at pcommon.SpanID) bool {
	p := at
	for steps := 0; steps <= len(t.records) && !p.IsEmpty(); steps++ {
		if p == id {
			if rec, ok := t.records[id]; ok {
				t.records[id] = record{state: rec.state}
			}
			return true
		}
		rec, ok := t.records[p]
		if !ok {
			return false
		}
		p = rec.parent
	}
	return false
}

// settledAt is the parent a span goes on with when its parent walk ended at a root or at a
// delivered span, and the reason counted when that is not the parent it came with.
func (t *trace) settledAt(id pcommon.SpanID, end walkEnd, at pcommon.SpanID,
) (pcommon.SpanID, ReparentReason) {
	switch {
	case end == endRoot:
		return pcommon.SpanID{}, ReparentNoKeptAncestor
	case t.cutsCycle(id, at):
		return pcommon.SpanID{}, ReparentCycle
	}
	return at, ReparentDroppedParent
}

// setRecord remembers a span, and reports the size change.
func (t *trace) setRecord(id, parent pcommon.SpanID, st spanState) int64 {
	if id.IsEmpty() {
		return 0
	}
	if t.records == nil {
		t.records = make(map[pcommon.SpanID]record, 8)
	}
	old, had := t.records[id]
	if had && old.state == stateConnector && st == stateDropped {
		st = stateConnector // the dropped span sent again: its connector is already out
	}
	t.records[id] = record{parent: parent, state: st}
	if had {
		return 0
	}
	return recordCost
}

// Open parents are ids that delivered spans point at and that the memory has not seen: a dropped
// span with such an id, arriving within late_parent_window, goes on as a connector span so that
// the tree stays whole. They are journaled (KindOpenParents, dropped.go) before the spans pointing at
// them go on, so that a restart still bridges them; each with a span that went on pointing at it,
// so that the parent arriving after the restart with that span as its own parent is cut as a cycle
// (trace.cutsCycle).

// open makes id an open parent of t (under the shard lock), child going on pointing at it; it is
// journaled with what the operation released (journalAfterApply), for every child (any may be the
// parent's own parent).
func (out *released) open(m *Memory, t *trace, id, child pcommon.SpanID) {
	t.addOpen(m, id)
	if m.cfg.Journaled {
		out.opened.add(t, id[:], child[:])
	}
}

func (t *trace) addOpen(m *Memory, id pcommon.SpanID) {
	if t.open == nil {
		t.open = map[pcommon.SpanID]struct{}{}
	}
	if _, ok := t.open[id]; !ok {
		t.open[id] = struct{}{}
		m.addBytes(t, openCost)
	}
}

// closeOpen closes id if it is an open parent of t (it arrived) and reports whether it was.
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
		if t.waitingOn == nil {
			t.waitingOn = map[pcommon.SpanID]*item{}
		}
		t.waitingOn[on] = first
	} else if delete(t.waitingOn, on); len(t.waitingOn) == 0 {
		t.waitingOn = nil // a remembered trace keeps no empty index
	}
}

// removeWaiting takes it out of the waiting index in constant time, so that the arrival of a
// parent that many spans wait on settles them in linear time. It does nothing when it is not in
// the index (indexed, so that this costs no lookup).
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

// takeWaiting takes the items waiting on id out of the index, all at once, and returns the first;
// the rest follow through item.waitNext, still linked for the caller to walk.
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
