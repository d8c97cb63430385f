package tracememory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// betweenPlanAndApply runs during, once, after the next call's plan and write ahead and before
// its apply: another call staged in that window (no sleep: the hook runs at that very point).
func betweenPlanAndApply(t *testing.T, during func()) {
	afterPlan = func() {
		afterPlan = nil
		during()
	}
	t.Cleanup(func() { afterPlan = nil })
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
