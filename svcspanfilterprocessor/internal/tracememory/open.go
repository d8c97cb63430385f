package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Open parents are ids that delivered spans point at and that the memory has not seen: a dropped
// span with such an id, arriving within late_parent_window, goes on as a connector span so that
// the tree stays whole. They are journaled (KindOpen, dropped.go) before the spans pointing at
// them go on, so that a restart still bridges them; each with a span that went on pointing at it,
// so that the parent arriving after the restart with that span as its own parent is cut as a cycle
// (trace.cutsCycle). Like the records of dropped spans, their records stay until their trace is
// forgotten.

// open makes id an open parent of t (under the shard lock), child going on pointing at it; it is
// journaled with what the operation released (journalAfterApply), for every child (any may be the
// parent's own parent).
func (out *released) open(m *Memory, t *trace, id, child pcommon.SpanID) {
	m.addBytes(t, t.addOpen(id))
	if m.cfg.Journaled {
		out.opened.add(t, id[:], child[:])
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
