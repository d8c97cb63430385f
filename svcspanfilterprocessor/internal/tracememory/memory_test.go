package tracememory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// The agent shape of issue 10: an HTTP root (dropped) -> invoke_agent (kept) -> chat (kept), and a
// dropped tool HTTP span with a chat below it. The SDKs export each span when it ends, so the
// children arrive first and the parents end `late` after them.
func TestLateParents(t *testing.T) {
	for _, tc := range []struct {
		name string
		late time.Duration
		// activity: the agent keeps sending (kept) spans every minute while it runs.
		activity bool
	}{
		{name: "parents end 20s after their children", late: 20 * time.Second},
		{name: "parents end 5 min after their children", late: 5 * time.Minute},
		{name: "parents end 30 min after their children, the agent busy meanwhile", late: 30 * time.Minute, activity: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			require.NoError(t, d.send(
				sp{name: "chat", parent: "invoke_agent", kept: true},
				sp{name: "chat 2", parent: "GET /tool", kept: true},
			))
			for elapsed := time.Duration(0); elapsed < tc.late; elapsed += time.Minute {
				step := min(time.Minute, tc.late-elapsed)
				d.advance(step)
				if tc.activity && elapsed+step < tc.late {
					require.NoError(t, d.send(sp{name: fmt.Sprintf("step %v", elapsed), parent: "invoke_agent", kept: true}))
				}
			}
			// The children were delivered after wait_duration, with their original parents (rule 1).
			tree := d.tree()
			assert.Equal(t, "<?>", tree["chat"], "chat keeps its unknown parent")
			assert.Equal(t, "<?>", tree["chat 2"])

			require.NoError(t, d.send(sp{name: "GET /tool", parent: "invoke_agent"}))
			require.NoError(t, d.send(sp{name: "invoke_agent", parent: "POST /run", kept: true}))
			require.NoError(t, d.send(sp{name: "POST /run"}))
			d.advance(time.Minute)
			d.shutdown()
			d.checkInvariants(t, true, false)
			tree = d.tree()
			assert.Equal(t, "invoke_agent", tree["chat"])
			assert.Equal(t, "~GET /tool", tree["chat 2"], "the late dropped tool span is a connector")
			assert.Equal(t, "invoke_agent", tree["~GET /tool"])
			assert.Equal(t, "", tree["invoke_agent"], "the root was dropped: the topmost kept span is the root")
			assert.NotContains(t, tree, "~POST /run", "no delivered span points at the dropped root")
		})
	}
}

// A dropped span that ends after its kept child: a connector, or with connectors off a dangling
// parent id (the trade-off the README states).
func TestDroppedSpanEndingAfterKeptChild(t *testing.T) {
	for _, connectors := range []bool{true, false} {
		t.Run(fmt.Sprint("connector_spans=", connectors), func(t *testing.T) {
			d := newDriver(t, func(c *Config) { c.ConnectorSpans = connectors })
			require.NoError(t, d.send(sp{name: "agent", kept: true}))
			require.NoError(t, d.send(sp{name: "chat", parent: "http", kept: true}))
			d.advance(10 * time.Second)
			require.NoError(t, d.send(sp{name: "http", parent: "agent"}))
			d.shutdown()
			if connectors {
				d.checkInvariants(t, true, false)
				assert.Equal(t, map[string]string{"agent": "", "chat": "~http", "~http": "agent"}, d.tree())
				assert.Equal(t, int64(1), d.stats.Connectors)
			} else {
				assert.Equal(t, map[string]string{"agent": "", "chat": "<?>"}, d.tree())
			}
		})
	}
}

