package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Verdict is the filter's decision for one span, before the trace's experiment flag is known.
type Verdict uint8

const (
	Drop Verdict = iota
	Keep
	// KeepIfExperiment: kept by the rules but sampled out, so kept only if its trace is an experiment.
	KeepIfExperiment
)

// Decision is the processor's input for one span of a batch.
type Decision struct {
	Verdict Verdict
	// MarksExperiment: the span marks its trace as an experiment (svcattr.IsExperimentAttribute);
	// from then on the trace's spans are never sampled out.
	MarksExperiment bool
}

// ConnectorAttribute marks a connector span: a dropped span delivered stripped because delivered
// spans point at it.
const ConnectorAttribute = "svc.gateway.connector"

// Admission is the outcome of Admit for one batch.
type Admission struct {
	// Kept is the final decision per span of the batch, in batch order.
	Kept []bool
	// Held is the number of spans of the batch the memory now holds.
	Held int
	// Pass reports whether spans are left in the batch for the next consumer.
	Pass bool
	// Deliveries are spans released by this batch (their parent arrived in it) and connector spans,
	// one per request client context; the caller delivers them and reports back with Delivered,
	// Requeue or Discard.
	Deliveries []*Delivery
	// Journaled is the number of spans in HeldCopy: the held spans and the spans of the batch that go
	// on as deliveries (they carry joined content); the caller journals HeldCopy when it is not zero.
	Journaled int
	// HeldCopy has a copy of the spans held from this batch (Config.Journaled only), for the journal.
	HeldCopy ptrace.Traces
	HeldAt   time.Time
	Stats    Stats

	m     *Memory
	ref   *RecordRef
	items []*item
	// replaced are held copies that spans of this batch, sent again, took the place of: their
	// records are done at Commit; Abort puts them back (the old copy is still acknowledged).
	replaced []*item
	// opened are the parents the batch's connector spans made open, and dropped the dropped spans
	// to journal.
	opened  []openedParent
	dropped []droppedSpan
	// abortable: the batch's journal append is still to come and may fail (Admit with a journal).
	// What Abort gives back is then kept aside: joined is the waiting content the batch's spans
	// took, reopened the open parents its connector spans closed.
	abortable bool
	joined    []joinedContent
	reopened  []reopenedParent
	// batch is the admitted batch (abortable only): Abort forgets the records of its kept spans.
	batch ptrace.Traces
	// pending: Admit's read hold of Memory.admitting is not released yet.
	pending bool
	// unrefd are the items of the shard being admitted not yet counted in ref (one add per shard).
	unrefd int
}

// settle releases the admission's hold on the memory's eviction (once).
func (a *Admission) settle() {
	if a.pending {
		a.pending = false
		a.m.admitting.RUnlock()
	}
}

// spanRef is one span of the batch being admitted.
type spanRef struct {
	span            ptrace.Span
	trace           *trace
	resource, scope int32
	// scopeAt numbers the span's ScopeSpans across the batch (origins.get).
	scopeAt  int32
	decision Decision
	kept     bool
	held     bool
	// fresh: the batch made the span known to its trace (no record before): only then may held
	// spans wait on it (a parent walk waits only at a span its trace does not know).
	fresh bool
	// scopeAwaits: spans of its scope may wait for content (Join.ScopeAwaitsContent, asked once per
	// scope).
	scopeAwaits bool
}

// origins creates the shared resource and scope copies of a batch once, on first use, and the
// held copies of its spans.
type origins struct {
	td      ptrace.Traces
	request *requestOrigin
	// By resource index and by spanRef.scopeAt (a batch has few of each), made on first use: a
	// batch of which nothing is held or delivered from the memory needs none.
	resources, scopes int32
	resource          []*resourceOrigin
	scope             []*scopeOrigin
	// held has the batch's held spans: one pdata state for all of them, not one per span.
	held ptrace.SpanSlice
}

