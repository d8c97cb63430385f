package tracememory

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// Finding F: a batch whose journal append fails is refused and sent again by the client; the
// eviction its admission makes necessary must not release (and so deliver) any of its own spans
// first, or they are delivered twice. Two waiting traces in one batch with max_traces 1: the
// memory is over its bound until the batch is committed or aborted.
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

// Finding C: while the next consumer refuses released spans and they fill most of the byte
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
	assert.Empty(t, d.journal.records())
}

// spanRecords are the journal's records of held spans and content, without the open parents
// (KindOpen) and dropped spans (KindDropped), which stay as long as their trace is remembered.
func (j *fakeJournal) spanRecords() []journal.Record {
	var out []journal.Record
	for _, r := range j.records() {
		if r.Kind != journal.KindOpen && r.Kind != journal.KindDropped {
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
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			require.NoError(t, d.send(sp{name: "child", parent: "agent", kept: true}))
			d.advance(10 * time.Second) // child goes on by rule 1, pointing at agent: agent is open
			require.Equal(t, idOf("agent"), d.tree2parent(t, "child"))
			var open []journal.Record
			for _, r := range d.journal.records() {
				if r.Kind == journal.KindOpen {
					open = append(open, r)
				}
			}
			require.Len(t, open, 1, "the open parent is journaled")
			assert.Len(t, open[0].Payload, 24)

			// SIGKILL: a new memory recovers the journal.
			d2 := newDriver(t, nil)
			d2.journal = d.journal
			cfg := testConfig(d2.clock)
			cfg.Journaled = true
			d2.m = New(cfg, d.journal, nil, d2.observe)
			d2.clock.now = d.clock.Now().Add(time.Second)
			require.NoError(t, d2.m.Recover(d.journal.records()))
			tc.then(d2)
			d2.deliver(d2.m.TakeReady())
			var conn bool
			for _, s := range d2.delivered {
				if _, ok := s.Attributes().Get(ConnectorAttribute); ok && s.SpanID() == idOf("agent") {
					conn = true
					assert.Equal(t, idOf("run"), s.ParentSpanID(), "the connector hangs below its own kept ancestor")
				}
			}
			assert.Equal(t, tc.wantConnector, conn, "connector span for the dropped parent")
			d2.advance(testConfig(d2.clock).LateParentWindow + testConfig(d2.clock).RememberDuration + time.Second)
			assert.Empty(t, d.journal.records(), "open parent records removed when the parent came or its window ended")
		})
	}
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

// gatedJournal blocks the next append until released, then fails it.
type gatedJournal struct {
	*fakeJournal
	entered, release chan struct{}
}

func (j *gatedJournal) Append(ctx context.Context, kind journal.Kind, heldAt time.Time, md map[string][]string, payload []byte) (uint64, error) {
	if j.entered != nil {
		close(j.entered)
		j.entered = nil
		<-j.release
		return 0, errors.New("disk full")
	}
	return j.fakeJournal.Append(ctx, kind, heldAt, md, payload)
}

// Finding F, concurrently: while one call waits for its journal write, another call (or the
// releaser) that finds the memory over its bound must not evict the first call's held spans: the
// write may fail, and the client resends the call.
func TestConcurrentEvictionWaitsForJournalWrite(t *testing.T) {
	d := newDriver(t, func(c *Config) { c.MaxTraces = 1 })
	gj := &gatedJournal{fakeJournal: d.journal, entered: make(chan struct{}), release: make(chan struct{})}
	first := []sp{{name: "child 1", parent: "parent 1", kept: true, trace: pcommon.TraceID{0xf1, 15: 1}}}
	td, decisions := buildBatch(first)
	adm, err := d.m.Admit(client.Info{}, td, decisions)
	require.NoError(t, err)
	entered := gj.entered
	appended := make(chan error, 1)
	go func() {
		payload, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(adm.HeldCopy)
		if err == nil {
			_, err = gj.Append(context.Background(), journal.KindSpans, adm.HeldAt, nil, payload)
		}
		if err != nil {
			adm.Abort()
		} else {
			adm.Commit(0)
		}
		appended <- err
	}()
	<-entered
	// Another call puts the memory over max_traces while the first one's write is pending.
	second := make(chan error, 1)
	go func() {
		d.clock.Advance(time.Millisecond)
		second <- d.send(sp{name: "child 2", parent: "parent 2", kept: true, trace: pcommon.TraceID{0xf1, 15: 2}})
	}()
	time.Sleep(50 * time.Millisecond) // the second call reaches its eviction
	close(gj.release)
	require.Error(t, <-appended, "the first call's write fails: refused")
	require.NoError(t, <-second)
	d.deliver(d.m.TakeReady())
	require.NotContains(t, d.tree(), "child 1", "nothing of the refused call went on")

	require.NoError(t, d.send(first...)) // the client resends it
	require.NoError(t, d.send(sp{name: "parent 1", kept: true, trace: pcommon.TraceID{0xf1, 15: 1}},
		sp{name: "parent 2", kept: true, trace: pcommon.TraceID{0xf1, 15: 2}}))
	d.shutdown()
	d.checkInvariants(t, true, true)
}