// Within the wait, the usual re-parenting: through known-dropped spans to the nearest kept one.
func TestResolution(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batches [][]sp
		want    map[string]string
	}{
		{
			name:    "parent arrives after child",
			batches: [][]sp{{{name: "tool", parent: "agent", kept: true}}, {{name: "agent", kept: true}}},
			want:    map[string]string{"tool": "agent", "agent": ""},
		},
		{
			name: "dropped parent, kept grandparent, across batches",
			batches: [][]sp{
				{{name: "llm", parent: "http", kept: true}},
				{{name: "http", parent: "agent"}},
				{{name: "agent", kept: true}},
			},
			want: map[string]string{"llm": "agent", "agent": ""},
		},
		{
			name:    "whole chain dropped: root",
			batches: [][]sp{{{name: "llm", parent: "handler", kept: true}}, {{name: "handler", parent: "GET /"}, {name: "GET /"}}},
			want:    map[string]string{"llm": ""},
		},
		{
			name:    "late child resolved from memory",
			batches: [][]sp{{{name: "agent", kept: true}, {name: "http", parent: "agent"}}, {{name: "late", parent: "http", kept: true}}},
			want:    map[string]string{"agent": "", "late": "agent"},
		},
		{
			name:    "cycle",
			batches: [][]sp{{{name: "self", parent: "self", kept: true}, {name: "llm", parent: "d1", kept: true}, {name: "d1", parent: "d2"}, {name: "d2", parent: "d1"}}},
			want:    map[string]string{"self": "", "llm": ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			for _, b := range tc.batches {
				require.NoError(t, d.send(b...))
			}
			assert.Zero(t, d.m.HeldSpans())
			d.shutdown()
			assert.Equal(t, tc.want, d.tree())
			d.checkInvariants(t, true, false)
		})
	}
}