func (o *origins) get(r *spanRef) *scopeOrigin {
	if o.scope == nil {
		o.resource, o.scope = make([]*resourceOrigin, o.resources), make([]*scopeOrigin, o.scopes)
	}
	if so := o.scope[r.scopeAt]; so != nil {
		return so
	}
	ro := o.resource[r.resource]
	if ro == nil {
		rs := o.td.ResourceSpans().At(int(r.resource))
		res := pcommon.NewResource()
		rs.Resource().CopyTo(res)
		ro = &resourceOrigin{request: o.request, resource: res, schemaURL: rs.SchemaUrl()}
		o.resource[r.resource] = ro
	}
	ss := o.td.ResourceSpans().At(int(r.resource)).ScopeSpans().At(int(r.scope))
	scope := pcommon.NewInstrumentationScope()
	ss.Scope().CopyTo(scope)
	so := &scopeOrigin{resource: ro, scope: scope, schemaURL: ss.SchemaUrl()}
	o.scope[r.scopeAt] = so
	return so
}

// newHeld is an empty span for a span of the batch to move into and be held.
func (o *origins) newHeld() ptrace.Span {
	if o.held == (ptrace.SpanSlice{}) {
		o.held = ptrace.NewSpanSlice()
	}
	return o.held.AppendEmpty()
}

// Admit records every span of td in its trace's memory and settles each kept span: it goes on
// unchanged, re-parented, or is moved out of td to be held. Dropped spans are removed from td. It
// returns ErrOverloaded, admitting nothing, when released spans refused by the next consumer fill
// the memory limit. decisions has one entry per span of td in order.
//
// The caller then either commits the admission (Commit, after the journal append) or aborts it.
// The memory's bounds are enforced only then: eviction releases held spans, and a span of this
// batch released before its journal append failed would be delivered, and delivered again when
// the client resends the refused batch.
func (m *Memory) Admit(info client.Info, td ptrace.Traces, decisions []Decision) (*Admission, error) {
	if m.readyBytes.Load() > m.cfg.MemoryLimitBytes {
		return nil, ErrOverloaded
	}
	m.admitting.RLock() // until Commit or Abort
	adm := &Admission{m: m, ref: &RecordRef{left: 1, journal: m.journal, logger: m.cfg.Logger}, pending: true}
	if m.cfg.Journaled {
		// Until Commit, its spans are not released by other calls, and Abort can undo what it took.
		adm.abortable = true
		adm.ref.state.Store(refPending)
		adm.ref.appendToCome = true
		adm.batch = td
	}
	m.admit(adm, newRequestOrigin(info), td, decisions, m.cfg.Now())
	if !adm.Stats.empty() {
		m.observe(&adm.Stats)
	}
	// Parents the batch's connector spans opened are journaled before the batch is acknowledged.
	// So are the dropped spans that later spans of their traces may walk through (dropped.go).
	err := m.journalOpened(context.Background(), adm.opened)
	if err == nil {
		err = m.journalDropped(context.Background(), adm.dropped)
	}
	adm.opened, adm.dropped = nil, nil
	if err != nil {
		adm.Abort()
		return nil, fmt.Errorf("svcspanfilter: %w", err)
	}
	return adm, nil
}

