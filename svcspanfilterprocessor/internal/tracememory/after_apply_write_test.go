package tracememory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// kindFailingJournal fails every append of one record kind.
type kindFailingJournal struct {
	*fakeJournal
	failKind journal.Kind
}

func (j *kindFailingJournal) Append(ctx context.Context, kind journal.Kind, heldAt time.Time, md map[string][]string, payload []byte) (uint64, error) {
	if kind == j.failKind {
		return 0, errors.New("disk full")
	}
	return j.fakeJournal.Append(ctx, kind, heldAt, md, payload)
}

// The open parents and dropped spans a call made known are written after the call applied. When
// that write fails the call is acknowledged all the same: refusing it would make the client send
// it again, and the spans that already went on (here the connector of the dropped parent) would
// reach the platform twice.
func TestFailedWriteAfterApplyDeliversEverySpanOnce(t *testing.T) {
	for name, kind := range map[string]journal.Kind{"dropped spans": journal.KindDropped, "open parents": journal.KindOpenParents} {
		t.Run(name, func(t *testing.T) {
			d := newDriver(t, nil)
			fj := &kindFailingJournal{fakeJournal: d.journal, failKind: kind}
			cfg := testConfig(d.clock)
			cfg.Journaled = true
			d.m = New(cfg, fj, nil, d.observe)

			require.NoError(t, d.send(sp{name: "agent", kept: true}))
			require.NoError(t, d.send(sp{name: "chat", parent: "tool http", kept: true}))
			d.advance(time.Minute) // chat goes on pointing at its open parent
			require.NoError(t, d.send(sp{name: "tool http", parent: "agent"}), "the call is acknowledged")
			d.advance(time.Minute)

			counts := map[string]int{}
			for _, s := range d.delivered {
				counts[s.Name()]++
			}
			for name, n := range counts {
				assert.Equal(t, 1, n, "%s delivered %d times", name, n)
			}
			tree := d.tree()
			assert.Equal(t, "~tool http", tree["chat"], "chat stays below the connector of its dropped parent")
			assert.Equal(t, "agent", tree["~tool http"])
		})
	}
}
