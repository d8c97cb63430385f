package tracememory

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"
)

// A call whose write fails is refused before it changes anything, and sent again by the client:
// no eviction releases (and so delivers) any of its spans first, which would deliver them twice.
// Two waiting traces in one batch with max_traces 1.
func TestEvictionAfterFailedAppendDeliversNothingTwice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config func(*Config)
	}{
		{name: "max_traces", config: func(c *Config) { c.MaxTraces = 1 }},
		{name: "memory limit", config: func(c *Config) { c.MemoryLimitBytes = 1000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, tc.config)
			batch := []sp{
				{name: "child 1", parent: "parent 1", kept: true, trace: pcommon.TraceID{0xd1, 15: 1}},
				{name: "child 2", parent: "parent 2", kept: true, trace: pcommon.TraceID{0xd1, 15: 2}},
			}
			d.journal.fail = true
			require.Error(t, d.send(batch...), "the journal append fails: the batch is refused")
			d.journal.fail = false
			d.deliver(d.m.TakeReady()) // the releaser runs
			require.Empty(t, d.tree(), "nothing of a refused batch may go on")

			require.NoError(t, d.send(batch...)) // the client sends it again
			d.advance(2 * time.Second)
			require.NoError(t, d.send(sp{name: "parent 1", kept: true, trace: pcommon.TraceID{0xd1, 15: 1}},
				sp{name: "parent 2", kept: true, trace: pcommon.TraceID{0xd1, 15: 2}}))
			d.shutdown()
			d.checkInvariants(t, true, true) // checks that nothing was delivered twice
			require.Empty(t, d.journal.records())
		})
	}
}

// While the next consumer refuses released spans and they fill most of the byte
// budget, eviction must not forget content that waits for its span (acknowledged: its journal
// record would be removed and the content lost); the logs side is refused, retryably, instead.
func TestRefusedSpansDoNotEvictWaitingContent(t *testing.T) {
	d := newJoinDriver(t)
	cfg := testConfig(d.clock)
	cfg.Journaled = true
	cfg.MemoryLimitBytes = 4000
	d.m = New(cfg, d.journal, fakeJoin{}, d.observe)

	id, err := d.journal.Append(context.Background(), journal.KindContent, d.clock.Now(), nil, []byte("tool"))
	require.NoError(t, err)
	require.NoError(t, d.m.ContentRoom(int64(len("early"))))
	require.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf("tool"), fakeContent("early"), d.m.NewRecordRef(id, 1)))

	// A slow next component: the spans each pair releases are refused and stay ready.
	d.refuse = true
	var refused [][]sp
	for i := range 20 {
		d.clock.Advance(time.Millisecond)
		other := pcommon.TraceID{0xc0, 15: byte(i + 1)}
		for _, b := range [][]sp{
			{{name: fmt.Sprint("child ", i), parent: fmt.Sprint("parent ", i), kept: true, trace: other}},
			{{name: fmt.Sprint("parent ", i), kept: true, trace: other}},
		} {
			if err := d.send(b...); err != nil {
				require.ErrorIs(t, err, ErrOverloaded)
				refused = append(refused, b)
			}
		}
	}
	require.Greater(t, d.m.ReadyBytes(), cfg.MemoryLimitBytes/2, "refused released spans fill most of the budget")
	assert.True(t, d.journal.has(id), "the waiting content's journal record stays")
	assert.Zero(t, d.stats.ContentUnmatched[UnmatchedNoSpan], "no waiting content forgotten")
	require.ErrorIs(t, d.m.ContentRoom(1000), ErrContentOverloaded, "new content is refused (retryable) instead")

	d.refuse = false
	d.deliver(d.m.TakeReady())
	require.NoError(t, d.m.ContentRoom(1000), "room again once the next component takes the spans")
	for _, b := range refused {
		require.NoError(t, d.send(b...))
	}
	require.NoError(t, d.send(sp{name: "tool", kept: true}))
	d.shutdown()
	joined := false
	for _, s := range d.delivered {
		if v, ok := s.Attributes().Get("content"); ok && s.Name() == "tool" {
			joined = v.Str() == "early"
		}
	}
	assert.True(t, joined, "the content waited and joined its span")
	d.advance(time.Hour) // the trace is forgotten: no copy sent again needs the content
	assert.Empty(t, d.journal.records())
}

