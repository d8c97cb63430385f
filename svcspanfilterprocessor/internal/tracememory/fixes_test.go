package tracememory

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

func (j *fakeJournal) has(id uint64) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, ok := j.live[id]
	return ok
}

func newJoinDriver(t *testing.T) *driver {
	d := newDriver(t, nil)
	cfg := testConfig(d.clock)
	cfg.Journaled = true
	d.m = New(cfg, d.journal, fakeJoin{}, d.observe)
	return d
}

// Finding A: the journal record of content joined onto a span stays until the span carrying it was
// handed on; a refusal by the next consumer keeps both.
func TestContentRecordRemovedOnlyOnDelivery(t *testing.T) {
	for _, tc := range []struct {
		name          string
		spans, parent []sp
	}{
		{name: "span passes straight through", spans: []sp{{name: "agent", kept: true}, {name: "tool", parent: "agent", kept: true}}},
		{name: "span held for its parent", spans: []sp{{name: "tool", parent: "agent", kept: true}}, parent: []sp{{name: "agent", kept: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newJoinDriver(t)
			id, err := d.journal.Append(context.Background(), journal.KindContent, d.clock.Now(), nil, []byte("content"))
			require.NoError(t, err)
			require.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf("tool"), fakeContent("early"), d.m.NewRecordRef(id, 1)))
			d.refuse = true
			require.NoError(t, d.send(tc.spans...))
			if tc.parent != nil {
				require.NoError(t, d.send(tc.parent...))
			}
			for _, s := range d.delivered {
				require.NotEqual(t, "tool", s.Name(), "refused: not delivered yet")
			}
			assert.True(t, d.journal.has(id), "the content record stays while its span is not handed on")
			d.refuse = false
			d.deliver(d.m.TakeReady())
			assert.False(t, d.journal.has(id), "removed once its span was delivered")
			assert.Empty(t, d.journal.records())
			var got string
			for _, s := range d.delivered {
				if s.Name() == "tool" {
					v, _ := s.Attributes().Get("content")
					got = v.Str()
				}
			}
			assert.Equal(t, "early", got)
		})
	}
}

// Finding B: a span sent again while held, whose batch then fails its journal append, leaves the
// acknowledged copy held and journaled (it is not lost).
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
