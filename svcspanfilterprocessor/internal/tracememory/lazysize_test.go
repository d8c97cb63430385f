package tracememory

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// countSizings counts the spans sized exactly while held, for the duration of the test.
func countSizings(t *testing.T) *int {
	n := 0
	sizedHook = func(ptrace.Span) { n++ }
	t.Cleanup(func() { sizedHook = nil })
	return &n
}

// exactHeld is the exact size of the memory's held spans.
func exactHeld(m *Memory) int64 {
	var n int64
	for _, sh := range m.shards {
		sh.mu.Lock()
		for _, tr := range sh.traces {
			for _, it := range tr.held {
				n += itemSize(it.span)
			}
		}
		sh.mu.Unlock()
	}
	return n
}

func traceOf(i int) pcommon.TraceID { return pcommon.TraceID{0xcc, 14: byte(i >> 8), 15: byte(i)} }

// Held spans count by an estimate that reads no attribute value; the releaser's tick (Expire)
// sizes the spans still held exactly, before it enforces the budget.
func TestHeldSpansSizedExactlyAtTick(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spans []sp
	}{
		{name: "one small span", spans: []sp{{name: "chat", parent: "agent", kept: true}}},
		{name: "a prompt in an attribute", spans: []sp{{name: "chat", parent: "agent", kept: true, big: 100 << 10}}},
		{name: "spans of many traces", spans: func() []sp {
			var out []sp
			for i := range 50 {
				out = append(out, sp{name: fmt.Sprint("chat ", i), parent: fmt.Sprint("agent ", i), kept: true, trace: traceOf(i), big: i * 100})
			}
			return out
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sized := countSizings(t)
			d := newDriver(t, nil)
			require.NoError(t, d.send(tc.spans...))
			require.EqualValues(t, len(tc.spans), d.m.HeldSpans())
			assert.Zero(t, *sized, "nothing sized when held")
			checkCounts(t, d.m)

			d.m.Expire()
			assert.Equal(t, len(tc.spans), *sized)
			assert.Equal(t, exactHeld(d.m), d.m.HeldBytes(), "held bytes are exact after the tick")
			checkCounts(t, d.m)

			d.m.Expire()
			assert.Equal(t, len(tc.spans), *sized, "a span is sized once")
			d.shutdown()
			d.checkInvariants(t, true, false)
			assert.Zero(t, d.m.HeldBytes())
		})
	}
}

// More than unsizedCap estimated spans in a shard are sized at once, at the end of the admission
// that brought them: the budget is never wrong by more than that many spans per shard.
func TestUnsizedCapSizesBurstAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		batches   []int // held spans per batch, all in the one shard
		wantSized int
	}{
		{name: "at the cap", batches: []int{unsizedCap}, wantSized: 0},
		{name: "past the cap in one batch", batches: []int{unsizedCap + 1}, wantSized: unsizedCap + 1},
		{name: "past the cap over two batches", batches: []int{unsizedCap, 1}, wantSized: unsizedCap + 1},
		{name: "released ones do not count", batches: []int{unsizedCap, -unsizedCap, unsizedCap}, wantSized: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sized := countSizings(t)
			d := newDriver(t, func(c *Config) { c.Shards = 1 })
			n := 0
			for b, count := range tc.batches {
				var batch []sp
				if count < 0 { // the parents of the first -count spans
					for i := range -count {
						batch = append(batch, sp{name: fmt.Sprint("agent ", i), kept: true, trace: traceOf(i)})
					}
				}
				for range count {
					batch = append(batch, sp{name: fmt.Sprint("chat ", n), parent: fmt.Sprint("agent ", n), kept: true, trace: traceOf(n), big: 1000 * b})
					n++
				}
				require.NoError(t, d.send(batch...))
			}
			assert.Equal(t, tc.wantSized, *sized)
			if tc.wantSized > 0 {
				assert.Equal(t, exactHeld(d.m), d.m.HeldBytes())
			}
			checkCounts(t, d.m)
			d.shutdown()
			d.checkInvariants(t, true, false)
		})
	}
}

// A span released before the releaser's tick is never sized: it carries its estimate into the
// ready bytes and out of them when it is delivered. A refused delivery, which may wait long, is
// sized exactly when it is put back.
func TestReleasedBeforeTickNeverSized(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse bool
	}{
		{name: "delivered"},
		{name: "refused by the next consumer", refuse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sized := countSizings(t)
			d := newDriver(t, nil)
			require.NoError(t, d.send(sp{name: "chat", parent: "agent", kept: true, big: 50 << 10}))
			estimate := d.m.HeldBytes()
			require.Less(t, estimate, int64(50<<10), "the estimate does not read the prompt")
			d.refuse = tc.refuse
			require.NoError(t, d.send(sp{name: "agent", kept: true}))
			assert.Zero(t, d.m.HeldSpans())
			assert.Zero(t, *sized, "released before the tick: never sized while held")
			if tc.refuse {
				ready := d.m.TakeReady()
				require.Len(t, ready, 1)
				want := itemSize(ready[0].Traces.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0))
				assert.Equal(t, want, d.m.ReadyBytes(), "a refused delivery is counted exactly")
				d.m.Requeue(ready...)
				assert.Equal(t, want, d.m.ReadyBytes(), "and once")
				d.refuse = false
				d.deliver(d.m.TakeReady())
			}
			assert.Zero(t, d.m.ReadyBytes(), "delivered: the bytes it carried leave the budget")
			d.m.Expire()
			assert.Zero(t, *sized)
			d.shutdown()
			d.checkInvariants(t, true, false)
		})
	}
}

