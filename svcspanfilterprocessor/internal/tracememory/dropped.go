package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// Trees survive a crash: the ids and parents of dropped spans are journaled (KindDropped, 33 bytes
// each) before the call that brought them is acknowledged, and stay until their trace is forgotten
// (the byte budget bounds them as it bounds the records in memory). A kept span arriving after a
// restart below a dropped span that arrived before it still walks to its nearest kept ancestor,
// instead of going on as an orphan; also below a trace that arrived whole in one call.

// droppedSpan is a dropped span to journal.
type droppedSpan struct {
	t          *trace
	id, parent pcommon.SpanID
	connector  bool // it went on as a connector span: a copy sent again goes on as one too
}

// droppedBytes is the size of one dropped span in a KindDropped payload: trace id, span id, parent
// span id, and 1 for a connector (else 0).
const droppedBytes = 16 + 8 + 8 + 1

// refCost is what one journal record reference of a trace counts in the budget.
const refCost = 16

// pickDropped adds to out the dropped spans to journal of the call's spans in one shard (idx into
// refs, admitted): of a trace not yet durable every dropped span it has, else the call's own.
func pickDropped(refs []spanRef, idx []int32, out *released) {
	seen := map[*trace]bool{}
	for _, i := range idx {
		r := &refs[i]
		t := r.trace
		switch id := r.span.SpanID(); {
		case !t.durable() && !seen[t]:
			seen[t] = true
			for id, rec := range t.records {
				if rec.state != stateKept {
					out.dropped = append(out.dropped, droppedSpan{t, id, rec.parent, rec.state == stateConnector})
				}
			}
		case t.durable() && !r.kept && !id.IsEmpty():
			out.dropped = append(out.dropped, droppedSpan{t, id, t.records[id].parent, r.connector})
		}
	}
}

// journalDropped writes one KindDropped record for dropped. Call it with no shard lock held, before
// the call is acknowledged.
func (m *Memory) journalDropped(ctx context.Context, dropped []droppedSpan) error {
	if len(dropped) == 0 {
		return nil
	}
	payload := make([]byte, 0, droppedBytes*len(dropped))
	traces := make([]*trace, 0, len(dropped))
	for _, d := range dropped {
		payload = append(append(append(payload, d.t.id[:]...), d.id[:]...), d.parent[:]...)
		if d.connector {
			payload = append(payload, 1)
		} else {
			payload = append(payload, 0)
		}
		traces = append(traces, d.t)
	}
	if err := m.journalTraces(ctx, journal.KindDropped, payload, traces); err != nil {
		return fmt.Errorf("recording dropped spans: %w", err)
	}
	return nil
}

// journalTraces appends a record of kind and attaches it to traces (each entry's), which keep it
// until they are forgotten. Call it with no shard lock held.
func (m *Memory) journalTraces(ctx context.Context, kind journal.Kind, payload []byte, traces []*trace,
) error {
	id, err := m.journal.Append(ctx, kind, m.cfg.Now(), nil, payload)
	if err != nil {
		return err
	}
	ref := m.NewRecordRef(id, 1) // a guard until every trace holds it
	for _, t := range traces {
		sh := m.shards[m.shardOf(t.id)]
		sh.mu.Lock()
		if sh.traces[t.id] == t { // not forgotten while the record was written
			t.attach(m, ref, kind == journal.KindDropped)
		}
		sh.unlock(m)
	}
	ref.Done(1)
	return nil
}

// attach makes ref one of the records t keeps until it is forgotten (once, for a record of many of
// its spans); dropped: a record of its dropped spans.
func (t *trace) attach(m *Memory, ref *RecordRef, dropped bool) {
	r := t.keepRefs()
	r.durable = r.durable || dropped
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

// recoverEntries restores the entries of a KindDropped or KindOpen record (size bytes each: a
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
		t.attach(m, ref, rec.Kind == journal.KindDropped)
		sh.unlock(m)
	}
	ref.Done(1)
	return nil
}