// spanRecords are the journal's records of held spans and content, without the open parents
// (KindOpen) and dropped spans (KindDropped), which stay as long as their trace is remembered.
func (j *fakeJournal) spanRecords() []journal.Record {
	var out []journal.Record
	for _, r := range j.records() {
		switch r.Kind {
		case journal.KindOpenParents, journal.KindDropped, outcome.KindDecided, outcome.KindSession:
		default:
			out = append(out, r)
		}
	}
	return out
}

// Open parents: after a crash (or restart) the ids of late parents that delivered spans point at
// are recovered from the journal, so a dropped parent that ends after the restart still goes on
// as a connector span and the tree stays whole; their records go when the parent came or the late
// parent window is over.
func TestOpenParentsSurviveRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// then runs on the restarted memory.
		then          func(d *driver)
		wantConnector bool
	}{
		{name: "dropped parent ends after the restart", wantConnector: true, then: func(d *driver) {
			require.NoError(d.t, d.send(sp{name: "agent", parent: "run"}, sp{name: "run", kept: true}))
		}},
		{name: "kept parent ends after the restart", then: func(d *driver) {
			require.NoError(d.t, d.send(sp{name: "agent", kept: true}))
		}},
		{name: "parent never comes", then: func(d *driver) {}},
	} {
		for _, v1 := range []bool{false, true} {
			name := tc.name
			if v1 {
				name += ", journal of v0.1.0"
			}
			t.Run(name, func(t *testing.T) { openParentsSurviveRestart(t, tc.then, tc.wantConnector, v1) })
		}
	}
}

// openParentsSurviveRestart: v1 rewrites the journal's open parents as v0.1.0 wrote them (KindOpen,
// without the ids of the spans pointing at them) before the restart.
func openParentsSurviveRestart(t *testing.T, then func(d *driver), wantConnector, v1 bool) {
	d := newDriver(t, nil)
	require.NoError(t, d.send(sp{name: "child", parent: "agent", kept: true}))
	d.advance(10 * time.Second) // child goes on by rule 1, pointing at agent: agent is open
	require.Equal(t, idOf("agent"), d.tree2parent(t, "child"))
	var open []journal.Record
	for _, r := range d.journal.records() {
		if r.Kind == journal.KindOpenParents {
			open = append(open, r)
		}
	}
	require.Len(t, open, 1, "the open parent is journaled")
	assert.Len(t, open[0].Payload, openBytes)
	if v1 {
		rec := open[0]
		rec.Kind, rec.Payload = journal.KindOpen, rec.Payload[:openBytesV1]
		d.journal.live[rec.ID] = rec
	}

	// SIGKILL: a new memory recovers the journal.
	d2 := newDriver(t, nil)
	d2.journal = d.journal
	cfg := testConfig(d2.clock)
	cfg.Journaled = true
	d2.m = New(cfg, d.journal, nil, d2.observe)
	d2.clock.now = d.clock.Now().Add(time.Second)
	require.NoError(t, d2.m.Recover(d.journal.records()))
	then(d2)
	d2.deliver(d2.m.TakeReady())
	var conn bool
	for _, s := range d2.delivered {
		if _, ok := s.Attributes().Get(ConnectorAttribute); ok && s.SpanID() == idOf("agent") {
			conn = true
			assert.Equal(t, idOf("run"), s.ParentSpanID(), "the connector hangs below its own kept ancestor")
		}
	}
	assert.Equal(t, wantConnector, conn, "connector span for the dropped parent")
	d2.advance(testConfig(d2.clock).LateParentWindow + testConfig(d2.clock).RememberDuration + time.Second)
	assert.Empty(t, d.journal.records(), "open parent records removed when the parent came or its window ended")

}