// admit is Admit with the held time and record given (recovery passes the original ones).
func (m *Memory) admit(adm *Admission, req *requestOrigin, td ptrace.Traces, decisions []Decision, heldAt time.Time) {
	adm.HeldAt = heldAt
	sc := m.scratch.Get().(*admitScratch)
	defer m.scratch.Put(sc)
	refs := sc.refs[:0]
	shardOf := sc.shardOf[:0]
	rss := td.ResourceSpans()
	scopes := int32(0)
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			awaits := m.joins && m.join.ScopeAwaitsContent(sss.At(j).Scope())
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				shardOf = append(shardOf, int32(m.shardOf(span.TraceID())))
				refs = append(refs, spanRef{span: span, resource: int32(i), scope: int32(j), scopeAt: scopes,
					decision: decisions[len(refs)], scopeAwaits: awaits})
			}
			scopes++
		}
	}
	// The spans' indexes grouped by shard (a counting sort), so each shard is locked once.
	counts := sc.counts(len(m.shards))
	for _, s := range shardOf {
		counts[s+1]++
	}
	for s := 1; s < len(counts); s++ {
		counts[s] += counts[s-1]
	}
	order := sc.order(len(refs))
	fill := sc.fill(counts)
	for i, s := range shardOf {
		order[fill[s]] = int32(i)
		fill[s]++
	}
	og := &origins{td: td, request: req, resources: int32(rss.Len()), scopes: scopes}
	var copies *heldCopy
	if m.cfg.Journaled {
		copies = newHeldCopy()
	}
	var out released
	for s := range m.shards {
		idx := order[counts[s]:counts[s+1]]
		if len(idx) == 0 {
			continue
		}
		sh := m.shards[s]
		sh.mu.Lock()
		sh.admit(m, adm, refs, idx, og, copies, heldAt, &out)
		// Counted once per shard, before another call can release (and finish) its items.
		adm.ref.add(adm.unrefd)
		adm.unrefd = 0
		sh.unlock(m)
	}
	out.finishRefs()
	adm.opened, adm.dropped = out.opened, out.dropped

	adm.Kept = make([]bool, len(refs))
	goesOn := 0
	for i := range refs {
		adm.Kept[i] = refs[i].kept
		if refs[i].kept && !refs[i].held {
			goesOn++
		}
	}
	if goesOn == 0 {
		// Nothing of the batch goes on (all dropped or held, as when children come first): no
		// pass span by span.
		td.ResourceSpans().RemoveIf(func(ptrace.ResourceSpans) bool { return true })
	} else {
		removeGone(td, refs)
	}
	adm.Pass = goesOn > 0
	if copies != nil && adm.Journaled > 0 {
		adm.HeldCopy = copies.td
	}
	adm.Deliveries = m.group(out.items)
	adm.Stats = out.stats
	clear(refs) // no reference to the batch stays in the pool
	sc.refs, sc.shardOf = refs[:0], shardOf[:0]
}

