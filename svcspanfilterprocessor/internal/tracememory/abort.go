package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Between Admit and Commit a batch's journal append may still fail; Abort then refuses the batch
// and the client sends it again. So that nothing is delivered twice and no content is lost to that
// resend, until Commit:
//   - its held spans are not released by other calls (their parent or content arriving, their wait
//     ending): they stay held, settled, and Commit releases them (deferRelease, releaseDeferred);
//   - Abort forgets the records of its kept spans: until the client sends them again they are not
//     seen, so content arriving for them meanwhile waits instead of being discarded as too late
//     (forgetKept);
//   - Abort delivers none of its own spans: the content its spans joined waits again for the
//     resend, which joins it again, and the parents its connector spans closed are open again, so
//     the resend makes the connectors again (giveBack).

// RecordRef.state values.
const (
	refCommitted int32 = iota // written, or no write can fail: items are released as usual
	refPending                // the append is still to come
	refDeferred               // still to come, and a release of one of its items was deferred
	// refAborting: the append failed and Abort is taking its items out. Set before it unholds
	// them: a release meanwhile keeps the item held for Abort to discard (deferRelease), and a
	// concurrent Abort of a later batch that replaced one of them does not hold it again.
	refAborting
	// refAborted: the append failed (Abort). None of its items is held or goes on: the client
	// sends them again. A copy of one that a later batch replaced is never held again, nor are
	// its records finished by that batch (Admission.replaced); Done on the ref does nothing.
	refAborted
)

// aborted reports whether it belongs to a batch whose journal append failed.
// Read under the shard lock of it.trace when it decides whether to hold it again: Abort sets
// refAborting before it takes that lock for its items, so a copy held again before is unheld by it.
func (it *item) aborted() bool {
	if it.ref == nil {
		return false
	}
	s := it.ref.state.Load()
	return s == refAborting || s == refAborted
}

// deferRelease reports whether an item of r must stay held until r's Commit (it marks r so that
// Commit looks for it).
func (r *RecordRef) deferRelease() bool {
	if r == nil {
		return false
	}
	for {
		switch r.state.Load() {
		case refCommitted, refAborted:
			return false
		case refDeferred, refAborting:
			return true
		default:
			if r.state.CompareAndSwap(refPending, refDeferred) {
				return true
			}
		}
	}
}

// joinedContent is waiting content a span of an abortable batch joined (Admission.joined).
type joinedContent struct {
	trace   *trace
	span    pcommon.SpanID
	tenant  string
	content []waitingContent
}

// reopenedParent is an open parent that a connector span of an abortable batch closed.
type reopenedParent struct {
	trace *trace
	span  pcommon.SpanID
	ref   *RecordRef
}

// commitAbortable ends what an abortable batch kept for Abort, once its record is written: the
// open parents its connectors closed leave the journal, and the spans other calls settled meanwhile
// are released, delivered with the batch's own deliveries.
func (a *Admission) commitAbortable() {
	for _, r := range a.reopened {
		r.ref.Done(1)
	}
	a.joined, a.reopened, a.batch = nil, nil, ptrace.Traces{}
	if a.ref.state.Load() != refCommitted && a.ref.state.Swap(refCommitted) == refDeferred {
		a.releaseDeferred()
	}
}

// releaseDeferred releases the batch's items whose release was deferred (deferRelease).
func (a *Admission) releaseDeferred() {
	m := a.m
	var out released
	for _, it := range a.items {
		sh := m.shards[m.shardOf(it.trace.id)] // it.trace never changes (hold does not write it)
		sh.mu.Lock()
		switch {
		case it.deferred && it.unheldGoesOn:
			it.deferred, it.unheldGoesOn = false, false
			out.items = append(out.items, it)
		case it.deferred && it.held && it.trace.held[it.span.SpanID()] == it:
			it.deferred = false
			sh.release(m, it.trace, it, it.deferredWhy, &out)
		}
		sh.unlock(m)
	}
	out.finishRefs()
	m.journalOpenedOrWarn(&out)
	a.Deliveries = append(a.Deliveries, m.group(out.items)...)
	if !out.stats.empty() {
		m.observe(&out.stats)
	}
}

