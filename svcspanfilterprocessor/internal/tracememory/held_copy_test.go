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
// the span of the first call still goes on, since its call was acknowledged.
func TestHeldSpanReleasedByALaterCopyIsNotLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill bool
	}{
		{name: "the later call is refused for good"},
		{name: "killed before the later call is handed on", kill: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			require.NoError(t, d.send(sp{name: "chat", parent: "agent", kept: true}))
			require.Equal(t, int64(1), d.m.HeldSpans())

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
		})
	}
}
