package tracememory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Parent ids that form a cycle (a hostile or broken client) never reach the next consumer as a
// cycle: the span whose arrival closes the cycle goes on as a root, the others below it.
func TestParentCyclesAreCut(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batches [][]sp
		want    map[string]string
		cut     int64 // spans made roots because of a cycle
	}{
		{
			name:    "self-parent",
			batches: [][]sp{{{name: "a", parent: "a", kept: true}}},
			want:    map[string]string{"a": ""},
		},
		{
			name:    "two-span cycle in one request",
			batches: [][]sp{{{name: "a", parent: "b", kept: true}, {name: "b", parent: "a", kept: true}}},
			want:    map[string]string{"a": "", "b": "a"},
			cut:     1,
		},
		{
			name: "three-span cycle in one request",
			batches: [][]sp{{
				{name: "a", parent: "c", kept: true}, {name: "b", parent: "a", kept: true}, {name: "c", parent: "b", kept: true},
			}},
			want: map[string]string{"a": "", "b": "a", "c": "b"},
			cut:  1,
		},
		{
			name:    "two-span cycle across requests",
			batches: [][]sp{{{name: "a", parent: "b", kept: true}}, {{name: "b", parent: "a", kept: true}}},
			want:    map[string]string{"b": "", "a": "b"},
			cut:     1,
		},
		{
			name: "three-span cycle across requests",
			batches: [][]sp{
				{{name: "a", parent: "c", kept: true}}, {{name: "b", parent: "a", kept: true}}, {{name: "c", parent: "b", kept: true}},
			},
			want: map[string]string{"c": "", "a": "c", "b": "a"},
			cut:  1,
		},
		{
			name: "cycle through a dropped span across requests",
			batches: [][]sp{
				{{name: "a", parent: "d", kept: true}}, {{name: "d", parent: "b"}}, {{name: "b", parent: "a", kept: true}},
			},
			want: map[string]string{"b": "", "a": "b"},
			cut:  1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			for _, b := range tc.batches {
				require.NoError(t, d.send(b...))
			}
			d.shutdown()
			assert.Equal(t, tc.want, d.tree())
			assert.Equal(t, tc.cut, d.stats.Reparented[ReparentCycle])
			d.checkInvariants(t, true, false)
		})
	}
}

// The first span of a cycle went on when its wait ended (pointing at its unknown parent); the
// parent arriving later with the first span as its own parent is cut, and a connector whose parent
// walk leads back to itself goes on as a root.
func TestCycleClosedAfterTheWaitEnded(t *testing.T) {
	t.Run("kept", func(t *testing.T) {
		d := newDriver(t, nil)
		require.NoError(t, d.send(sp{name: "a", parent: "b", kept: true}))
		d.advance(10 * time.Second) // a goes on pointing at b (open)
		require.NoError(t, d.send(sp{name: "b", parent: "a", kept: true}))
		d.shutdown()
		assert.Equal(t, map[string]string{"a": "b", "b": ""}, d.tree())
		d.checkInvariants(t, true, false)
	})
	t.Run("connector", func(t *testing.T) {
		d := newDriver(t, nil)
		require.NoError(t, d.send(sp{name: "a", parent: "d", kept: true}))
		d.advance(10 * time.Second) // a goes on pointing at d (open)
		require.NoError(t, d.send(sp{name: "d", parent: "a"}))
		d.shutdown()
		assert.Equal(t, map[string]string{"a": "~d", "~d": ""}, d.tree())
		d.checkInvariants(t, true, false)
	})
}

// A span that went on pointing at its open parent is still seen by the cycle check when that parent
// arrives with the span as its own parent after the trace was compacted (remember_duration) or
// after a restart: the parent goes on as a root, never as a cycle.
func TestCycleClosedAfterCompactionOrRestart(t *testing.T) {
	compact := func(d *driver) { d.advance(testConfig(d.clock).RememberDuration + time.Second) }
	restart := func(d *driver) { d.kill() }
	direct := []sp{{name: "a", parent: "b", kept: true}}
	throughDropped := []sp{{name: "a", parent: "d", kept: true}, {name: "d", parent: "b"}}
	twoChildren := []sp{{name: "a", parent: "b", kept: true}, {name: "a2", parent: "b", kept: true}}
	for _, tc := range []struct {
		name   string
		first  []sp
		then   func(d *driver)
		closer string // b's parent
	}{
		{name: "compacted", first: direct, then: compact, closer: "a"},
		{name: "restart", first: direct, then: restart, closer: "a"},
		{name: "compacted, through a dropped span", first: throughDropped, then: compact, closer: "a"},
		{name: "restart, through a dropped span", first: throughDropped, then: restart, closer: "a"},
		{name: "restart, below one of two children", first: twoChildren, then: restart, closer: "a"},
		{name: "restart, below the other of two children", first: twoChildren, then: restart, closer: "a2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			require.NoError(t, d.send(tc.first...))
			d.advance(10 * time.Second) // the kept spans go on pointing at b (open)
			tc.then(d)
			require.NoError(t, d.send(sp{name: "b", parent: tc.closer, kept: true}))
			d.advance(time.Minute)
			d.shutdown()
			assert.Equal(t, "", d.tree()["b"], "b goes on as a root")
			assert.Equal(t, "b", d.tree()["a"])
			assert.Equal(t, int64(1), d.stats.Reparented[ReparentCycle])
			d.checkInvariants(t, true, false)
		})
	}
}
