package tracememory

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"
)

// everyStep makes the oracle run after every operation of d (the randomised tests): the delivered
// trees so far (invariants 1-4), nothing accepted lost (every kept span that arrived is delivered
// or still held), the counts and the trace lists (6, 7), and with a journal its records (8). A
// broken invariant fails at the step that broke it, not at the end of the scenario (where a later
// step may have hidden it), and the failure names the step.
func (d *driver) everyStep(t *testing.T) {
	steps := 0
	d.step = func() {
		steps++
		t.Helper()
		defer func() {
			if t.Failed() {
				t.Logf("the oracle failed after step %d", steps)
			}
		}()
		d.checkTrees(t, false, false, pendingSpans(d.m))
		checkCounts(t, d.m)
		if d.m.cfg.Journaled {
			checkJournal(t, d.m, d.journal)
		}
	}
}

// pendingSpans are the kept spans the memory holds or has released and not yet handed on.
func pendingSpans(m *Memory) map[pcommon.SpanID]bool {
	out := map[pcommon.SpanID]bool{}
	for _, sh := range m.shards {
		sh.mu.Lock()
		for _, tr := range sh.traces {
			for id := range tr.held {
				out[id] = true
			}
		}
		sh.mu.Unlock()
	}
	m.readyMu.Lock()
	defer m.readyMu.Unlock()
	for _, d := range m.ready {
		for _, rs := range d.Traces.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, span := range ss.Spans().All() {
					out[span.SpanID()] = true
				}
			}
		}
	}
	return out
}

// checkJournal checks invariant 8 between operations: every held span is in the live record of
// spans its item refers to; every record reference counts exactly its holders (held and ready
// items, content, the records and joined content a trace keeps, score records, kept sessions) and
// its record is live; no live record is held by nothing (it would never be removed); every dropped
// span and open parent a trace knows is in a record of the trace.
func checkJournal(t *testing.T, m *Memory, j *fakeJournal) {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	holders := map[*RecordRef]int64{}
	hold := func(r *RecordRef, n int64) {
		if r != nil {
			holders[r] += n
		}
	}
	spansIn := map[uint64]map[pcommon.SpanID]bool{}
	for _, sh := range m.shards {
		sh.mu.Lock()
		for _, tr := range sh.traces {
			for id, it := range tr.held {
				require.True(t, it.ref != nil && it.ref.id != 0, "held span %v was not written ahead", id)
				if spansIn[it.ref.id] == nil {
					spansIn[it.ref.id] = recordSpans(t, j.live[it.ref.id])
				}
				require.True(t, spansIn[it.ref.id][id], "held span %v is not in its record %d", id, it.ref.id)
				hold(it.ref, 1)
				for _, r := range it.contentRefs {
					hold(r, 1)
				}
				for _, c := range it.content {
					hold(c.ref, 1)
				}
			}
			for _, cs := range tr.content {
				for _, c := range cs {
					hold(c.ref, 1)
				}
			}
			dropped, open := map[pcommon.SpanID]bool{}, map[pcommon.SpanID]bool{}
			if r := tr.refs; r != nil {
				for _, ref := range r.records {
					hold(ref, 1)
					recordEntries(j.live[ref.id], tr.id, dropped, open)
				}
				for _, ref := range r.joinedRecs {
					hold(ref, 1)
				}
				if st, ok := r.gate.(interface{ Refs(func(gate.Ref, int)) }); ok { // held score records
					st.Refs(func(ref gate.Ref, n int) { hold(ref.(*RecordRef), int64(n)) })
				}
			}
			for id, rec := range tr.records {
				require.True(t, rec.state == stateKept || id.IsEmpty() || dropped[id],
					"dropped span %v of trace %v is in no journal record of the trace", id, tr.id)
			}
			for id := range tr.open {
				require.True(t, open[id], "open parent %v of trace %v is in no journal record of the trace", id, tr.id)
			}
		}
		sh.mu.Unlock()
	}
	m.readyMu.Lock()
	for _, d := range m.ready {
		for r, n := range d.refs {
			hold(r, int64(n))
		}
	}
	m.readyMu.Unlock()
	if g, ok := m.gate.(*outcome.Sampler); ok { // its kept sessions and released score records
		_, err := g.Check(func(r gate.Ref, n int) { hold(r.(*RecordRef), int64(n)) })
		require.NoError(t, err)
	}
	held := map[uint64]bool{}
	for r, n := range holders {
		require.Equal(t, n, r.left.Load(), "record %d: its count of items is not its holders'", r.id)
		if r.id != 0 {
			_, live := j.live[r.id]
			require.True(t, live, "record %d is held but was removed", r.id)
			held[r.id] = true
		}
	}
	for id, rec := range j.live {
		require.True(t, held[id], "record %d (kind %d) is live but nothing holds it: never removed", id, rec.Kind)
	}
}

// recordSpans are the span ids in a record of spans.
func recordSpans(t *testing.T, rec journal.Record) map[pcommon.SpanID]bool {
	require.Equal(t, journal.KindSpans, rec.Kind, "a held span's record %d", rec.ID)
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(rec.Payload)
	require.NoError(t, err)
	out := map[pcommon.SpanID]bool{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				out[span.SpanID()] = true
			}
		}
	}
	return out
}

// recordEntries adds the dropped spans and open parents of trace tid in rec to dropped and open.
func recordEntries(rec journal.Record, tid pcommon.TraceID, dropped, open map[pcommon.SpanID]bool) {
	size, into := 0, dropped
	switch rec.Kind {
	case journal.KindDropped:
		size = droppedBytes
	case journal.KindOpenParents:
		size, into = openBytes, open
	case journal.KindOpen:
		size, into = openBytesV1, open
	default:
		return
	}
	for p := rec.Payload; len(p) >= size; p = p[size:] {
		if pcommon.TraceID(p[:16]) == tid {
			into[pcommon.SpanID(p[16:24])] = true
		}
	}
}
