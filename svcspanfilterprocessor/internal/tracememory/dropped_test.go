package tracememory

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// kill replaces the memory by a new one that recovers the journal, as a SIGKILL and a restart on
// the same storage do; what was delivered stays delivered.
func (d *driver) kill() {
	d.t.Helper()
	d.restarted = true
	cfg := testConfig(d.clock)
	cfg.Journaled = true
	if d.mutate != nil {
		d.mutate(&cfg)
	}
	d.m = d.newMemory(cfg, d.journal, nil)
	require.NoError(d.t, d.recover(d.m, d.journal.records()))
	d.deliver(d.m.TakeReady())
	d.stepDone()
}

func (j *fakeJournal) kinds() map[journal.Kind]int {
	out := map[journal.Kind]int{}
	for _, r := range j.records() {
		out[r.Kind]++
	}
	return out
}

// A dropped ancestor that arrived before a SIGKILL still places the kept spans that arrive after
// the restart: below their nearest kept ancestor, or as a root.
func TestDroppedAncestorsSurviveRestart(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after [][]sp
		want          map[string]string
	}{
		{
			name:   "dropped root, kept child after the restart",
			before: [][]sp{{{name: "POST /agent", kind: ptrace.SpanKindServer}}},
			after:  [][]sp{{{name: "invoke_agent", parent: "POST /agent", kept: true}}},
			want:   map[string]string{"invoke_agent": ""},
		},
		{
			name: "dropped tool call of one service, kept children of another after the restart",
			before: [][]sp{{
				{name: "invoke_agent", kept: true},
				{name: "GET /tool", parent: "invoke_agent", kind: ptrace.SpanKindClient},
			}},
			after: [][]sp{{{name: "execute_tool", parent: "tool handler", kept: true}}, {{name: "tool handler", parent: "GET /tool", kind: ptrace.SpanKindServer}}},
			want:  map[string]string{"invoke_agent": "", "execute_tool": "invoke_agent"},
		},
		{
			name: "dropped spans of a trace that held a span",
			before: [][]sp{
				{{name: "chat", parent: "step", kept: true}},
				{{name: "step", parent: "POST /run"}},
			},
			after: [][]sp{{{name: "POST /run"}}, {{name: "late tool", parent: "step", kept: true}}},
			want:  map[string]string{"chat": "", "late tool": ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			for _, b := range tc.before {
				require.NoError(t, d.send(b...))
			}
			require.Positive(t, d.journal.kinds()[journal.KindDropped], "the dropped spans are journaled")
			d.kill()
			for _, b := range tc.after {
				require.NoError(t, d.send(b...))
			}
			d.advance(10 * time.Second)
			d.shutdown()
			assert.Equal(t, tc.want, d.tree())
			d.checkInvariants(t, true, false)
			d.advance(testConfig(d.clock).LateParentWindow + time.Minute)
			assert.Empty(t, d.journal.records(), "their records go when their trace is forgotten")
		})
	}
}

// A trace that arrives whole in one call writes its dropped spans too: a late span of another
// service below one of them, arriving after a restart, still finds its nearest kept ancestor.
func TestWholeTraceSurvivesRestart(t *testing.T) {
	d := newDriver(t, nil)
	require.NoError(t, d.send(sp{name: "GET /", kind: ptrace.SpanKindServer}, sp{name: "agent", parent: "GET /", kept: true},
		sp{name: "publish job", parent: "agent"}))
	recs := d.journal.records()
	require.Len(t, recs, 1)
	assert.Equal(t, journal.KindDropped, recs[0].Kind)
	assert.Len(t, recs[0].Payload, 2*droppedBytes, "GET / and publish job")
	d.kill()
	require.NoError(t, d.send(sp{name: "execute_tool", parent: "publish job", kept: true}))
	d.shutdown()
	assert.Equal(t, map[string]string{"agent": "", "execute_tool": "agent"}, d.tree())
	d.advance(testConfig(d.clock).LateParentWindow + time.Minute)
	assert.Empty(t, d.journal.records(), "their records go when their trace is forgotten")
}

// SIGKILL at random moments between calls, traces in any order over many calls: no delivered
// span points at a span that arrived and was not delivered (an orphan), nothing goes twice, and
// every kept span hangs below its nearest kept ancestor; the oracle runs after every step,
// restarts included.
func TestRandomKillsLeaveNoOrphans(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 3))
	for iter := range 200 {
		ok := t.Run(fmt.Sprint(iter), func(t *testing.T) {
			d := newDriver(t, nil)
			d.everyStep(t)
			n := 2 + rng.IntN(20)
			spans := make([]sp, n)
			for i := range spans {
				spans[i] = sp{name: fmt.Sprintf("s%d", i), kept: rng.IntN(3) == 0, kind: ptrace.SpanKind(rng.IntN(5))}
				if i > 0 {
					spans[i].parent = fmt.Sprintf("s%d", rng.IntN(i))
				}
			}
			rng.Shuffle(n, func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
			for len(spans) > 0 {
				k := 1 + rng.IntN(min(len(spans), 4))
				require.NoError(t, d.send(spans[:k]...))
				spans = spans[k:]
				if rng.IntN(3) == 0 {
					d.kill()
				}
				d.advance(time.Duration(rng.IntN(3)) * time.Second)
			}
			d.advance(time.Minute)
			d.shutdown()
			d.checkInvariants(t, true, false)
		})
		if !ok {
			return
		}
	}
}
