package tracememory

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/pkg/svcattr"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"
)

var testTrace = pcommon.TraceID{0xaa, 15: 1}

func idOf(name string) pcommon.SpanID {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], h.Sum64())
	return id
}

// sp is a test span: ids derive from names, so a test reads as a tree of names.
type sp struct {
	name, parent string
	kept         bool
	verdict      *Verdict // overrides kept
	experiment   bool
	trace        pcommon.TraceID
	// big: the length of an extra string attribute (a prompt), 0 for none.
	big     int
	kind    ptrace.SpanKind
	err     bool   // status ERROR (an outcome rule keeps its trace)
	session string // session.id
}

func (s sp) traceID() pcommon.TraceID {
	if s.trace.IsEmpty() {
		return testTrace
	}
	return s.trace
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeJournal keeps records in memory and counts appends and removes.
type fakeJournal struct {
	mu      sync.Mutex
	next    uint64
	live    map[uint64]journal.Record
	appends int
	removes int
	fail    bool
}

func newFakeJournal() *fakeJournal { return &fakeJournal{live: map[uint64]journal.Record{}} }

func (j *fakeJournal) Append(_ context.Context, kind journal.Kind, heldAt time.Time, md map[string][]string, payload []byte) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fail {
		return 0, context.DeadlineExceeded
	}
	j.next++
	j.appends++
	j.live[j.next] = journal.Record{ID: j.next, Kind: kind, HeldAt: heldAt, Metadata: md, Payload: append([]byte(nil), payload...)}
	return j.next, nil
}

func (j *fakeJournal) Remove(_ context.Context, ids ...uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, id := range ids {
		if _, ok := j.live[id]; !ok {
			panic("removed twice or never appended")
		}
		delete(j.live, id)
		j.removes++
	}
	return nil
}

func (j *fakeJournal) records() []journal.Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []journal.Record
	for id := uint64(1); id <= j.next; id++ {
		if r, ok := j.live[id]; ok {
			out = append(out, r)
		}
	}
	return out
}

func testConfig(clock *fakeClock) Config {
	return Config{
		WaitDuration:     5 * time.Second,
		MaxWaitDuration:  time.Minute,
		RememberDuration: 30 * time.Second,
		LateParentWindow: 15 * time.Minute,
		ContentWait:      5 * time.Second,
		MaxTraces:        10_000,
		MemoryLimitBytes: 256 << 20,
		ConnectorSpans:   true,
		Now:              clock.Now,
	}
}

// driver plays the processor: it admits batches, delivers what comes out, and records every
// delivered span and every span that arrived.
type driver struct {
	t             testing.TB
	m             *Memory
	clock         *fakeClock
	journal       *fakeJournal
	mu            sync.Mutex
	delivered     []ptrace.Span
	arrived       map[pcommon.SpanID]sp
	stats         Stats
	rules         *sampling.Outcome // outcome sampling: the memory's gate (newOutcomeDriver)
	sampler       *outcome.Sampler
	decided       []outcome.Decided
	scoresDropped int64
	refuse        bool // the next consumer refuses with a retryable error
	restarted     bool // kill ran: spans may be delivered again
	mutate        func(*Config)
	// step, when set (everyStep), runs after every operation: send, each second of advance, kill, shutdown.
	step func()
}

func newDriver(t testing.TB, mutate func(*Config)) *driver { return newOutcomeDriver(t, nil, mutate) }

// newOutcomeDriver is a driver whose memory has outcome sampling by rules as its gate (nil: none).
func newOutcomeDriver(t testing.TB, rules *sampling.Outcome, mutate ...func(*Config)) *driver {
	d := &driver{t: t, clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}, journal: newFakeJournal(),
		arrived: map[pcommon.SpanID]sp{}, rules: rules}
	d.mutate = func(c *Config) {
		for _, f := range mutate {
			if f != nil {
				f(c)
			}
		}
	}
	cfg := testConfig(d.clock)
	cfg.Journaled = true
	d.mutate(&cfg)
	d.m = d.newMemory(cfg, d.journal, nil)
	return d
}

// newMemory is New, behind the driver's outcome gate if it has one.
func (d *driver) newMemory(cfg Config, j journal.Journal, join Join) *Memory {
	m := New(cfg, j, join, d.observe)
	if d.rules != nil {
		oj := j
		if !cfg.Journaled {
			oj = journal.Nop
		}
		d.sampler = outcome.New(outcome.Settings{Outcome: d.rules, Memory: m, Journal: oj, Now: cfg.Now,
			Observe: func(s *outcome.Stats) {
				d.mu.Lock()
				d.decided = append(d.decided, s.Decided...)
				d.scoresDropped += s.ScoresDropped
				d.mu.Unlock()
			}})
		m.SetGate(d.sampler, cfg.MaxGatedBytes)
	}
	return m
}

