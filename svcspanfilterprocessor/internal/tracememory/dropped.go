package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// Trees survive a crash: the ids and parents of a call's dropped spans are journaled (KindDropped,
// 33 bytes each) before the call is acknowledged, and stay until their trace is forgotten (the
// byte budget bounds them as it bounds the records in memory). A kept span arriving after a
// restart below a dropped span that arrived before it still walks to its nearest kept ancestor,
// instead of going on as an orphan; also below a trace that arrived whole in one call.
//
// What that costs on disk: one transaction per call that drops spans. Their removal, when their
// trace is forgotten, rides on the next write (journal.Storage's lazy records): removed late, they
// only restore forgotten traces after a restart. A failed write is logged, not repaired by a later
// call: only the placement of late spans after a crash depends on it.

// droppedBytes is the size of one dropped span in a KindDropped payload: trace id, span id, parent
// span id, and 1 for a connector (else 0); openBytes of one open parent in a KindOpenParents payload:
// trace id, span id, the id of the span that went on pointing at it.
const (
	droppedBytes = 16 + 8 + 8 + 1
	openBytes    = 16 + 8 + 8
	openBytesV1  = 16 + 8 // KindOpen, as v0.1.0 wrote it
)

// refCost is what one journal record reference of a trace counts in the budget.
const refCost = 16

// entries are the entries of one KindOpenParents or KindDropped record to write (each its trace's id,
// then its fields) and the trace of each.
type entries struct {
	payload []byte
	traces  []*trace
}

func (e *entries) add(t *trace, fields ...[]byte) {
	e.payload = append(e.payload, t.id[:]...)
	for _, f := range fields {
		e.payload = append(e.payload, f...)
	}
	e.traces = append(e.traces, t)
}

// pickDropped adds to out the call's dropped spans in one shard (idx into refs, admitted).
func pickDropped(refs []spanRef, idx []int32, out *released) {
	n := 0
	for _, i := range idx {
		if !refs[i].kept {
			n++
		}
	}
	out.dropped.payload = slices.Grow(out.dropped.payload, droppedBytes*n) // grown once, not by doubling
	out.dropped.traces = slices.Grow(out.dropped.traces, n)
	for _, i := range idx {
		r := &refs[i]
		if id := r.span.SpanID(); !r.kept && !id.IsEmpty() {
			rec := r.trace.records[id]
			connector := []byte{0}
			if rec.state == stateConnector {
				connector[0] = 1
			}
			out.dropped.add(r.trace, id[:], rec.parent[:], connector)
		}
	}
}

// journalAfterApply writes the open parents and dropped spans an operation made known. Call it with
// no shard lock held, before the call is acknowledged and the spans pointing at them go on. A
// failure is logged, not returned: a call refused after apply would be sent again and what went on
// would reach the platform twice.
func (m *Memory) journalAfterApply(out *released) {
	err := errors.Join(m.journalEntries(journal.KindOpenParents, out.opened),
		m.journalEntries(journal.KindDropped, out.dropped))
	if err != nil {
		m.cfg.Logger.Warn("Could not journal open parents or dropped spans; a span arriving after a restart "+
			"below one of them may not find its nearest kept ancestor", zap.Int("parents", len(out.opened.traces)),
			zap.Int("dropped", len(out.dropped.traces)), zap.Error(err))
	}
	out.opened, out.dropped = entries{}, entries{}
}

// journalEntries appends a record of kind and attaches it to the traces of its entries, which keep
// it until they are forgotten.
func (m *Memory) journalEntries(kind journal.Kind, e entries) error {
	if len(e.traces) == 0 {
		return nil
	}
	id, err := m.journal.Append(context.Background(), kind, m.cfg.Now(), nil, e.payload)
	if err != nil {
		return fmt.Errorf("record of kind %d: %w", kind, err)
	}
	ref := m.NewRecordRef(id, 1) // a guard until every trace holds it
	for _, t := range e.traces {
		sh := m.shards[m.shardOf(t.id)]
		sh.mu.Lock()
		if sh.traces[t.id] == t { // not forgotten while the record was written
			t.attach(m, ref)
		}
		sh.unlock(m)
	}
	ref.Done(1)
	return nil
}

// attach makes ref one of the records t keeps until it is forgotten (once, for a record of many of
// its spans).
func (t *trace) attach(m *Memory, ref *RecordRef) {
	r := t.keepRefs()
	if n := len(r.records); n > 0 && r.records[n-1] == ref {
		return
	}
	r.records = append(r.records, ref)
	ref.add(1)
	m.addBytes(t, refCost)
}

// recoverDropped restores the records of a KindDropped record's dropped spans.
func (m *Memory) recoverDropped(rec journal.Record) error {
	return m.recoverEntries(rec, droppedBytes, func(t *trace, entry []byte) {
		st := stateDropped
		if entry[16] == 1 {
			st = stateConnector
		}
		m.addBytes(t, t.setRecord(pcommon.SpanID(entry[:8]), pcommon.SpanID(entry[8:16]), st))
	})
}

// recoverOpen makes the parents of a KindOpenParents record open again, and their children known as
// kept spans below them (unless known already, as a connector).
func (m *Memory) recoverOpen(rec journal.Record) error {
	return m.recoverEntries(rec, openBytes, func(t *trace, entry []byte) {
		id, child := pcommon.SpanID(entry[:8]), pcommon.SpanID(entry[8:16])
		if _, known := t.records[child]; !known {
			m.addBytes(t, t.setRecord(child, id, stateKept))
		}
		t.addOpen(m, id)
	})
}

// recoverOpenV1 makes the parents of a KindOpen record (v0.1.0: no child ids) open again.
func (m *Memory) recoverOpenV1(rec journal.Record) error {
	return m.recoverEntries(rec, openBytesV1, func(t *trace, entry []byte) {
		t.addOpen(m, pcommon.SpanID(entry[:8]))
	})
}

// recoverEntries restores the entries of a KindDropped or open parents record (size bytes each: a
// trace id, then what restore reads) and attaches the record to their traces. The traces are
// active since the record's time, as they are since their held spans' held time: a restart
// neither lengthens nor shortens late_parent_window.
func (m *Memory) recoverEntries(rec journal.Record, size int, restore func(t *trace, entry []byte)) error {
	if len(rec.Payload) == 0 || len(rec.Payload)%size != 0 {
		m.NewRecordRef(rec.ID, 1).Done(1)
		return fmt.Errorf("journal record %d: %d bytes, not entries of %d", rec.ID, len(rec.Payload), size)
	}
	ref := m.NewRecordRef(rec.ID, 1) // a guard until every trace holds it
	for p := rec.Payload; len(p) > 0; p = p[size:] {
		traceID := pcommon.TraceID(p[:16])
		sh := m.shards[m.shardOf(traceID)]
		sh.mu.Lock()
		t := sh.touch(m, traceID, rec.HeldAt)
		restore(t, p[16:size])
		t.attach(m, ref)
		sh.unlock(m)
	}
	ref.Done(1)
	return nil
}
