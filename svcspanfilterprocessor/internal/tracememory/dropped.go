package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// Trees survive a crash: with a journal, the ids and parents of dropped spans are journaled
// (KindDropped, 33 bytes each) before the call that brought them is acknowledged, so that a kept
// span arriving after a restart below a dropped span that arrived before it still walks to its
// nearest kept ancestor, or becomes a root when every ancestor was dropped, instead of waiting for
// a span that never comes and going on as an orphan.
//
// Every dropped span is journaled, until its trace is forgotten (remember_duration,
// late_parent_window or eviction: the byte budget bounds them as it bounds the records in memory),
// when the journal records go too: a trace that arrived whole in one call may still get a late
// span of another service below one of its dropped spans.

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

// callTraces picks the dropped spans of one call in one shard (journaled memories only).
type callTraces struct{}

// pickDropped adds to out the dropped spans to journal of the call's spans in the shard (idx
// into refs, after they were admitted): for a trace not yet durable every dropped span it has,
// else the call's own.
func (c *callTraces) pickDropped(refs []spanRef, idx []int32, out *released) {
	seen := map[*trace]bool{}
	for _, i := range idx {
		r := &refs[i]
		t := r.trace
		if !t.durable() {
			if !seen[t] {
				seen[t] = true
				for id, rec := range t.records {
					if rec.state != stateKept {
						out.dropped = append(out.dropped, droppedSpan{t: t, id: id, parent: rec.parent, connector: rec.state == stateConnector})
					}
				}
			}
			continue
		}
		if !r.kept && !r.span.SpanID().IsEmpty() {
			out.dropped = append(out.dropped, droppedSpan{t: t, id: r.span.SpanID(), parent: t.records[r.span.SpanID()].parent, connector: r.connector})
		}
	}
}

// journalDropped writes one KindDropped record for dropped and attaches it to their traces (done
// when each is forgotten). Call it with no shard lock held, before the call is acknowledged.
func (m *Memory) journalDropped(ctx context.Context, dropped []droppedSpan) error {
	if len(dropped) == 0 {
		return nil
	}
	payload := make([]byte, 0, droppedBytes*len(dropped))
	var traces []*trace
	seen := map[*trace]bool{}
	for _, d := range dropped {
		payload = append(append(append(payload, d.t.id[:]...), d.id[:]...), d.parent[:]...)
		if d.connector {
			payload = append(payload, 1)
		} else {
			payload = append(payload, 0)
		}
		if !seen[d.t] {
			seen[d.t] = true
			traces = append(traces, d.t)
		}
	}
	id, err := m.journal.Append(ctx, journal.KindDropped, m.cfg.Now(), nil, payload)
	if err != nil {
		return fmt.Errorf("recording dropped spans: %w", err)
	}
	ref := m.NewRecordRef(id, len(traces))
	gone := 0
	for _, t := range traces {
		sh := m.shards[m.shardOf(t.id)]
		sh.mu.Lock()
		if sh.traces[t.id] == t {
			r := t.keepRefs()
			r.durable, r.dropped = true, append(r.dropped, ref)
			m.addBytes(t, refCost)
		} else {
			gone++ // forgotten while the record was written
		}
		sh.unlock(m)
	}
	ref.Done(gone)
	return nil
}

// recoverDropped restores the records of a KindDropped record's dropped spans. Their traces are
// active from the restart: the time the process was down does not count against the wait of
// their late spans.
func (m *Memory) recoverDropped(rec journal.Record) error {
	if len(rec.Payload) == 0 || len(rec.Payload)%droppedBytes != 0 {
		m.NewRecordRef(rec.ID, 1).Done(1)
		return fmt.Errorf("journal record %d: dropped spans payload of %d bytes", rec.ID, len(rec.Payload))
	}
	ref := m.NewRecordRef(rec.ID, 1) // a guard until every trace holds it
	now := m.cfg.Now()
	for p := rec.Payload; len(p) > 0; p = p[droppedBytes:] {
		traceID := pcommon.TraceID(p[:16])
		sh := m.shards[m.shardOf(traceID)]
		sh.mu.Lock()
		t := sh.touch(m, traceID, now)
		st := stateDropped
		if p[32] == 1 {
			st = stateConnector
		}
		m.addBytes(t, t.setRecord(pcommon.SpanID(p[16:24]), pcommon.SpanID(p[24:32]), st))
		if r := t.keepRefs(); len(r.dropped) == 0 || r.dropped[len(r.dropped)-1] != ref {
			r.durable, r.dropped = true, append(r.dropped, ref)
			m.addBytes(t, refCost)
			ref.add(1)
		}
		sh.unlock(m)
	}
	ref.Done(1)
	return nil
}
