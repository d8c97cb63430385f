package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// Open parents are ids that delivered spans point at and that the memory has not seen: a dropped
// span with such an id, arriving within late_parent_window, goes on as a connector span so that
// the tree stays whole. They are journaled (KindOpen, 32 bytes each) before the spans pointing at
// them go on, so that a restart still bridges them; each with a span that went on pointing at it,
// so that the parent arriving after the restart with that span as its own parent is cut as a cycle
// (trace.cutsCycle). Like the records of dropped spans, their records stay until their trace is
// forgotten.

// openedParent is a parent that became open in one operation, to journal, and the span that went
// on pointing at it.
type openedParent struct {
	t         *trace
	id, child pcommon.SpanID
}

// openBytes is the size of one open parent in a KindOpen payload: trace id, span id, child id.
const openBytes = 16 + 8 + 8

// open makes id an open parent of t (under the shard lock), child going on pointing at it; it is
// journaled with what the operation released (journalOpened), for every child (any may be the
// parent's own parent).
func (out *released) open(m *Memory, t *trace, id, child pcommon.SpanID) {
	m.addBytes(t, t.addOpen(id))
	if m.cfg.Journaled {
		out.opened = append(out.opened, openedParent{t: t, id: id, child: child})
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

// journalOpened writes one KindOpen record for the parents an operation opened. Call it with no
// shard lock held, before the spans pointing at them go on.
func (m *Memory) journalOpened(ctx context.Context, opened []openedParent) error {
	if len(opened) == 0 {
		return nil
	}
	payload := make([]byte, 0, openBytes*len(opened))
	traces := make([]*trace, 0, len(opened))
	for _, o := range opened {
		payload = append(append(append(payload, o.t.id[:]...), o.id[:]...), o.child[:]...)
		traces = append(traces, o.t)
	}
	if err := m.journalTraces(ctx, journal.KindOpen, payload, traces); err != nil {
		return fmt.Errorf("recording open parents: %w", err)
	}
	return nil
}

// journalOpenedOrWarn journals what the releaser opened; a failure only weakens a later restart
// (the parent is not bridged after it), so the released spans go on all the same.
func (m *Memory) journalOpenedOrWarn(out *released) {
	if err := m.journalOpened(context.Background(), out.opened); err != nil {
		m.cfg.Logger.Warn("Could not journal open parents; a dropped parent ending after a restart will not be bridged",
			zap.Int("parents", len(out.opened)), zap.Error(err))
	}
	out.opened = nil
}

// recoverOpen makes the parents of a KindOpen record open again, and their children known as kept
// spans below them (unless known already, as a connector).
func (m *Memory) recoverOpen(rec journal.Record) error {
	return m.recoverEntries(rec, openBytes, func(t *trace, entry []byte) {
		id, child := pcommon.SpanID(entry[:8]), pcommon.SpanID(entry[8:16])
		if _, known := t.records[child]; !known {
			m.addBytes(t, t.setRecord(child, id, stateKept))
		}
		m.addBytes(t, t.addOpen(id))
	})
}