// A trace spread over many requests in any order, with time passing between them; the oracle
// runs after every step.
func TestAnyOrderManyRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	for iter := range 300 {
		ok := t.Run(fmt.Sprint(iter), func(t *testing.T) {
			d := newDriver(t, nil)
			d.everyStep(t)
			n := 2 + rng.IntN(30)
			spans := make([]sp, n)
			for i := range spans {
				spans[i] = sp{name: fmt.Sprintf("s%d", i), kept: rng.IntN(2) == 0}
				if i > 0 {
					spans[i].parent = fmt.Sprintf("s%d", rng.IntN(i))
				}
			}
			rng.Shuffle(n, func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
			for len(spans) > 0 {
				k := 1 + rng.IntN(min(len(spans), 5))
				require.NoError(t, d.send(spans[:k]...))
				spans = spans[k:]
				d.advance(time.Duration(rng.IntN(8)) * time.Second)
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

// Eviction (memory limit, max_traces) and shutdown while spans wait: rule 1, the unknown parent is
// kept, nothing is lost.
func TestEvictionAndShutdownWhileSpansWait(t *testing.T) {
	waiting := func(n byte) sp {
		return sp{name: fmt.Sprintf("child %d", n), parent: fmt.Sprintf("parent %d", n), kept: true, trace: pcommon.TraceID{0xdd, 15: n}}
	}
	for _, tc := range []struct {
		name   string
		config func(*Config)
		reason EvictReason
	}{
		{name: "max_traces", config: func(c *Config) { c.MaxTraces = 3 }, reason: EvictMaxTraces},
		{name: "memory limit", config: func(c *Config) { c.MemoryLimitBytes = 3 * 1000 }, reason: EvictMemoryLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, tc.config)
			require.NoError(t, d.send(sp{name: "idle", kept: true, trace: pcommon.TraceID{0xee}}))
			for i := byte(1); i <= 6; i++ {
				d.clock.Advance(time.Millisecond)
				require.NoError(t, d.send(waiting(i)))
			}
			d.deliver(d.m.TakeReady())
			tree := d.tree()
			assert.Equal(t, "", tree["idle"])
			assert.Equal(t, "<?>", tree["child 1"], "the oldest waiting trace was evicted by rule 1")
			assert.NotContains(t, tree, "child 6", "the newest still waits")
			assert.Positive(t, d.stats.Evicted[tc.reason])
			assert.Positive(t, d.stats.Released[ReleaseEvicted])
			require.NoError(t, d.send(sp{name: "parent 6", kept: true, trace: pcommon.TraceID{0xdd, 15: 6}}))
			d.shutdown()
			assert.Equal(t, "parent 6", d.tree()["child 6"])
			assert.Positive(t, d.stats.Released[ReleaseShutdown])
			d.checkInvariants(t, true, false)
			assert.Empty(t, d.journal.spanRecords(), "every record of held spans removed once delivered")
		})
	}
}

func TestMaxWaitReleasesBusyTrace(t *testing.T) {
	d := newDriver(t, func(c *Config) { c.WaitDuration = time.Second; c.MaxWaitDuration = 3 * time.Second })
	require.NoError(t, d.send(sp{name: "orphan", parent: "elsewhere", kept: true}))
	for i := range 5 {
		d.clock.Advance(700 * time.Millisecond)
		d.m.Expire()
		d.deliver(d.m.TakeReady())
		require.NoError(t, d.send(sp{name: fmt.Sprint("busy ", i)}))
		if i < 3 {
			require.NotContains(t, d.tree(), "orphan")
		}
	}
	assert.Equal(t, "<?>", d.tree()["orphan"])
	assert.Equal(t, int64(1), d.stats.Released[ReleaseMaxWait])
}

// An idle trace forgets its records after remember_duration but keeps its open parents for the late
// parent window: a dropped parent arriving 10 min later still becomes a connector; after the window
// it is gone.
func TestOpenParentsOutliveRecords(t *testing.T) {
	for _, tc := range []struct {
		late          time.Duration
		wantConnector bool
	}{{10 * time.Minute, true}, {16 * time.Minute, false}} {
		t.Run(tc.late.String(), func(t *testing.T) {
			d := newDriver(t, nil)
			require.NoError(t, d.send(sp{name: "chat", parent: "tool", kept: true}))
			d.advance(time.Minute)
			assert.Equal(t, int64(1), d.m.Traces())
			d.advance(tc.late - time.Minute)
			require.NoError(t, d.send(sp{name: "tool", parent: "agent"}))
			d.shutdown()
			_, has := d.tree()["~tool"]
			assert.Equal(t, tc.wantConnector, has)
		})
	}
}

// Issue 16.2: once a span marks its trace as an experiment, later sampled-out spans are kept; those
// sampled out before the marking stay dropped (their children hang below their nearest kept ancestor).
func TestExperimentPerTrace(t *testing.T) {
	sampledOut := KeepIfExperiment
	d := newDriver(t, nil)
	require.NoError(t, d.send(sp{name: "before", verdict: &sampledOut}))
	require.NoError(t, d.send(
		sp{name: "same batch", verdict: &sampledOut, parent: "item"},
		sp{name: "item", verdict: &sampledOut, experiment: true, parent: "before"},
	))
	require.NoError(t, d.send(sp{name: "after", verdict: &sampledOut, parent: "item"}))
	require.NoError(t, d.send(sp{name: "other trace", verdict: &sampledOut, trace: pcommon.TraceID{0x01}}))
	d.shutdown()
	assert.Equal(t, map[string]string{"item": "", "same batch": "item", "after": "item"}, d.tree())
}

// Push back: released spans the next consumer refuses stay ready and count in the budget; when they
// alone fill it, Admit refuses new data; once delivered, it accepts again. Nothing is lost.
func TestPushBack(t *testing.T) {
	d := newDriver(t, func(c *Config) { c.MemoryLimitBytes = 2000 })
	d.refuse = true
	var refused [][]sp
	for i := range 10 {
		for _, b := range [][]sp{{{name: fmt.Sprint("child ", i), parent: fmt.Sprint("p ", i), kept: true}}, {{name: fmt.Sprint("p ", i), kept: true}}} {
			if err := d.send(b...); err != nil {
				require.ErrorIs(t, err, ErrOverloaded)
				refused = append(refused, b)
			}
		}
	}
	require.NotEmpty(t, refused, "the memory must push back")
	require.Greater(t, d.m.ReadyBytes(), int64(2000))
	d.refuse = false
	d.deliver(d.m.TakeReady())
	assert.Zero(t, d.m.ReadyBytes())
	for _, b := range refused { // the clients send again
		require.NoError(t, d.send(b...))
	}
	d.shutdown()
	d.checkInvariants(t, true, false)
}

// The journal: one record per batch that holds spans, removed when its last span is handed on; a
// failed append holds nothing.
func TestJournalRecords(t *testing.T) {
	d := newDriver(t, nil)
	require.NoError(t, d.send(sp{name: "pass", kept: true}))
	assert.Zero(t, d.journal.appends, "nothing held, nothing written")
	require.NoError(t, d.send(sp{name: "a", parent: "p", kept: true}, sp{name: "b", parent: "q", kept: true}))
	assert.Equal(t, 1, d.journal.appends)
	require.NoError(t, d.send(sp{name: "p", kept: true}))
	assert.Len(t, d.journal.spanRecords(), 1, "b still held")
	require.NoError(t, d.send(sp{name: "q"}))
	assert.Empty(t, d.journal.spanRecords())
	assert.Equal(t, 1, d.journal.removes)

	d.journal.fail = true
	require.Error(t, d.send(sp{name: "c", parent: "r", kept: true}))
	assert.Zero(t, d.m.HeldSpans(), "a refused batch holds nothing")
	d.journal.fail = false
	require.NoError(t, d.send(sp{name: "c", parent: "r", kept: true}))
	assert.Equal(t, int64(1), d.m.HeldSpans())
}

// Crash test: a new memory recovering the journal's live records delivers every held span (at most
// once more), with its original held time, and removes the records.
func TestRecoverAfterCrash(t *testing.T) {
	d := newDriver(t, nil)
	md := map[string][]string{"x-tenant": {"a"}}
	td, decisions := buildBatch([]sp{{name: "a", parent: "p", kept: true}, {name: "b", parent: "a", kept: true}, {name: "c", parent: "x", kept: true}})
	_, err := d.m.Admit(client.Info{Metadata: client.NewMetadata(md)}, td, decisions)
	require.NoError(t, err)
	require.Equal(t, int64(2), d.m.HeldSpans(), "a waits on p, c on x; b hangs below a at once")
	require.NoError(t, d.send(sp{name: "x", kept: true})) // c goes on before the crash

	// Crash: the first memory is gone.
	d2 := newDriver(t, nil)
	d2.journal = d.journal
	d2.m = New(testConfig(d2.clock), d.journal, nil, d2.observe)
	d2.clock.now = d.clock.Now().Add(3 * time.Second) // restarted 3s later
	for _, s := range []sp{{name: "a", parent: "p", kept: true}, {name: "b", parent: "a", kept: true}, {name: "c", parent: "x", kept: true}} {
		d2.arrived[idOf(s.name)] = s
	}
	require.NoError(t, d2.m.Recover(d.journal.records()))
	d2.deliver(d2.m.TakeReady())
	assert.Equal(t, int64(2), d2.m.HeldSpans(), "a and c: c's record still had a")
	d2.advance(time.Second)
	assert.Equal(t, int64(2), d2.m.HeldSpans())
	d2.advance(time.Second) // the original 5s wait ends 2s after the restart
	assert.Zero(t, d2.m.HeldSpans(), "waits resume from the original held time")
	assert.Equal(t, map[string]string{"a": "<?>", "c": "<?>"}, d2.tree())
	assert.Empty(t, d.journal.records())
	assert.Len(t, d.delivered, 2, "x and c before the crash (b went on with its batch)")
	for _, s := range d2.delivered {
		v, _ := s.Attributes().Get("payload")
		assert.Equal(t, s.Name(), v.Str(), "recovered with its attributes")
	}
}

// A span sent twice while held is held once.
func TestResentHeldSpanHeldOnce(t *testing.T) {
	d := newDriver(t, nil)
	require.NoError(t, d.send(sp{name: "child", parent: "agent", kept: true}))
	require.NoError(t, d.send(sp{name: "child", parent: "agent", kept: true}))
	assert.Equal(t, int64(1), d.m.HeldSpans())
	require.NoError(t, d.send(sp{name: "agent", kept: true}))
	d.shutdown()
	d.checkInvariants(t, true, false)
	assert.Empty(t, d.journal.records())
}

type fakeContent string

func (c fakeContent) Size() int64    { return int64(len(c)) }
func (c fakeContent) Records() int   { return 1 }
func (c fakeContent) Tenant() string { return "" }

type fakeJoin struct{}

func (fakeJoin) ScopeAwaitsContent(pcommon.InstrumentationScope) bool { return true }

func (fakeJoin) AwaitsContent(span ptrace.Span) bool {
	return span.Name() == "chat"
}

func (fakeJoin) Complete([]Content) bool { return true }

func (fakeJoin) Apply(span ptrace.Span, content []Content) bool {
	for _, c := range content {
		span.Attributes().PutStr("content", string(c.(fakeContent)))
	}
	return true
}

// The content hook: a candidate waits for its content (bitmask with the parent wait), content
// waiting for its span is joined on arrival, content of a dropped span is discarded.
func TestContentHook(t *testing.T) {
	d := newDriver(t, nil)
	cfg := testConfig(d.clock)
	cfg.Journaled = true
	d.m = New(cfg, d.journal, fakeJoin{}, d.observe)
	require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "chat", parent: "agent", kept: true}))
	assert.Equal(t, int64(1), d.m.HeldSpans(), "chat waits for its content")
	assert.Equal(t, ContentJoined, d.m.AddContent(testTrace, idOf("chat"), fakeContent("hi"), nil))
	d.deliver(d.m.TakeReady())
	assert.Zero(t, d.m.HeldSpans())

	require.NoError(t, d.send(sp{name: "chat 2", parent: "later", kept: true}))
	assert.Equal(t, ContentJoined, d.m.AddContent(testTrace, idOf("chat 2"), fakeContent("while held"), nil), "held for its parent: joined")
	assert.Equal(t, ContentDiscarded, d.m.AddContent(testTrace, idOf("agent"), fakeContent("late"), nil), "already delivered")
	assert.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf("tool"), fakeContent("early"), nil))
	require.NoError(t, d.send(sp{name: "tool", parent: "agent", kept: true}))
	assert.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf("noise"), fakeContent("x"), nil))
	require.NoError(t, d.send(sp{name: "noise", parent: "agent"}))
	d.shutdown()
	assert.Equal(t, [NumUnmatchedReasons]int64{UnmatchedSpanDropped: 1, UnmatchedSpanGone: 1}, d.stats.ContentUnmatched)
	assert.Equal(t, int64(3), d.stats.ContentJoined, "chat, chat 2 and tool")
	assert.Len(t, d.stats.ContentWaits, 1, "only chat waited for its content")
	for _, s := range d.delivered {
		v, _ := s.Attributes().Get("content")
		switch s.Name() {
		case "chat":
			assert.Equal(t, "hi", v.Str())
		case "tool":
			assert.Equal(t, "early", v.Str())
		case "chat 2":
			assert.Equal(t, "while held", v.Str())
		}
	}
}

