package tracememory

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Two calls refused at once (both journal appends fail, e.g. a full disk): A held chat, B sent chat
// again and took its place. Neither Abort may hold A's chat again once A is refused, or chat is
// delivered now and again when the client resends A.
func TestConcurrentAbortsDeliverNoRefusedCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fillers are A's other held spans: the longer A's unhold loop, the wider the window in
		// which B's Abort looks at A's chat.
		fillers int
		// delayB staggers B's Abort against A's over the rounds, up to this much.
		delayB time.Duration
		rounds int
	}{
		{name: "B aborts at once", fillers: 300, delayB: 0, rounds: 40},
		{name: "B aborts while A unholds", fillers: 300, delayB: 40 * time.Microsecond, rounds: 80},
		{name: "short batch", fillers: 10, delayB: 5 * time.Microsecond, rounds: 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans := []sp{{name: "chat", parent: "agent", kept: true}}
			for k := 0; k < tc.fillers; k++ {
				spans = append(spans, sp{name: fmt.Sprintf("w%d", k), parent: fmt.Sprintf("u%d", k), kept: true})
			}
			for round := 0; round < tc.rounds; round++ {
				d := newDriver(t, nil)
				a, _ := d.admitOnly(spans...)
				// chat's parent arrives: chat settles, its release deferred to A's commit.
				if err := d.send(sp{name: "agent", kept: true}); err != nil {
					t.Fatal(err)
				}
				b, _ := d.admitOnly(sp{name: "chat", parent: "agent", kept: true})
				var delay time.Duration
				if tc.delayB > 0 {
					delay = time.Duration(round) * tc.delayB / time.Duration(tc.rounds)
				}
				var wg sync.WaitGroup
				start := make(chan struct{})
				wg.Add(2)
				go func() { defer wg.Done(); <-start; a.Abort() }()
				go func() { defer wg.Done(); <-start; time.Sleep(delay); b.Abort() }()
				close(start)
				wg.Wait()
				d.deliver(d.m.TakeReady())
				if _, ok := d.tree()["chat"]; ok {
					assert.Fail(t, "a refused chat was delivered", "round %d (B delayed %v): the client sends it again", round, delay)
					return
				}
			}
		})
	}
}
