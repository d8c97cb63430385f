package tracememory

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// Content x (its own journal record) joins tool in call A; the client sends tool again in call B,
// whose copy takes A's place; A's append then fails. x's record must stay in the journal until x
// is handed on (a SIGKILL before that would lose it), and be finished exactly once: when B's copy,
// gathering x again, is delivered.
func TestReplacedCopysContentRecordWaitsForItsCallsAppend(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(d *driver, a, b *Admission)
	}{
		{name: "the copy commits, then the first call is refused", end: func(d *driver, a, b *Admission) {
			d.commitOnly(b)
			a.Abort()
		}},
		{name: "the first call is refused, then the copy commits", end: func(d *driver, a, b *Admission) {
			a.Abort()
			d.commitOnly(b)
		}},
		{name: "the copy commits while the first call is refused", end: func(d *driver, a, b *Admission) {
			var wg sync.WaitGroup
			start := make(chan struct{})
			wg.Add(2)
			go func() { defer wg.Done(); <-start; a.Abort() }()
			go func() { defer wg.Done(); <-start; d.commitOnly(b) }()
			close(start)
			wg.Wait()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := 0; round < 20; round++ {
				d := newJoinDriver(t)
				id, err := d.journal.Append(context.Background(), journal.KindContent, d.clock.Now(), nil, []byte("content"))
				require.NoError(t, err)
				ref := d.m.NewRecordRef(id, 1)
				require.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf("tool"), fakeContent("x"), ref))
				a, _ := d.admitOnly(sp{name: "tool", parent: "agent", kept: true})
				b, _ := d.admitOnly(sp{name: "tool", parent: "agent", kept: true})
				tc.end(d, a, b)
				require.True(t, d.journal.has(id), "x is not handed on yet: its record stays for a restart")
				require.NoError(t, d.send(sp{name: "agent", kept: true}))
				d.deliver(d.m.TakeReady())
				assert.Equal(t, "x", d.contentOf("tool"), "the resent tool carries x")
				assert.False(t, d.journal.has(id), "x was handed on: its record is removed")
				ref.mu.Lock()
				left := ref.left
				ref.mu.Unlock()
				assert.Equal(t, 0, left, "x's record is finished exactly once")
				if t.Failed() {
					return
				}
			}
		})
	}
}