// 16 goroutines admit interleaved traces at once (run with -race); every trace comes out whole.
func TestConcurrentAdmit(t *testing.T) {
	d := newDriver(t, func(c *Config) { c.Shards = 4 })
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				tr := pcommon.TraceID{byte(g), 15: byte(i)}
				name := func(s string) string { return fmt.Sprintf("%d/%d %s", g, i, s) }
				require.NoError(t, d.send(sp{name: name("chat"), parent: name("http"), kept: true, trace: tr}))
				require.NoError(t, d.send(sp{name: name("http"), parent: name("agent"), trace: tr}, sp{name: name("agent"), kept: true, trace: tr}))
			}
		})
	}
	// The releaser runs all along, until every sender is done.
	stop, released := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(released)
		for {
			select {
			case <-stop:
				return
			default:
				d.m.Expire()
				d.deliver(d.m.TakeReady())
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-released
	d.shutdown()
	d.checkInvariants(t, true, false)
	assert.Empty(t, d.journal.spanRecords())
}

// Two journal records that hold the same span (a crash between a resent span's append and the
// older record's removal): recovery holds the span once, delivers it once, and removes both
// records, so neither pins the journal nor comes back at the next restart.
func TestRecoverSpanInTwoRecords(t *testing.T) {
	d := newDriver(t, nil)
	for range 2 {
		td, _ := buildBatch([]sp{{name: "a", parent: "p", kept: true}})
		payload, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		require.NoError(t, err)
		_, err = d.journal.Append(context.Background(), journal.KindSpans, d.clock.Now(), nil, payload)
		require.NoError(t, err)
	}
	require.Len(t, d.journal.records(), 2)

	d2 := newDriver(t, nil)
	d2.journal = d.journal
	d2.m = New(testConfig(d2.clock), d.journal, nil, d2.observe)
	d2.clock.now = d.clock.Now()
	d2.arrived[idOf("a")] = sp{name: "a", parent: "p", kept: true}
	require.NoError(t, d2.m.Recover(d.journal.records()))
	assert.Equal(t, int64(1), d2.m.HeldSpans(), "the span is held once")
	require.NoError(t, d2.send(sp{name: "p", kept: true}))
	d2.deliver(d2.m.TakeReady())
	assert.Equal(t, map[string]string{"p": "", "a": "p"}, d2.tree())
	assert.Len(t, d2.delivered, 2, "a once, p once")
	assert.Empty(t, d.journal.records(), "both records removed")
}

// A call that puts the memory over max_traces brings it back under the bound itself: with the write
// ahead there is no call between its admission and its write for eviction to wait for.
func TestAdmitEnforcesTheBound(t *testing.T) {
	d := newDriver(t, func(c *Config) { c.MaxTraces = 1 })
	require.NoError(t, d.send(sp{name: "old", kept: true, trace: pcommon.TraceID{9}}))
	require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "chat", parent: "agent", kept: true}))
	assert.Equal(t, int64(1), d.m.Traces(), "the idle old trace was evicted")
}