// tree2parent is the parent id a delivered span went on with.
func (d *driver) tree2parent(t *testing.T, name string) pcommon.SpanID {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.delivered {
		if s.Name() == name {
			return s.ParentSpanID()
		}
	}
	t.Fatalf("span %q not delivered", name)
	return pcommon.SpanID{}
}

// hookedJournal runs during, once, inside the next append of held spans, then fails that append:
// another call staged while the first one is being written (no sleep: the hook runs at that very
// point).
type hookedJournal struct {
	*fakeJournal
	during func()
}

func (j *hookedJournal) Append(ctx context.Context, kind journal.Kind, heldAt time.Time, md map[string][]string, payload []byte) (uint64, error) {
	if f := j.during; f != nil && kind == journal.KindSpans {
		j.during = nil
		f()
		return 0, errors.New("disk full")
	}
	return j.fakeJournal.Append(ctx, kind, heldAt, md, payload)
}

// While one call is being written, another call that puts the memory over its bound evicts: the
// first call holds nothing yet (written ahead), so nothing of it goes on; its write fails, the
// client resends it, and every span goes on once.
func TestEvictionDuringAWriteDeliversNothingOfTheCall(t *testing.T) {
	d := newDriver(t, func(c *Config) { c.MaxTraces = 1 })
	hj := &hookedJournal{fakeJournal: d.journal}
	cfg := testConfig(d.clock)
	cfg.Journaled, cfg.MaxTraces = true, 1
	d.m = New(cfg, hj, nil, d.observe)
	first := []sp{{name: "child 1", parent: "parent 1", kept: true, trace: pcommon.TraceID{0xf1, 15: 1}}}
	hj.during = func() {
		d.clock.Advance(time.Millisecond)
		require.NoError(t, d.send(sp{name: "child 2", parent: "parent 2", kept: true, trace: pcommon.TraceID{0xf1, 15: 2}}))
		require.NoError(t, d.send(sp{name: "other", parent: "parent 3", kept: true, trace: pcommon.TraceID{0xf1, 15: 3}}))
	}
	require.Error(t, d.send(first...), "the first call's write fails: refused")
	d.deliver(d.m.TakeReady())
	require.NotContains(t, d.tree(), "child 1", "nothing of the refused call went on")
	require.Contains(t, d.tree(), "child 2", "the eviction released the other call's held span")

	require.NoError(t, d.send(first...)) // the client resends it
	require.NoError(t, d.send(sp{name: "parent 1", kept: true, trace: pcommon.TraceID{0xf1, 15: 1}},
		sp{name: "parent 2", kept: true, trace: pcommon.TraceID{0xf1, 15: 2}}, sp{name: "parent 3", kept: true, trace: pcommon.TraceID{0xf1, 15: 3}}))
	d.shutdown()
	d.checkInvariants(t, true, true)
}

// A restart does not lengthen late_parent_window: the open parents of a trace that also has dropped
// spans keep the time they were opened, so the trace is forgotten when it would have been without
// the restart.
func TestRecoveredOpenParentsKeepTheirTime(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprint("restart ", kill), func(t *testing.T) {
			d := newDriver(t, nil)
			window := testConfig(d.clock).LateParentWindow
			require.NoError(t, d.send(sp{name: "http", parent: "agent"}, sp{name: "chat", parent: "tool", kept: true}))
			d.advance(10 * time.Second) // chat goes on pointing at tool: an open parent
			require.Equal(t, map[journal.Kind]int{journal.KindDropped: 1, journal.KindOpenParents: 1}, d.journal.kinds())
			d.advance(window / 2)
			if kill {
				d.kill()
			}
			d.advance(window/2 + 30*time.Second)
			assert.Empty(t, d.journal.records(), "the trace is forgotten late_parent_window after its last span")
		})
	}
}
