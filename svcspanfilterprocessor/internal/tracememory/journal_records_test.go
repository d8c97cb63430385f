package tracememory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// A span sent again while held, whose call then fails its write, leaves the acknowledged copy
// held and journaled (it is not lost).
func TestResentSpanWithFailedAppendKeepsHeldCopy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		span   sp
		settle func(d *driver)
	}{
		{name: "held for its parent", span: sp{name: "child", parent: "agent", kept: true}, settle: func(d *driver) {
			require.NoError(t, d.send(sp{name: "agent", kept: true}))
		}},
		{name: "held for its content", span: sp{name: "chat", parent: "agent", kept: true}, settle: func(d *driver) {
			require.NoError(t, d.send(sp{name: "agent", kept: true}))
			d.m.AddContent(testTrace, idOf("chat"), fakeContent("hi"), nil)
			d.deliver(d.m.TakeReady())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newJoinDriver(t)
			require.NoError(t, d.send(tc.span))
			first := d.journal.records()
			require.Len(t, first, 1)
			d.journal.fail = true
			require.Error(t, d.send(tc.span), "the resent copy's batch is refused")
			d.journal.fail = false
			assert.Equal(t, int64(1), d.m.HeldSpans(), "the acknowledged copy is still held")
			assert.True(t, d.journal.has(first[0].ID), "and still journaled")
			tc.settle(d)
			d.shutdown()
			d.checkInvariants(t, true, false)
			assert.Empty(t, d.journal.records())
		})
	}
}

// A held span whose parent walk passed through known-dropped spans is written ahead as it came;
// after a crash the journaled dropped spans take its walk to the right ancestor again.
func TestRecoveredHeldSpanWalksThroughDroppedSpans(t *testing.T) {
	for _, tc := range []struct {
		name           string
		before         []sp
		wantTreeParent string
	}{
		{name: "through a dropped span", before: []sp{{name: "tool", parent: "agent"}}, wantTreeParent: "agent"},
		{name: "through two dropped spans", before: []sp{{name: "step", parent: "agent"}, {name: "tool", parent: "step"}}, wantTreeParent: "agent"},
		{name: "parent itself unknown", wantTreeParent: "<?>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			if tc.before != nil {
				require.NoError(t, d.send(tc.before...))
			}
			require.NoError(t, d.send(sp{name: "chat", parent: "tool", kept: true}))
			recs := d.journal.spanRecords()
			require.Len(t, recs, 1)
			td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(recs[0].Payload)
			require.NoError(t, err)
			cp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
			assert.Equal(t, idOf("tool"), cp.ParentSpanID(), "written ahead as it came")

			// Crash; after the restart the ancestor arrives kept.
			d2 := newDriver(t, nil)
			d2.journal = d.journal
			d2.m = New(testConfig(d2.clock), d.journal, nil, d2.observe)
			d2.clock.now = d.clock.Now()
			require.NoError(t, d2.m.Recover(d.journal.records()))
			d2.deliver(d2.m.TakeReady())
			require.NoError(t, d2.send(sp{name: "agent", kept: true}))
			d2.advance(10 * time.Second)
			assert.Equal(t, tc.wantTreeParent, d2.tree()["chat"])
			assert.Empty(t, d.journal.spanRecords())
		})
	}
}

// lockCheckJournal fails a test when the memory writes to the journal while it holds a shard lock.
type lockCheckJournal struct {
	*fakeJournal
	m          *Memory
	underLock  int
	removeSeen int
}

func (j *lockCheckJournal) Remove(ctx context.Context, ids ...uint64) error {
	j.removeSeen++
	for _, sh := range j.m.shards {
		if !sh.mu.TryLock() {
			j.underLock++
			continue
		}
		sh.mu.Unlock()
	}
	return j.fakeJournal.Remove(ctx, ids...)
}

// Journal records are removed with no shard lock held (Remove writes to disk).
func TestJournalRemoveOutsideShardLocks(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(d *driver, content func(span string))
	}{
		{name: "content of a dropped span", run: func(d *driver, content func(string)) {
			content("noise")
			require.NoError(d.t, d.send(sp{name: "noise"}))
		}},
		{name: "content that waited without its span", run: func(d *driver, content func(string)) {
			content("never")
			d.advance(time.Hour)
		}},
		{name: "held span sent again", run: func(d *driver, _ func(string)) {
			require.NoError(d.t, d.send(sp{name: "child", parent: "agent", kept: true}))
			require.NoError(d.t, d.send(sp{name: "child", parent: "agent", kept: true}))
		}},
		{name: "content joined and delivered", run: func(d *driver, content func(string)) {
			content("tool")
			require.NoError(d.t, d.send(sp{name: "agent", kept: true}, sp{name: "tool", parent: "agent", kept: true}))
			d.advance(time.Hour) // its trace is forgotten: no copy sent again needs the content
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newJoinDriver(t)
			j := &lockCheckJournal{fakeJournal: d.journal, m: d.m}
			cfg := testConfig(d.clock)
			cfg.Journaled = true
			cfg.Shards = 1
			d.m = New(cfg, j, fakeJoin{}, d.observe)
			j.m = d.m
			content := func(span string) {
				id, err := d.journal.Append(context.Background(), journal.KindContent, d.clock.Now(), nil, []byte(span))
				require.NoError(t, err)
				d.m.AddContent(testTrace, idOf(span), fakeContent(span), d.m.NewRecordRef(id, 1))
			}
			tc.run(d, content)
			d.shutdown()
			assert.Positive(t, j.removeSeen)
			assert.Zero(t, j.underLock, "journal records removed under a shard lock")
		})
	}
}

// A connector span goes on in its own call; when the client sends the dropped span again (the call
// was refused, also after a restart in between), it goes on as a connector again, below the same
// parent: its state is journaled with the trace's dropped spans.
func TestConnectorComesAgainWithAResend(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dropped    sp
		wantParent string
		restart    bool
	}{
		{name: "dropped root becomes a root connector", dropped: sp{name: "agent"}, wantParent: ""},
		{name: "connector below a kept span", dropped: sp{name: "agent", parent: "run"}, wantParent: "run"},
		{name: "connector below a kept span, restart before the resend", dropped: sp{name: "agent", parent: "run"}, wantParent: "run", restart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			if tc.wantParent != "" {
				require.NoError(t, d.send(sp{name: "run", kept: true}))
			}
			require.NoError(t, d.send(sp{name: "child", parent: "agent", kept: true}))
			d.advance(10 * time.Second) // child goes on pointing at agent, which is now open
			require.NoError(t, d.send(tc.dropped))
			require.Empty(t, d.journal.spanRecords(), "the connector goes on in its own call: nothing held")
			if tc.restart {
				d.kill()
			}
			require.NoError(t, d.send(tc.dropped)) // the client sends it again
			want := pcommon.SpanID{}
			if tc.wantParent != "" {
				want = idOf(tc.wantParent)
			}
			var copies int
			for _, s := range d.delivered {
				if s.SpanID() == idOf("agent") {
					copies++
					_, ok := s.Attributes().Get(ConnectorAttribute)
					assert.True(t, ok, "a connector")
					assert.Equal(t, want, s.ParentSpanID())
				}
			}
			assert.Equal(t, 2, copies)
		})
	}
}
