package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// A gate (internal/gate) holds a trace's kept spans until it opens or shuts (doc.go, "gate").

// SetGate puts every trace behind g, before the first span (the processor's Start); maxBytes bounds
// what waits behind gates (0: only MemoryLimitBytes).
func (m *Memory) SetGate(g gate.Gate, maxBytes int64) { m.gate, m.cfg.MaxGatedBytes = g, maxBytes }

// gated is the memory's gate.Trace: a trace, under its shard lock, in one operation. Each shard has
// one (shard.handle, set by gatedOf): handing the gate a pointer allocates nothing per span.
type gated struct {
	m   *Memory
	sh  *shard
	t   *trace
	out *released
}

func (g *gated) ID() pcommon.TraceID     { return g.t.id }
func (g *gated) Experiment() bool        { return g.t.experiment }
func (g *gated) Status() gate.Status     { return g.t.gate }
func (g *gated) LastActivity() time.Time { return g.t.lastActivity }
func (g *gated) After(x any)             { g.out.after = append(g.out.after, x) }
func (g *gated) Done(ref gate.Ref)       { g.out.done = append(g.out.done, ref.(*RecordRef)) }
func (g *gated) Record(fields ...[]byte) {
	if g.m.cfg.Journaled {
		g.out.gated.add(g.t, fields...)
	}
}
func (g *gated) Open() { g.sh.settleGate(g, gate.Open) }
func (g *gated) Shut() { g.sh.settleGate(g, gate.Shut) }
func (g *gated) SetState(s any, bytes int64) {
	g.t.keepRefs().gate = s
	g.m.addBytes(g.t, bytes)
}

func (g *gated) State() any {
	if g.t.refs == nil {
		return nil
	}
	return g.t.refs.gate
}

func (g *gated) Touch(now time.Time) {
	if now.After(g.t.lastActivity) {
		g.t.lastActivity = now
	}
}

func (g *gated) Hold(bytes int64) {
	g.t.keepRefs().gateHeld += bytes
	g.m.addBytes(g.t, bytes)
	g.sh.pending.gatedBytes += bytes
	g.sh.place(g.t)
}

func (m *Memory) gatedOf(sh *shard, t *trace, out *released) *gated {
	sh.handle = gated{m, sh, t, out}
	return &sh.handle
}

// settled tells the gate that kept span (held or going on) of t has its parent settled.
func (m *Memory) settled(sh *shard, t *trace, out *released, span ptrace.Span, o *scopeOrigin) {
	if m.gate != nil {
		m.gate.Settled(m.gatedOf(sh, t, out), span, o.resource.resource, o.scope)
	}
}

// settleGate opens or shuts t's gate: its spans held behind it go on (once they wait for nothing
// else) or are discarded with the content they gathered.
func (sh *shard) settleGate(g *gated, to gate.Status) {
	m, t, out := g.m, g.t, g.out
	if t.gate != gate.Pending {
		return
	}
	t.gate = to
	for _, it := range t.held { // only it leaves t.held
		if it.reason&WaitGate == 0 {
			continue
		}
		if to == gate.Shut {
			sh.unhold(m, t, it)
			if id := it.span.SpanID(); t.content[id] != nil {
				sh.dropContent(m, t, id, t.content[id], UnmatchedSpanDropped, out)
			}
			it.reason = 0
			out.done = append(append(out.done, it.ref), it.contentRefs...)
			out.stats.Discarded++
			continue
		}
		sh.gateWaitOver(it)
		if it.reason&WaitParent == 0 {
			m.settled(sh, t, out, it.span, it.origin)
		}
		if it.reason == 0 {
			sh.release(m, t, it, ReleaseGate, out)
		}
	}
	sh.place(t)
}

// gateWaitOver ends its wait behind its trace's gate (under the shard lock).
func (sh *shard) gateWaitOver(it *item) {
	if it.reason&WaitGate != 0 {
		sh.pending.gatedBytes -= it.bytes
	}
	it.reason &^= WaitGate
}

// pendingGate: t waits behind a gate that holds something of it.
func (m *Memory) pendingGate(t *trace) bool {
	return m.gate != nil && t.gate == gate.Pending && t.refs != nil && t.refs.gate != nil
}

// enforceGate forces the least recently active pending traces while what waits behind gates
// exceeds MaxGatedBytes.
func (m *Memory) enforceGate() {
	if m.gate == nil || m.cfg.MaxGatedBytes <= 0 {
		return
	}
	var out released
	pending := fronts{pick: func(sh *shard) *trace {
		for t := sh.waiting.head; t != nil; t = t.next {
			if m.pendingGate(t) {
				return t
			}
		}
		return nil
	}}
	force := func(sh *shard, t *trace) { m.gate.Force(m.gatedOf(sh, t, &out), m.cfg.Now(), gate.ForceBudget) }
	for m.gatedBytes.Load() > m.cfg.MaxGatedBytes && pending.takeOldest(m, force) {
	}
	m.finish(&out)
}

var (
	_ gate.Memory = (*Memory)(nil)
	_ gate.Trace  = (*gated)(nil)
)

// The gate.Memory of the gate.

func (m *Memory) Pending(id pcommon.TraceID) bool { return !m.known(id, pcommon.SpanID{}, isSettled) }

func isSettled(t *trace, _ pcommon.SpanID) bool { return t.gate != gate.Pending }

func (m *Memory) SizeOf(attrs pcommon.Map) int64       { return mapSize(attrs) }
func (m *Memory) Room(size int64) error                { return m.ContentRoom(size) }
func (m *Memory) NewRef(id uint64, items int) gate.Ref { return m.NewRecordRef(id, items) }
func (m *Memory) Ready(bytes int64)                    { m.readyBytes.Add(bytes) }
func (m *Memory) Count(bytes int64)                    { m.gateOwn.Add(bytes) }
func (r *RecordRef) Hold(n int)                        { r.add(n) }

func (m *Memory) Gated(ids []pcommon.TraceID, now time.Time, f func(int, gate.Trace)) {
	var out released
	for i, id := range ids {
		sh := m.shards[m.shardOf(id)]
		sh.mu.Lock()
		t := sh.traces[id]
		if t == nil || t.gate == gate.Pending { // a settled trace is not kept longer for it
			t = sh.touch(m, id, now)
		}
		f(i, m.gatedOf(sh, t, &out))
		sh.unlock(m)
	}
	m.finish(&out)
}

func (m *Memory) ForcePending(which func(gate.Trace) bool) {
	m.forWaiting(func(sh *shard, t *trace, out *released) {
		if g := m.gatedOf(sh, t, out); m.pendingGate(t) && which(g) {
			m.gate.Force(g, m.cfg.Now(), gate.ForceShutdown)
		}
	})
}

func (m *Memory) RecoverEntries(rec journal.Record, size func([]byte) int, restore func(gate.Trace, []byte)) error {
	var out released
	guard := m.NewRecordRef(rec.ID, 1)
	err := m.perTrace(size, func(t *trace, e []byte) {
		restore(m.gatedOf(m.shards[m.shardOf(t.id)], t, &out), e)
	})(rec, guard)
	guard.Done(1)
	m.finish(&out)
	return err
}
