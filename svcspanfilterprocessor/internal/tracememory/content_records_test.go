package tracememory

import (
	"context"
	"strings"
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

// The journal record of content joined onto a span stays until the span carrying it was handed on;
// a refusal by the next consumer keeps both.
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

// Content joined onto a span counts in the byte budget once it is on the span, while the span is
// held and while it waits, released but refused, for the next consumer.
func TestJoinedContentCountsInTheBudget(t *testing.T) {
	big := fakeContent(strings.Repeat("x", 64<<10))
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, d *driver)
	}{
		{name: "gathered while held for its parent, joined when the parent arrives", run: func(t *testing.T, d *driver) {
			require.NoError(t, d.send(sp{name: "tool", parent: "agent", kept: true}))
			require.Equal(t, ContentJoined, d.m.AddContent(testTrace, idOf("tool"), big, nil))
			d.refuse = true
			require.NoError(t, d.send(sp{name: "agent", kept: true}))
		}},
		{name: "held for its content, joined when it arrives", run: func(t *testing.T, d *driver) {
			require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "chat", parent: "agent", kept: true}))
			d.refuse = true
			require.Equal(t, ContentJoined, d.m.AddContent(testTrace, idOf("chat"), big, nil))
			d.deliver(d.m.TakeReady())
		}},
		{name: "waiting before its span, joined on arrival", run: func(t *testing.T, d *driver) {
			require.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf("tool"), big, nil))
			d.refuse = true
			require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "tool", parent: "agent", kept: true}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newJoinDriver(t)
			tc.run(t, d)
			assert.Zero(t, d.m.HeldSpans())
			assert.GreaterOrEqual(t, d.m.ReadyBytes(), int64(len(big)), "the refused span carries the content")
			assert.GreaterOrEqual(t, d.m.Bytes(), int64(len(big)))
			d.refuse = false
			d.deliver(d.m.TakeReady())
			assert.Zero(t, d.m.ReadyBytes())
			assert.Zero(t, d.m.HeldBytes())
			d.checkInvariants(t, true, false)
		})
	}
}
