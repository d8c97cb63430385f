package tracememory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
)

// A held span is acknowledged with the call that brought it. A later call that brings a copy of it
// together with its parent releases it; the later call's own spans may then be refused for good by
// the next component (its client gives up), or the process may be killed before it hands them on:
// the span of the first call still goes on, since its call was acknowledged. The same when the
// first call holds the span between the later call's plan (which saw no held copy, so wrote none
// ahead) and its apply.
func TestHeldSpanReleasedByALaterCopyIsNotLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill bool
		// staged: the first call runs between the later call's plan and its apply.
		staged bool
	}{
		{name: "the later call is refused for good"},
		{name: "killed before the later call is handed on", kill: true},
		{name: "held during the later call, which is refused for good", staged: true},
		{name: "held during the later call, killed before it is handed on", kill: true, staged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			first := func() {
				require.NoError(t, d.send(sp{name: "chat", parent: "agent", kept: true}))
				require.Equal(t, int64(1), d.m.HeldSpans())
			}
			if tc.staged {
				betweenPlanAndApply(t, first)
			} else {
				first()
			}

			// Not through d.send: the client gives up on this call, its spans are owed to no one.
			td, decisions := buildBatch([]sp{{name: "chat", parent: "agent", kept: true}, {name: "agent", kept: true}})
			adm, err := d.m.Admit(client.Info{}, td, decisions)
			require.NoError(t, err)
			if tc.kill {
				d.kill() // neither td nor the call's deliveries were handed on
			} else {
				d.deliver(adm.Deliveries) // td itself is refused for good: the client gives up
			}
			d.advance(time.Minute)
			d.shutdown()
			assert.Contains(t, d.tree(), "chat", "the span of the acknowledged first call went on")
			d.checkInvariants(t, true, false)
			assert.Empty(t, d.journal.spanRecords(), "every record of held spans is done once they went on")
		})
	}
}