// A span held for one tenant is not replaced by another tenant's span with the same ids (which a
// resend of the same tenant would do): the other's goes on as it came, the held one stays held and
// goes on under its parent.
func TestHeldSpanNotReplacedByAnotherTenant(t *testing.T) {
	d := newDriver(t, nil)
	tenantInfo := func(pk string) client.Info {
		return client.Info{Metadata: client.NewMetadata(map[string][]string{"authorization": {"Basic " + pk}})}
	}
	admit := func(info client.Info, s sp) *Admission {
		td, decisions := buildBatch([]sp{s})
		adm, err := d.m.Admit(info, td, decisions)
		require.NoError(t, err)
		d.deliver(adm.Deliveries)
		if adm.Pass {
			d.collect(td)
		}
		return adm
	}
	for _, s := range []sp{{name: "child", parent: "agent", kept: true}, {name: "agent", kept: true}} {
		d.arrived[idOf(s.name)] = s
	}
	admit(tenantInfo("a"), sp{name: "child", parent: "agent", kept: true})
	require.Equal(t, int64(1), d.m.HeldSpans())
	child := sp{name: "child", parent: "agent", kept: true}
	b := admit(tenantInfo("b"), child)
	held := d.m.shards[d.m.shardOf(child.traceID())].traces[child.traceID()].held[idOf("child")]
	require.NotNil(t, held)
	assert.Equal(t, TenantOf(tenantInfo("a")), held.tenant(),
		"the other tenant's span is not held in place of the first")
	assert.True(t, b.Pass, "it goes on in its own request")
	assert.Equal(t, int64(1), d.m.HeldSpans(), "the first tenant's span is still held")
	admit(tenantInfo("a"), sp{name: "agent", kept: true})
	d.deliver(d.m.TakeReady())
	assert.Equal(t, map[string]string{"agent": "", "child": "agent"}, d.tree())
	assert.Len(t, d.delivered, 3, "b's child, a's agent and a's child")
	assert.Zero(t, d.m.HeldSpans())
}

// A remembered trace is a trace value and its records: the trace itself must stay in the 128-byte
// size class of Go's allocator, or every remembered trace costs a size class more heap
// (BenchmarkRememberedTraces measured 965 -> 1,161 bytes per trace when two fields pushed it to 144).
// What few traces need goes in traceRefs.
func TestRememberedTraceStaysIn128Bytes(t *testing.T) {
	if size := unsafe.Sizeof(trace{}); size > 128 {
		t.Fatalf("trace is %d bytes, over the 128-byte size class: move rarely used fields to traceRefs", size)
	}
}