// recover is the processor's recovery: outcome sampling's decisions, the memory, its score records.
func (d *driver) recover(m *Memory, records []journal.Record) error {
	if d.sampler == nil {
		return m.Recover(records)
	}
	scores := func() error { return d.sampler.RecoverScores(records) }
	return errors.Join(d.sampler.RecoverDecisions(records), m.Recover(records, scores))
}

func (d *driver) observe(s *Stats) {
	d.mu.Lock()
	d.stats.add(s)
	d.mu.Unlock()
}

func buildBatch(spans []sp) (ptrace.Traces, []Decision) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "agent")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("test")
	decisions := make([]Decision, 0, len(spans))
	for _, s := range spans {
		span := ss.Spans().AppendEmpty()
		span.SetName(s.name)
		span.SetKind(s.kind)
		span.SetTraceID(s.traceID())
		span.SetSpanID(idOf(s.name))
		if s.parent != "" {
			span.SetParentSpanID(idOf(s.parent))
		}
		span.Attributes().PutStr("payload", s.name)
		if s.err {
			span.Status().SetCode(ptrace.StatusCodeError)
		}
		if s.session != "" {
			span.Attributes().PutStr("session.id", s.session)
		}
		if s.big > 0 {
			span.Attributes().PutStr("gen_ai.prompt", strings.Repeat("x", s.big))
		}
		v := Drop
		if s.kept {
			v = Keep
		}
		if s.verdict != nil {
			v = *s.verdict
		}
		decisions = append(decisions, Decision{Verdict: v, MarksExperiment: s.experiment})
	}
	return td, decisions
}

// send admits one batch and delivers its pass-through spans and what it released.
func (d *driver) send(spans ...sp) error {
	d.t.Helper()
	td, decisions := buildBatch(spans)
	d.mu.Lock()
	for _, s := range spans {
		d.arrived[idOf(s.name)] = s
	}
	d.mu.Unlock()
	adm, err := d.m.Admit(client.Info{}, td, decisions)
	if err != nil {
		d.deliver(d.m.TakeReady()) // earlier calls' spans it released go on all the same
		return err
	}
	if adm.Pass {
		d.collect(td)
	}
	d.deliver(adm.Deliveries)
	d.stepDone()
	return nil
}

func (d *driver) stepDone() {
	if d.step != nil {
		d.step()
	}
}

func (d *driver) deliver(ds []*Delivery) {
	for i, dl := range ds {
		if d.refuse {
			d.m.Requeue(ds[i:]...)
			return
		}
		d.collect(dl.Traces)
		d.m.Delivered(dl)
	}
}

func (d *driver) collect(td ptrace.Traces) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		ss := td.ResourceSpans().At(i).ScopeSpans()
		for j := 0; j < ss.Len(); j++ {
			for k := 0; k < ss.At(j).Spans().Len(); k++ {
				span := ptrace.NewSpan()
				ss.At(j).Spans().At(k).CopyTo(span)
				d.delivered = append(d.delivered, span)
			}
		}
	}
}

// advance moves the clock by d in steps of one second, running the releaser at each.
func (d *driver) advance(total time.Duration) {
	for step := time.Duration(0); step < total; {
		s := min(time.Second, total-step)
		d.clock.Advance(s)
		step += s
		d.m.Expire()
		d.deliver(d.m.TakeReady())
		d.stepDone()
	}
}

func (d *driver) shutdown() {
	d.deliver(d.m.Drain())
	d.stepDone()
}

// tree is each delivered span's parent by name: "" for a root, "<?>" for a parent never delivered;
// connectors are named "~name".
func (d *driver) tree() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	names := map[pcommon.SpanID]string{}
	for _, s := range d.delivered {
		n := s.Name()
		if _, ok := s.Attributes().Get(ConnectorAttribute); ok {
			n = "~" + n
		}
		names[s.SpanID()] = n
	}
	out := map[string]string{}
	for _, s := range d.delivered {
		p := ""
		if !s.ParentSpanID().IsEmpty() {
			var ok bool
			if p, ok = names[s.ParentSpanID()]; !ok {
				p = "<?>"
			}
		}
		out[names[s.SpanID()]] = p
	}
	return out
}

// checkInvariants: nothing delivered twice; only kept spans and connectors delivered; every kept
// span that arrived is delivered (after shutdown); every delivered kept span hangs, through
// connectors only, below its nearest kept ancestor; a delivered parent id that is not delivered is
// a span that never arrived (or, allowDangling, one whose trace memory was evicted).
func (d *driver) checkInvariants(t *testing.T, complete, allowDangling bool) {
	t.Helper()
	d.checkTrees(t, complete, allowDangling, nil)
}

