package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"slices"
	"time"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
)

// Expire ends the waits that are over and forgets idle and late traces (doc.go, "wait ends").
func (m *Memory) Expire() {
	now := m.cfg.Now()
	var out released
	for _, sh := range m.shards {
		sh.mu.Lock()
		sh.expire(m, now, &out)
		sh.sizeHeld(m) // the spans still held, before Enforce reads the budget
		sh.unlock(m)
	}
	m.finish(&out)
	if m.gate != nil {
		m.gate.Expire(now)
	}
	m.Enforce()
}

func (sh *shard) expire(m *Memory, now time.Time, out *released) {
	cfg := &m.cfg
	for t, next := sh.waiting.head, (*trace)(nil); t != nil; t = next {
		next = t.next // t may leave the list
		idle := now.Sub(t.lastActivity) >= cfg.WaitDuration
		if m.pendingGate(t) {
			m.gate.Tick(m.gatedOf(sh, t, out), now)
		}
		for _, it := range t.held { // only it leaves t.held
			waited := now.Sub(it.heldAt)
			if waited >= cfg.ContentWait {
				sh.endWaits(m, it, WaitContent, now, ReleaseContent, out)
			}
			// A parent wait ends after the gate's: an open parent in a trace whose gate may still
			// shut would deliver a connector of a dropped trace.
			switch {
			case it.reason&(WaitParent|WaitGate) != WaitParent:
			case idle:
				sh.endWaits(m, it, WaitParent, now, ReleaseWaitExpired, out)
			case waited >= cfg.MaxWaitDuration:
				sh.endWaits(m, it, WaitParent, now, ReleaseMaxWait, out)
			}
		}
	}
	expired := func(c waitingContent) bool { return now.Sub(c.at) >= cfg.ContentWait }
	waiting := func(c waitingContent) bool { return !expired(c) }
	for t := range sh.withContent { // content that waited ContentWait for its span is discarded
		for id, cs := range t.content {
			if slices.ContainsFunc(cs, expired) {
				gone := slices.DeleteFunc(slices.Clone(cs), waiting)
				sh.dropContent(m, t, id, gone, UnmatchedNoSpan, out)
				if keep := slices.DeleteFunc(cs, expired); len(keep) > 0 {
					sh.setContent(t, id, keep)
				}
			}
		}
	}
	// compact and forget take t off the idle list: the next is its head again.
	for t := sh.idle.head; t != nil && now.Sub(t.lastActivity) >= cfg.RememberDuration; t = sh.idle.head {
		if len(t.open) > 0 || len(t.content) > 0 {
			sh.compact(m, t, out)
		} else {
			sh.forget(m, t, out)
		}
	}
	for t := sh.late.head; t != nil && now.Sub(t.lastActivity) >= cfg.LateParentWindow; t = sh.late.head {
		sh.forget(m, t, out)
	}
}

func (m *Memory) finish(out *released) { queue(m, &m.ready, m.settle(out), m.wake) }

// settle ends an operation, with no shard lock held: what it made known journaled before the spans
// that point at it go on (and a shut gate before its spans' records go), its records done, the
// gate's part finished, its events observed.
func (m *Memory) settle(out *released) []*Delivery {
	m.journalAfterApply(out)
	var ids []uint64
	for _, r := range out.done {
		if id := r.add(-1); id != 0 {
			ids = append(ids, id)
		}
	}
	m.remove(ids...) // in one write (of lazy records: in the next one)
	if len(out.after) > 0 {
		m.gate.Finished(out.after)
	}
	m.observe(&out.stats)
	return m.group(out.items)
}

// overBudget reports which bound the memory exceeds, if any. Ready spans count but cannot be
// evicted (Admit pushes back when they alone fill the limit).
func (m *Memory) overBudget() (EvictReason, bool) {
	if m.Bytes() > m.cfg.MemoryLimitBytes && m.bytes.Load() > 0 {
		return EvictMemoryLimit, true
	}
	return EvictMaxTraces, m.traces.Load() > int64(m.cfg.MaxTraces)
}

// Enforce brings the memory back under its bounds (doc.go, "budget exceeded").
func (m *Memory) Enforce() {
	m.enforceGate()
	if _, over := m.overBudget(); !over {
		return
	}
	var out released
	idle := fronts{pick: (*shard).oldestIdle}
	waiting := fronts{pick: func(sh *shard) *trace { return sh.waiting.head }}
	for why, over := m.overBudget(); over; why, over = m.overBudget() {
		evict := func(sh *shard, t *trace) { sh.evict(m, t, why, &out) }
		if !idle.takeOldest(m, evict) && !waiting.takeOldest(m, evict) {
			break
		}
	}
	m.finish(&out)
}

