package tracememory

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Finding M: content joined onto a span counts in the byte budget once it is on the span, while the
// span is held and while it waits, released but refused, for the next consumer.
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

// Finding I: a trace whose delivered spans point at open parents keeps the records of its dropped
// spans for late_parent_window, not only remember_duration: a dropped parent arriving after that
// becomes a connector below the nearest kept ancestor, through the dropped spans seen before, and a
// kept span arriving then is re-parented through them as well.
func TestLateParentBridgedAfterRememberDuration(t *testing.T) {
	for _, late := range []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute} {
		t.Run(late.String(), func(t *testing.T) {
			d := newDriver(t, nil)
			// agent (kept) -> http (dropped) -> tool (dropped, ends late) -> chat (kept).
			require.NoError(t, d.send(
				sp{name: "agent", kept: true},
				sp{name: "http", parent: "agent"},
				sp{name: "chat", parent: "tool", kept: true},
			))
			d.advance(late) // chat goes on after wait_duration pointing at tool, now an open parent
			require.NoError(t, d.send(
				sp{name: "tool", parent: "http"},
				sp{name: "retry", parent: "http", kept: true},
			))
			d.shutdown()
			assert.Equal(t, map[string]string{"agent": "", "~tool": "agent", "chat": "~tool", "retry": "agent"}, d.tree())
			d.checkInvariants(t, true, false)
		})
	}
}