// checkTrees is checkInvariants; pending (between steps, see everyStep) are the kept spans held or
// ready, not yet delivered: a delivered span pointing at one of them hangs below it.
func (d *driver) checkTrees(t *testing.T, complete, allowDangling bool, pending map[pcommon.SpanID]bool) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	byID := map[pcommon.SpanID]ptrace.Span{}
	for _, s := range d.delivered {
		key := s.SpanID()
		if first, dup := byID[key]; dup {
			// After a restart, a journal record still held for one of its spans delivers the
			// others again (at least once): the same span, below the same parent.
			require.True(t, d.restarted, "span %q delivered twice", s.Name())
			equal(t, first.ParentSpanID(), s.ParentSpanID(), "span %q delivered again below another parent", s.Name())
		}
		byID[key] = s
	}
	truth := d.arrived
	dropped := map[pcommon.TraceID]bool{} // traces decided dropped (outcome sampling)
	for _, dc := range d.decided {
		if was, seen := dropped[dc.Trace]; seen { // decided again after a restart: alike
			require.True(t, d.restarted, "trace decided twice")
			equal(t, was, !dc.Keep, "trace decided otherwise after a restart")
		}
		dropped[dc.Trace] = !dc.Keep
	}
	for id, s := range byID {
		require.False(t, dropped[s.TraceID()], "span %q of a dropped trace delivered", s.Name())
		_, conn := s.Attributes().Get(ConnectorAttribute)
		a, ok := truth[id]
		require.True(t, ok, "delivered span %q never arrived", s.Name())
		if conn {
			require.False(t, a.kept, "connector for kept span %q", s.Name())
			equal(t, 1, s.Attributes().Len(), "a connector carries only its marker")
			continue
		}
		require.True(t, a.kept || a.verdict != nil, "dropped span %q delivered", s.Name())
		if inCycle(truth, a) {
			continue // the tree it came in is no tree: checked below, no cycle goes on
		}
		// The nearest kept ancestor in the truth, through spans that arrived dropped.
		want, wantUnknown := "", ""
		seen := map[string]bool{a.name: true}
		for p := a.parent; p != "" && !seen[p]; {
			seen[p] = true
			pa, arrived := truth[idOf(p)]
			if !arrived {
				wantUnknown = p
				break
			}
			if pa.kept && !dropped[pa.traceID()] {
				want = p
				break
			}
			p = pa.parent
		}
		// The delivered ancestor, skipping connectors.
		got := ""
		gotDangling := false
		for p := s.ParentSpanID(); !p.IsEmpty(); {
			ps, ok := byID[p]
			if !ok && pending[p] {
				got = truth[p].name
				break
			}
			if !ok {
				gotDangling = true
				if pa, arrived := truth[p]; arrived {
					require.True(t, allowDangling, "span %q points at %q, which arrived but was never delivered", s.Name(), pa.name)
				}
				break
			}
			if _, conn := ps.Attributes().Get(ConnectorAttribute); !conn {
				got = ps.Name()
				break
			}
			p = ps.ParentSpanID()
		}
		switch {
		case gotDangling && !allowDangling:
			require.NotEmpty(t, wantUnknown, "span %q dangles although its ancestors all arrived", s.Name())
		case !gotDangling && want != "":
			equal(t, want, got, "span %q: hangs below the wrong ancestor", s.Name())
		case !gotDangling && wantUnknown == "":
			equal(t, "", got, "span %q: every ancestor dropped, it must be a root", s.Name())
		}
	}
	for _, s := range byID {
		seen := map[pcommon.SpanID]bool{s.SpanID(): true}
		for p := s.ParentSpanID(); !p.IsEmpty(); {
			require.False(t, seen[p], "span %q is its own ancestor in the delivered tree", s.Name())
			seen[p] = true
			ps, ok := byID[p]
			if !ok {
				break
			}
			p = ps.ParentSpanID()
		}
	}
	for id, a := range truth { // nothing accepted is lost: delivered, or (between steps) still held
		if a.kept && !dropped[a.traceID()] && (complete || pending != nil) {
			_, ok := byID[id]
			require.True(t, ok || !complete && pending[id], "kept span %q neither delivered nor held", a.name)
		}
	}
	if complete {
		require.Zero(t, d.m.HeldSpans())
	}
	checkCounts(t, d.m)
	_ = svcattr.OriginalParentSpanID
}

// inCycle reports whether a's chain of parents, through the spans that arrived, leads back to a.
func inCycle(truth map[pcommon.SpanID]sp, a sp) bool {
	seen := map[string]bool{}
	for p := a.parent; p != "" && !seen[p]; {
		if p == a.name {
			return true
		}
		seen[p] = true
		pa, ok := truth[idOf(p)]
		if !ok {
			return false
		}
		p = pa.parent
	}
	return false
}