// The estimate learns the mean size of an attribute from the spans sized exactly, up to a cap.
func TestEstimateLearnsFromSizedSpans(t *testing.T) {
	d := newDriver(t, nil)
	estimateOf := func(s sp) int64 {
		td, _ := buildBatch([]sp{s})
		return d.m.shards[0].spanEstimate(td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0))
	}
	probe := sp{name: "probe", parent: "x", kept: true}
	before := estimateOf(probe)
	for round := range 30 {
		var batch []sp
		for i := range 20 {
			batch = append(batch, sp{name: fmt.Sprint("chat ", round, i), parent: "agent", kept: true, trace: traceOf(i), big: 600})
		}
		require.NoError(t, d.send(batch...))
		d.m.Expire()
	}
	after := estimateOf(probe)
	// The probe's one attribute now counts about (2×56 + keys and values of 630 bytes) / 2 = 370
	// bytes instead of the initial 104.
	assert.Greater(t, after-before, int64(200), "the mean grew toward the sized spans")
	assert.Less(t, after-before, int64(300))

	for round := range 30 {
		require.NoError(t, d.send(sp{name: fmt.Sprint("huge ", round), parent: "agent", kept: true, big: 1 << 20}))
		d.m.Expire()
	}
	assert.LessOrEqual(t, estimateOf(probe), itemCost+spanBase+int64(len("probe"))+maxPerEntry/perEntryScale,
		"a few huge spans do not make every span count as huge")
	d.shutdown()
	d.checkInvariants(t, true, false)
}

// A copy sent again whose write fails changes nothing: the held copy keeps the bytes it had
// (estimated or exact), and the counts stay the sums of the held items.
func TestRefusedCopyKeepsConsistentBytes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tickBefore bool // the first copy was sized exactly before the second came
		tickAfter  bool // a tick after the refusal
	}{
		{name: "estimated copy"},
		{name: "sized copy", tickBefore: true},
		{name: "estimated copy, tick after the refusal", tickAfter: true},
		{name: "sized copy, tick after the refusal", tickBefore: true, tickAfter: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			chat := sp{name: "chat", parent: "agent", kept: true, big: 10 << 10}
			require.NoError(t, d.send(chat))
			if tc.tickBefore {
				d.m.Expire()
			}
			checkCounts(t, d.m)
			held := d.m.HeldBytes()
			d.journal.setFail(true)
			require.Error(t, d.send(chat))
			d.journal.setFail(false)
			checkCounts(t, d.m)
			assert.EqualValues(t, 1, d.m.HeldSpans())
			assert.Equal(t, held, d.m.HeldBytes(), "the held copy keeps its bytes")
			if tc.tickAfter {
				d.m.Expire()
				checkCounts(t, d.m)
			}
			d.m.Expire()
			assert.Equal(t, exactHeld(d.m), d.m.HeldBytes())
			checkCounts(t, d.m)
			require.NoError(t, d.send(sp{name: "agent", kept: true}))
			d.shutdown()
			d.checkInvariants(t, true, false)
			assert.Zero(t, d.m.HeldBytes())
		})
	}
}

// Content that waited for its span is joined when the span arrives; a span that then waits for
// its parent is held carrying it. The content left the budget's content count at the join, so the
// held span is sized exactly at once: the budget keeps counting the prompt before any tick
// (review of the lazy sizing: an estimate had counted 868 of 200,320 bytes until the tick).
func TestContentJoinedAtArrivalStaysCounted(t *testing.T) {
	d := newDriver(t, nil)
	cfg := testConfig(d.clock)
	cfg.Journaled = true
	d.m = New(cfg, d.journal, fakeJoin{}, d.observe)
	prompt := fakeContent(strings.Repeat("p", 200_000))
	require.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf("tool"), prompt, nil))
	require.NoError(t, d.send(sp{name: "tool", parent: "agent", kept: true}))
	require.Equal(t, int64(1), d.m.HeldSpans(), "tool waits for its parent")
	assert.GreaterOrEqual(t, d.m.HeldBytes(), int64(len(prompt)), "the held span carries the joined prompt")
	assert.GreaterOrEqual(t, d.m.Bytes(), int64(len(prompt)))
	d.checkInvariants(t, false, false)
}
