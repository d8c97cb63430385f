package tracememory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A span sampled out (kept only if its trace is an experiment) arrives with a held span of its
// trace; after a SIGKILL and a restart it is delivered only if its trace is an experiment, as
// without the kill.
func TestSampledOutSpanAfterRestart(t *testing.T) {
	ifExperiment := KeepIfExperiment
	for _, tc := range []struct {
		name       string
		experiment bool
	}{
		{name: "not an experiment"},
		{name: "an experiment", experiment: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			call := []sp{
				{name: "chat", parent: "agent", kept: true},
				{name: "sampled", parent: "agent", verdict: &ifExperiment},
				{name: "marker", experiment: tc.experiment},
			}
			require.NoError(t, d.send(call...))
			held := int64(1)
			if tc.experiment {
				held = 2 // the sampled-out span is kept and waits for its parent too
			}
			require.Equal(t, held, d.m.HeldSpans())
			d.kill()
			d.advance(time.Minute)
			d.shutdown()
			_, delivered := d.tree()["sampled"]
			assert.Equal(t, tc.experiment, delivered, "the sampled-out span is delivered only in an experiment")
			assert.Contains(t, d.tree(), "chat")
		})
	}
}