// removeGone removes from td the spans that do not go on in it (dropped or held; refs has td's
// spans in order), and the scopes and resources left empty.
func removeGone(td ptrace.Traces, refs []spanRef) {
	i := 0
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(ptrace.Span) bool {
				r := &refs[i]
				i++
				return r.held || !r.kept
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
}

// admitScratch is the per-call working memory of admit, pooled.
type admitScratch struct {
	refs           []spanRef
	shardOf, index []int32
	offsets, next  []int32
}

func (sc *admitScratch) counts(shards int) []int32 {
	sc.offsets = append(sc.offsets[:0], make([]int32, shards+1)...)
	return sc.offsets
}

func (sc *admitScratch) order(n int) []int32 {
	if cap(sc.index) < n {
		sc.index = make([]int32, n)
	}
	return sc.index[:n]
}

func (sc *admitScratch) fill(counts []int32) []int32 {
	sc.next = append(sc.next[:0], counts...)
	return sc.next
}

// admit runs under the shard lock for the spans of the batch (idx into refs) that belong to it.
func (sh *shard) admit(m *Memory, adm *Admission, refs []spanRef, idx []int32, og *origins, copies *heldCopy, now time.Time, out *released) {
	// First every span is recorded, so that a parent later in the batch is already known.
	var last *trace
	var calls *callTraces
	if m.cfg.Journaled {
		calls = &callTraces{}
	}
	for n, i := range idx {
		r := &refs[i]
		if id := r.span.TraceID(); last == nil || last.id != id {
			last = sh.touch(m, id, now)
			if last.records == nil {
				calls.first(last)
				// Sized for the spans of the trace that follow in the batch: no growth while they
				// are recorded.
				last.records = make(map[pcommon.SpanID]record, max(8, sameTraceRun(refs, idx[n:], id)))
			}
		}
		r.trace = last
		if r.decision.MarksExperiment {
			r.trace.experiment = true
		}
	}
	for _, i := range idx {
		r := &refs[i]
		v := r.decision.Verdict
		r.kept = v == Keep || (v == KeepIfExperiment && r.trace.experiment)
		st := stateDropped
		if r.kept {
			st = stateKept
		}
		added := r.trace.setRecord(r.span.SpanID(), r.span.ParentSpanID(), st)
		m.addBytes(r.trace, added)
		r.fresh = added != 0
	}
	for _, i := range idx {
		r := &refs[i]
		id := r.span.SpanID() // admitKept may move the span out of r.span
		if r.kept {
			old := r.trace.held[id]
			if old != nil && old.tenant() != og.request.tenant {
				// Another tenant's span with the ids of a span held for its own tenant (pass-through
				// gateways: a trace crossing teams, or copied ids). It is no resend of the held one:
				// it goes on as it came, in its own request, and the held span stays held.
				if r.fresh {
					// (Its record was gone: Abort's forgetKept.) Spans that came to wait on it meanwhile
					// are settled below it as they would be below the held one.
					sh.arrived(m, r.trace, id, out)
				}
				continue
			}
			sh.admitKept(m, adm, r, old, og, copies, now, out)
		} else {
			sh.admitDropped(m, adm, r, og, copies, out)
		}
		if r.fresh {
			sh.arrived(m, r.trace, id, out)
		}
	}
	if calls != nil {
		calls.pickDropped(refs, idx, out)
	}
	sh.sizeIfMany(m)
}

// sameTraceRun is how many spans at the start of idx belong to trace id.
func sameTraceRun(refs []spanRef, idx []int32, id pcommon.TraceID) int {
	n := 0
	for _, i := range idx {
		if refs[i].span.TraceID() != id {
			break
		}
		n++
	}
	return n
}

// admitKept settles kept span r; old is the held copy of the same span (sent again), if any.
func (sh *shard) admitKept(m *Memory, adm *Admission, r *spanRef, old *item, og *origins, copies *heldCopy, now time.Time, out *released) {
	t, span := r.trace, r.span
	id := span.SpanID()
	if old != nil {
		sh.unhold(m, t, old) // sent again: this copy takes its place once the batch is committed
		adm.replaced = append(adm.replaced, old)
	}
	if ref, ok := t.open[id]; ok {
		delete(t.open, id)
		m.addBytes(t, -openCost)
		out.closeOpen(ref)
	}
	// Content that waits for this span is joined at once when it is complete or the span expects
	// no more; a candidate with part of its content waits for the rest, gathering what came.
	awaits := r.scopeAwaits && m.join.AwaitsContent(span)
	gather, joined := false, false
	var contentRefs []*RecordRef
	cs, waiting := t.content[id]
	// again: a copy of a span whose content was joined before (sent again): it gets that content
	// at once, and waits for none.
	again := t.joined != nil && len(ownContent(t.joined[id], og.request.tenant, nil)) > 0
	if waiting || again {
		if again || !awaits || m.join.Complete(contentsOf(ownContent(cs, og.request.tenant, nil))) {
			if adm.abortable && waiting {
				adm.joined = append(adm.joined, joinedContent{trace: t, span: id, tenant: og.request.tenant, content: cs})
			}
			contentRefs = sh.joinWaitingContent(m, t, span, og.request.tenant, out)
			joined = true
			awaits = false
		} else {
			gather = true
		}
	}
	var reason HeldReason
	end, at := t.walk(id, span.ParentSpanID())
	switch end {
	case endRoot:
		if !span.ParentSpanID().IsEmpty() {
			setParent(span, pcommon.SpanID{})
			out.stats.Reparented[ReparentNoKeptAncestor]++
		}
	case endDelivered:
		if t.cutsCycle(id, at) {
			setParent(span, pcommon.SpanID{})
			out.stats.Reparented[ReparentCycle]++
		} else if at != span.ParentSpanID() {
			setParent(span, at)
			out.stats.Reparented[ReparentDroppedParent]++
		}
	case endUnknown:
		reason |= WaitParent
	}
	if awaits {
		reason |= WaitContent
	}
	if reason == 0 && !joined {
		return
	}
	origin := og.get(r)
	it := &item{span: og.newHeld(), origin: origin, trace: t, heldAt: now, reason: reason, ref: adm.ref, contentRefs: contentRefs}
	span.MoveTo(it.span)
	if reason == 0 || joined {
		// It goes on at once, or it is held carrying content joined just now, which left the
		// budget's content count: the span is sized exactly, so the budget keeps counting that
		// content (the join just wrote those values: no cold reads to save).
		it.bytes, it.sized = itemSize(it.span), true
	} else {
		it.bytes = sh.spanEstimate(it.span) // sized exactly only if still held later (lazysize.go)
	}
	r.held = true // out of the batch
	adm.unrefd++
	adm.Journaled++
	if copies != nil {
		cp := copies.add(origin, it.span)
		if reason&WaitParent != 0 && at != cp.ParentSpanID() {
			// The walk passed through spans known to be dropped; the journal does not keep those
			// records, so the copy waits where the walk ended: recovery resumes from there.
			setParent(cp, at)
		}
	}
	if reason == 0 {
		// It carries joined content: it goes on as a delivery of this batch, journaled with the
		// batch, so that its content's records are removed only once it was handed on.
		out.items = append(out.items, it)
		return
	}
	sh.hold(m, t, it)
	if gather {
		sh.takeWaitingContent(m, t, it, out)
	}
	if reason&WaitParent != 0 {
		t.addWaiting(it, at)
	}
	adm.items = append(adm.items, it)
	adm.Held++
}

func (sh *shard) admitDropped(m *Memory, adm *Admission, r *spanRef, og *origins, copies *heldCopy, out *released) {
	t, span := r.trace, r.span
	id := span.SpanID()
	if cs, ok := t.content[id]; ok {
		sh.dropContent(m, t, id, cs, UnmatchedSpanDropped, out) // content of a dropped span goes nowhere
	}
	ref, open := t.open[id]
	if !open {
		return
	}
	delete(t.open, id)
	m.addBytes(t, -openCost)
	if !m.cfg.ConnectorSpans {
		out.closeOpen(ref)
		return
	}
	if adm.abortable {
		adm.reopened = append(adm.reopened, reopenedParent{trace: t, span: id, ref: ref}) // closed at Commit
	} else {
		out.closeOpen(ref)
	}
	t.records[id] = record{parent: span.ParentSpanID(), state: stateConnector}
	conn := ptrace.NewSpan()
	conn.SetTraceID(span.TraceID())
	conn.SetSpanID(id)
	conn.SetName(span.Name())
	conn.SetKind(span.Kind())
	conn.SetStartTimestamp(span.StartTimestamp())
	conn.SetEndTimestamp(span.EndTimestamp())
	conn.Status().SetCode(span.Status().Code())
	conn.Attributes().PutBool(ConnectorAttribute, true)
	end, at := t.walk(id, span.ParentSpanID())
	switch {
	case end == endDelivered && !t.cutsCycle(id, at):
		conn.SetParentSpanID(at)
	case end == endUnknown:
		conn.SetParentSpanID(at)
		out.open(m, t, at)
	}
	// The connector is journaled with the batch until it is handed on: a refusal by the next
	// consumer followed by a crash does not lose it.
	origin := og.get(r)
	out.items = append(out.items, &item{span: conn, origin: origin, trace: t, ref: adm.ref, bytes: itemSize(conn), sized: true})
	adm.unrefd++
	adm.Journaled++
	if copies != nil {
		copies.add(origin, conn)
	}
	out.stats.Connectors++
}

// arrived settles the held spans whose parent walk stopped at id, now that id is known.
func (sh *shard) arrived(m *Memory, t *trace, id pcommon.SpanID, out *released) {
	// The items waiting on id leave the index together (one lookup, not three per item); each is
	// settled, or waits on the unknown span further up (never id, which is known now).
	for it := t.takeWaiting(id); it != nil; {
		next := it.waitNext
		it.waitNext = nil
		if next != nil {
			next.waitPrev = nil
		}
		end, at := t.walk(it.span.SpanID(), id)
		switch {
		case end == endRoot:
			sh.settleParent(m, t, it, pcommon.SpanID{}, ReparentNoKeptAncestor, ReleaseParentArrived, out)
		case end == endDelivered && t.cutsCycle(it.span.SpanID(), at):
			sh.settleParent(m, t, it, pcommon.SpanID{}, ReparentCycle, ReleaseParentArrived, out)
		case end == endDelivered:
			sh.settleParent(m, t, it, at, ReparentDroppedParent, ReleaseParentArrived, out)
		default:
			t.addWaiting(it, at)
		}
		it = next
	}
}

// Commit records the journal id of the batch's held spans (0 with no journal): the record is removed
// when the last of them is handed on.
// The memory's bounds are enforced after the commit (see Admit).
func (a *Admission) Commit(recordID uint64) {
	a.ref.commit(recordID)
	for _, old := range a.replaced {
		if old.aborted() {
			// Its batch was refused after this copy took its place: nothing of it was written, and
			// the content it had joined went back to wait (giveBack), for this copy to gather.
			continue
		}
		old.ref.Done(1)
		// Its content's records go once its own batch's record is written: were that append to
		// fail, the content would wait again for this copy (giveBack) and be finished at its
		// delivery.
		for _, r := range old.ref.contentDoneWhenWritten(old.contentRefs) {
			r.Done(1)
		}
	}
	a.replaced = nil
	a.commitAbortable()
	a.settle()
	a.m.Enforce()
}

// Abort undoes the holding of a batch whose journal append failed: its held spans are discarded
// (the client sends the batch again), and so are its own deliveries (connector spans, spans that
// joined waiting content: giveBack); spans of earlier calls it released are queued for the releaser.
func (a *Admission) Abort() {
	m := a.m
	var out released
	a.forgetKept()
	// Before its items are unheld: one released meanwhile stays held for this loop to discard, and
	// a later batch's Abort that sees one of them under its shard lock after this loop took that
	// lock does not hold it again (aborted).
	a.ref.state.Store(refAborting)
	now := m.cfg.Now()
	for _, it := range a.items {
		sh := m.shards[m.shardOf(it.trace.id)] // it.trace never changes (hold does not write it)
		sh.mu.Lock()
		if it.held && it.trace.held[it.span.SpanID()] == it {
			// The content it gathered goes back to wait for the resend, from now (unhold).
			for i := range it.content {
				m.waitForResend(&it.content[i], now)
			}
			sh.unhold(m, it.trace, it)
			sh.touch(m, it.trace.id, now) // the trace keeps that content as long (idle list)
		}
		sh.unlock(m)
	}
	// None of its spans is held any more; none is held again or delivered (a deferred one that a
	// copy replaced stays out when that copy's batch is refused too: the client sends it again).
	a.ref.state.Store(refAborted)
	if abortUnheldHook != nil {
		abortUnheldHook()
	}
	// The copies this batch replaced are still acknowledged and journaled: they are held again.
	for _, old := range a.replaced {
		if old.ref == a.ref {
			continue // sent twice in this very batch: nothing was written for it
		}
		t := old.trace
		sh := m.shards[m.shardOf(t.id)]
		sh.mu.Lock()
		switch id := old.span.SpanID(); {
		case old.aborted():
			// The copy of a batch refused meanwhile: nothing was written for it. Read under the
			// lock: that batch's Abort marks it before it takes this lock to unhold its items.
		case sh.traces[t.id] != t:
			// Its trace was evicted meanwhile (the new copy went on by rule 1): the old record stays
			// and is delivered again after a restart (at least once, never lost).
		case t.held[id] != nil && t.held[id].tenant() == old.tenant():
			out.done = append(out.done, old.ref) // a later batch's copy took its place
			out.done = append(out.done, old.ref.contentDoneWhenWritten(old.contentRefs)...)
		case t.held[id] != nil:
			// Another tenant's span with its ids came meanwhile and is held under them: the copy
			// cannot be held beside it, and it is acknowledged, so it goes on now.
			sh.goOnUnheld(m, t, old, &out)
		default:
			sh.hold(m, t, old)
			added := t.setRecord(id, old.span.ParentSpanID(), stateKept) // forgetKept took it
			m.addBytes(t, added)
			sh.takeWaitingContent(m, t, old, &out)
			if old.reason&WaitParent != 0 {
				t.addWaiting(old, old.waitOn)
				if _, known := t.records[old.waitOn]; known {
					sh.arrived(m, t, old.waitOn, &out) // its parent came meanwhile
				}
			}
			if added != 0 {
				// Spans that arrived while its record was gone may wait on it: it is known again.
				sh.arrived(m, t, id, &out)
			}
			if old.held && old.reason == 0 {
				// Settled while its own batch's append was still to come (deferRelease): that batch
				// may have committed meanwhile, without it.
				sh.release(m, t, old, old.deferredWhy, &out)
			}
		}
		sh.unlock(m)
	}
	a.replaced = nil
	a.ref.mu.Lock()
	a.ref.left = 0 // no record was written: nothing to remove
	// The content records owed to its commit stay: giveBack puts that content back to wait.
	a.ref.refused, a.ref.appendToCome, a.ref.owed = true, false, nil
	a.ref.mu.Unlock()
	m.queue(a.giveBack(&out))
	a.Deliveries = nil
	m.finish(&out)
	a.settle()
	m.Enforce() // after the batch's held spans are gone: none of them is released by eviction
}

// abortUnheldHook, when set (tests), runs in Abort after the batch's spans were unheld and before
// the copies they replaced are held again, with no lock held: other calls may run there.
var abortUnheldHook func()

// goOnUnheld hands on it, an acknowledged copy that cannot be held again (another tenant's span
// holds its ids), as when its wait ends: rule 1, its parent id is changed only through spans known
// to be dropped, and a parent still unknown becomes open.
func (sh *shard) goOnUnheld(m *Memory, t *trace, it *item, out *released) {
	id, parent := it.span.SpanID(), it.span.ParentSpanID()
	switch end, at := t.walk(id, parent); end {
	case endRoot:
		if !parent.IsEmpty() {
			setParent(it.span, pcommon.SpanID{})
			out.stats.Reparented[ReparentNoKeptAncestor]++
		}
	case endDelivered:
		if at != parent {
			setParent(it.span, at)
			out.stats.Reparented[ReparentDroppedParent]++
		}
	case endUnknown:
		out.open(m, t, at)
		if at != parent {
			setParent(it.span, at)
			out.stats.Reparented[ReparentOpenAncestor]++
		}
	}
	it.reason, it.waitOn = 0, pcommon.SpanID{}
	if it.ref.deferRelease() {
		// Its own batch's journal write is still to come: it goes on at that batch's commit
		// (releaseDeferred), and not at all if the write fails (the client sends it again).
		it.deferred, it.unheldGoesOn = true, true
		return
	}
	out.items = append(out.items, it)
}

// HandsOnFirst releases the admission's hold on eviction before a batch that holds nothing (Held
// is zero) hands its deliveries on, ahead of its journal write: eviction cannot reach spans that
// are not held, and it must not wait on the next consumer (which may retry for minutes) while
// every other admission waits behind it. Commit or Abort follow as usual.
func (a *Admission) HandsOnFirst() {
	if a.Held == 0 {
		a.settle()
	}
}

// HandedOn reports whether every span of the batch's own record (held, connectors, spans carrying
// joined content) has been handed on: nothing of it needs the journal any more.
func (a *Admission) HandedOn() bool {
	a.ref.mu.Lock()
	defer a.ref.mu.Unlock()
	return a.ref.left <= 1 // the guard that Commit releases
}

func (r *RecordRef) add(n int) {
	if n == 0 {
		return
	}
	r.mu.Lock()
	r.left += n
	r.mu.Unlock()
}