// checkCounts: the memory's byte and span counters are the sums over its traces and held items
// (each held item counted by the bytes it carries, estimated or exact), and the shards' lists of
// unsized items are exactly their held items not yet sized. Call it with no operation under way.
func checkCounts(t *testing.T, m *Memory) {
	t.Helper()
	for _, sh := range m.shards {
		sh.mu.Lock()
	}
	defer func() {
		for _, sh := range m.shards {
			sh.mu.Unlock()
		}
	}()
	var bytes, heldBytes, heldSpans, gatedBytes, traces int64
	for _, sh := range m.shards {
		equal(t, counts{}, sh.pending, "counts published at unlock")
		inList := map[*item]bool{}
		for i, it := range sh.unsized {
			require.False(t, inList[it], "an item twice in the unsized list")
			require.EqualValues(t, i, it.unsizedAt, "an item knows its place in the unsized list")
			inList[it] = true
			require.Same(t, it, it.trace.held[it.span.SpanID()], "a released item in the unsized list")
			require.False(t, it.sized, "a sized item in the unsized list")
		}
		unsized := 0
		traces += int64(len(sh.traces))
		for _, tr := range sh.traces {
			bytes += tr.bytes
			// Its state is the list it is on (doc.go): waiting if and only if it holds something.
			holds := len(tr.held) > 0 || tr.refs != nil && tr.refs.gateHeld > 0
			require.True(t, tr.list == &sh.waiting && holds || (tr.list == &sh.idle || tr.list == &sh.late) && !holds,
				"trace %v holds %d spans but is on another list", tr.id, len(tr.held))
			_, listed := sh.withContent[tr]
			equal(t, len(tr.content) > 0, listed, "traces with waiting content are those listed")
			if tr.refs != nil {
				gatedBytes += tr.refs.gateHeld
				if tr.refs.gate != nil { // the gate's own invariants of the trace
					st, ok := tr.refs.gate.(interface {
						Check(gate.Status, int64) error
					})
					require.True(t, ok, "a gate state with no Check")
					require.NoError(t, st.Check(tr.gate, tr.refs.gateHeld), "trace %v", tr.id)
				}
			}
			for on := range tr.waitingOn {
				// Admit settles the spans waiting on a span only when the span becomes known.
				_, known := tr.records[on]
				require.False(t, known, "held spans wait on a span their trace knows")
			}
			for _, it := range tr.held {
				require.Same(t, it, tr.held[it.span.SpanID()], "held by its own span id")
				require.Same(t, tr, it.trace)
				require.NotZero(t, it.reason, "a held span waits for something")
				equal(t, it.reason&WaitParent != 0, it.indexed, "a span waits for its parent if and only if it is indexed")
				heldBytes += it.bytes
				heldSpans++
				if it.reason&WaitGate != 0 {
					gatedBytes += it.bytes
					require.Equal(t, gate.Pending, tr.gate, "a span waits behind a gate that is not pending")
				} else if m.gate != nil {
					require.NotEqual(t, gate.Pending, tr.gate, "a span of a pending trace waits not behind its gate")
				}
				if !it.sized {
					unsized++
					require.True(t, inList[it], "an unsized held item missing from the unsized list")
				} else if _, reparented := it.span.Attributes().Get(svcattr.OriginalParentSpanID); !reparented {
					// (A span re-parented while it still waits for content grew by the attribute
					// that records its original parent; it is not sized again for that.)
					equal(t, itemSize(it.span), it.bytes, "a sized held item carries its exact size")
				}
			}
		}
		equal(t, len(sh.unsized), unsized)
	}
	if g, ok := m.gate.(*outcome.Sampler); ok {
		own, err := g.Check(func(gate.Ref, int) {})
		require.NoError(t, err)
		equal(t, m.gateOwn.Load(), own, "the gate's own bytes are its kept sessions'")
	}
	equal(t, m.bytes.Load(), bytes, "memory bytes are the sum of its traces' bytes")
	equal(t, m.heldBytes.Load(), heldBytes, "held bytes are the sum of the held items' bytes")
	equal(t, m.heldSpans.Load(), heldSpans)
	equal(t, m.traces.Load(), traces, "the trace count is the traces in the shards")
	equal(t, m.gatedBytes.Load(), gatedBytes, "gated bytes are the sum of what waits behind gates")
}

// equal is require.Equal of comparable values without its cost when they are equal (the oracle
// runs after every step of the randomised tests).
func equal[T comparable](t *testing.T, want, got T, msgAndArgs ...any) {
	t.Helper()
	if want != got {
		require.Equal(t, want, got, msgAndArgs...)
	}
}