// fronts are the activity times of the shards' oldest traces of one kind (pick), read once per
// Enforce, not per eviction: a front only becomes newer, so the order stays oldest first.
type fronts struct {
	pick func(*shard) *trace
	at   []time.Time
	has  []bool
}

func (f *fronts) read(i int, sh *shard) {
	t := f.pick(sh)
	if f.has[i] = t != nil; t != nil {
		f.at[i] = t.lastActivity
	}
}

func (f *fronts) oldest() int {
	best := -1
	for i, ok := range f.has {
		if ok && (best < 0 || f.at[i].Before(f.at[best])) {
			best = i
		}
	}
	return best
}

// takeOldest runs take on the oldest front, under its shard's lock; false when no shard has one.
func (f *fronts) takeOldest(m *Memory, take func(*shard, *trace)) bool {
	best := f.oldest()
	if best < 0 { // the first look, or traces may have come since the last one
		if f.at == nil {
			f.at, f.has = make([]time.Time, len(m.shards)), make([]bool, len(m.shards))
		}
		for i, sh := range m.shards {
			sh.mu.Lock()
			f.read(i, sh)
			sh.unlock(m)
		}
		if best = f.oldest(); best < 0 {
			return false
		}
	}
	sh := m.shards[best]
	sh.mu.Lock()
	defer sh.unlock(m)
	if t := f.pick(sh); t != nil { // nil: taken meanwhile; the caller looks again
		take(sh, t)
	}
	f.read(best, sh)
	return true
}

// evict forgets t, or compacts it when content waits in it, its held spans released by rule 1.
func (sh *shard) evict(m *Memory, t *trace, why EvictReason, out *released) {
	if t.list == &sh.waiting {
		sh.releaseAll(m, t, ReleaseEvicted, out)
		out.stats.EvictedWaiting++
	}
	if len(t.content) > 0 {
		sh.compact(m, t, out)
	} else {
		sh.forget(m, t, out)
	}
	out.stats.Evicted[why]++
}

// oldestIdle is the shard's oldest idle or late trace without content.
func (sh *shard) oldestIdle() *trace {
	var oldest *trace
	for _, l := range [...]*traceList{&sh.late, &sh.idle} {
		t := l.head
		for t != nil && len(t.content) > 0 {
			t = t.next
		}
		if t != nil && (oldest == nil || t.lastActivity.Before(oldest.lastActivity)) {
			oldest = t
		}
	}
	return oldest
}

// ContentRoom: ErrContentOverloaded when size bytes do not fit even after evicting what can go without loss.
func (m *Memory) ContentRoom(size int64) error {
	if m.Bytes()+size > m.cfg.MemoryLimitBytes {
		m.Enforce()
		if m.Bytes()+size > m.cfg.MemoryLimitBytes {
			return ErrContentOverloaded
		}
	}
	return nil
}

// releaseAll ends every wait of t's held spans by rule 1.
func (sh *shard) releaseAll(m *Memory, t *trace, rel ReleaseReason, out *released) {
	now := m.cfg.Now()
	if m.pendingGate(t) { // the gate settles it on what arrived
		why := gate.ForceEvicted
		if rel == ReleaseShutdown {
			why = gate.ForceShutdown
		}
		m.gate.Force(m.gatedOf(sh, t, out), now, why)
	}
	for _, it := range t.held { // only it leaves t.held
		sh.endWaits(m, it, WaitContent|WaitParent, now, rel, out)
	}
}

// Drain releases every held span by rule 1 (shutdown) and returns them with every queued delivery.
func (m *Memory) Drain() []*Delivery {
	m.forWaiting(func(sh *shard, t *trace, out *released) { sh.releaseAll(m, t, ReleaseShutdown, out) })
	return m.TakeReady()
}

func (m *Memory) forWaiting(f func(sh *shard, t *trace, out *released)) {
	var out released
	for _, sh := range m.shards {
		sh.mu.Lock()
		for t, next := sh.waiting.head, (*trace)(nil); t != nil; t = next {
			next = t.next // t may leave the list
			f(sh, t, &out)
		}
		sh.unlock(m)
	}
	m.finish(&out)
}
