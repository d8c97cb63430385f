package tracememory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
)

// betweenPlanAndApply runs during, once, after the next call's plan and write ahead and before
// its apply.
func betweenPlanAndApply(t *testing.T, during func()) {
	afterPlan = func() {
		afterPlan = nil
		during()
	}
	t.Cleanup(func() { afterPlan = nil })
}

// A call brings a copy of chat with its parent; its plan sees no held chat and writes nothing
// ahead. Before it applies, another call holds chat (acknowledged, written ahead). The first call's
// own spans are then refused for good (its client gives up), or the process is killed before it
// hands them on: the acknowledged chat still goes on.
func TestSpanHeldBetweenAPlanAndItsApplyIsNotLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill bool
	}{
		{name: "the later call is refused for good"},
		{name: "killed before the later call is handed on", kill: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			betweenPlanAndApply(t, func() {
				require.NoError(t, d.send(sp{name: "chat", parent: "agent", kept: true}))
				require.Equal(t, int64(1), d.m.HeldSpans())
			})
			// Not through d.send: the client gives up on this call, its spans are owed to no one.
			td, decisions := buildBatch([]sp{{name: "chat", parent: "agent", kept: true}, {name: "agent", kept: true}})
			adm, err := d.m.Admit(client.Info{}, td, decisions)
			require.NoError(t, err)
			if tc.kill {
				d.kill() // neither td nor the call's deliveries were handed on
			} else {
				d.deliver(adm.Deliveries) // td itself is refused for good
			}
			d.advance(time.Minute)
			d.shutdown()
			assert.Contains(t, d.tree(), "chat", "the span of the acknowledged call went on")
			d.checkInvariants(t, true, false)
			assert.Empty(t, d.journal.spanRecords(), "every record of held spans is done once they went on")
		})
	}
}

// A span kept only in an experiment arrives as an open parent of a trace not known as one: its
// plan drops it and writes ahead a connector copy. Before it applies, another call marks the trace
// as an experiment, so the span is kept: it goes on at once (its copy written ahead is a connector,
// so it is never held), whole, and a SIGKILL after the call does not leave only that copy.
func TestSpanKeptByAnExperimentMarkedBetweenAPlanAndItsApply(t *testing.T) {
	ifExperiment := KeepIfExperiment
	d := newDriver(t, nil)
	require.NoError(t, d.send(sp{name: "chat", parent: "tool", kept: true}))
	d.advance(10 * time.Second) // chat goes on pointing at tool: an open parent
	require.Equal(t, "<?>", d.tree()["chat"])

	betweenPlanAndApply(t, func() {
		require.NoError(t, d.send(sp{name: "marker", kept: true, experiment: true}))
	})
	require.NoError(t, d.send(sp{name: "tool", parent: "agent", verdict: &ifExperiment}))
	assert.Zero(t, d.m.HeldSpans(), "held only if its call wrote it ahead, and it wrote a connector")
	d.kill()
	d.advance(time.Minute)
	d.shutdown()
	tree := d.tree()
	assert.Equal(t, "<?>", tree["tool"], "tool went on itself, pointing at its parent that never came")
	assert.NotContains(t, tree, "~tool", "not as a stripped connector")
	assert.Equal(t, "tool", tree["chat"])
	d.checkInvariants(t, true, false)
}
