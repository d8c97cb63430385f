package tracememory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Finding F: a batch whose journal append fails is refused and sent again by the client; the
// eviction its admission makes necessary must not release (and so deliver) any of its own spans
// first, or they are delivered twice. Two waiting traces in one batch with max_traces 1: the
// memory is over its bound until the batch is committed or aborted.
func TestEvictionAfterFailedAppendDeliversNothingTwice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config func(*Config)
	}{
		{name: "max_traces", config: func(c *Config) { c.MaxTraces = 1 }},
		{name: "memory limit", config: func(c *Config) { c.MemoryLimitBytes = 1000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, tc.config)
			batch := []sp{
				{name: "child 1", parent: "parent 1", kept: true, trace: pcommon.TraceID{0xd1, 15: 1}},
				{name: "child 2", parent: "parent 2", kept: true, trace: pcommon.TraceID{0xd1, 15: 2}},
			}
			d.journal.fail = true
			require.Error(t, d.send(batch...), "the journal append fails: the batch is refused")
			d.journal.fail = false
			d.deliver(d.m.TakeReady()) // the releaser runs
			require.Empty(t, d.tree(), "nothing of a refused batch may go on")

			require.NoError(t, d.send(batch...)) // the client sends it again
			d.advance(2 * time.Second)
			require.NoError(t, d.send(sp{name: "parent 1", kept: true, trace: pcommon.TraceID{0xd1, 15: 1}},
				sp{name: "parent 2", kept: true, trace: pcommon.TraceID{0xd1, 15: 2}}))
			d.shutdown()
			d.checkInvariants(t, true, true) // checks that nothing was delivered twice
			require.Empty(t, d.journal.records())
		})
	}
}
