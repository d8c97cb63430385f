package tracememory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A trace whose delivered spans point at open parents keeps the records of its dropped
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