// giveBack takes the batch's own deliveries out of its deliveries (they are not delivered: the
// client sends their spans again), gives the content they joined back to wait for that resend,
// and opens again the parents their connector spans closed. It returns the other deliveries:
// spans of earlier, acknowledged calls that the batch released.
func (a *Admission) giveBack(out *released) []*Delivery {
	m := a.m
	others := a.Deliveries[:0]
	for _, d := range a.Deliveries {
		if d.refs[a.ref] == 0 {
			others = append(others, d)
			continue
		}
		m.readyBytes.Add(-d.bytes)
		d.bytes, d.refs = 0, nil
	}
	now := m.cfg.Now()
	for _, j := range a.joined {
		sh := m.shards[m.shardOf(j.trace.id)]
		sh.mu.Lock()
		t := sh.touch(m, j.trace.id, now) // its trace, or a new one if it was evicted meanwhile
		if t.joined != nil {
			sh.forgetJoined(m, t, j.span, j.content) // not joined after all: it waits for the resend
		}
		own := ownContent(j.content, j.tenant, nil)
		if len(own) < len(j.content) {
			for _, c := range j.content {
				if c.content.Tenant() != j.tenant && c.ref != nil {
					out.done = append(out.done, c.ref) // another tenant's: already counted unmatched
				}
			}
		}
		if t.content == nil {
			t.content = map[pcommon.SpanID][]waitingContent{}
		}
		for _, c := range own {
			m.waitForResend(&c, now)
			t.content[j.span] = append(t.content[j.span], c)
			m.addBytes(t, c.content.Size()+contentCost)
		}
		if len(t.content[j.span]) > 0 {
			sh.withContent[t] = struct{}{}
		}
		if it := t.held[j.span]; it != nil {
			sh.takeWaitingContent(m, t, it, out) // a copy sent again meanwhile gathers it
		}
		sh.unlock(m)
	}
	for _, r := range a.reopened {
		sh := m.shards[m.shardOf(r.trace.id)]
		sh.mu.Lock()
		t := r.trace
		reopen := sh.traces[t.id] == t
		if reopen {
			if rec, ok := t.records[r.span]; ok && rec.state == stateConnector {
				t.records[r.span] = record{parent: rec.parent, state: stateDropped}
			}
			if _, ok := t.open[r.span]; ok {
				reopen = false // opened again meanwhile
			} else {
				m.addBytes(t, t.addOpen(r.span))
				t.open[r.span] = r.ref
			}
		}
		if !reopen {
			out.closeOpen(r.ref)
		}
		sh.unlock(m)
	}
	a.joined, a.reopened = nil, nil
	return others
}

// forgetKept forgets the records of the batch's kept spans (the spans that passed, were held, or
// carry joined content: none went on), except those another call holds. It runs first, while the
// batch's spans are still held: content arriving meanwhile is gathered by them, then waits.
func (a *Admission) forgetKept() {
	if a.batch == (ptrace.Traces{}) {
		return
	}
	a.forgetKeptIn(a.batch)
	if a.Journaled > 0 {
		a.forgetKeptIn(a.HeldCopy)
	}
	a.batch = ptrace.Traces{}
}

func (a *Admission) forgetKeptIn(td ptrace.Traces) {
	m := a.m
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				tid, id := spans.At(k).TraceID(), spans.At(k).SpanID()
				sh := m.shards[m.shardOf(tid)]
				sh.mu.Lock()
				if t := sh.traces[tid]; t != nil && (t.held[id] == nil || t.held[id].ref == a.ref) {
					if rec, ok := t.records[id]; ok && rec.state == stateKept {
						delete(t.records, id)
						m.addBytes(t, -recordCost)
					}
				}
				sh.unlock(m)
			}
		}
	}
}
