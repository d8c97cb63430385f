package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
)

// Verdict is the filter's decision for one span, before the trace's experiment flag is known.
type Verdict uint8

const (
	Drop Verdict = iota
	Keep
	KeepIfExperiment // kept by the rules but sampled out: kept only if its trace is an experiment
)

// Decision is the processor's input for one span of a batch.
type Decision struct {
	Verdict Verdict
	// MarksExperiment: the span marks its trace as an experiment, whose spans are never sampled out.
	MarksExperiment bool
}

// ConnectorAttribute marks a connector span: a dropped span delivered stripped, as spans point at it.
const ConnectorAttribute = "svc.gateway.connector"

// Admission is the outcome of Admit for one batch.
type Admission struct {
	Kept []bool // the final decision per span of the batch, in batch order
	Pass bool   // spans are left in the batch for the next consumer
	// Deliveries: spans this batch released, one per request; reported back with Delivered or Requeue.
	Deliveries []*Delivery

	ref    *RecordRef
	unrefd int      // items of the shard being admitted not yet counted in ref (one add per shard)
	out    released // what the call released, in the Admission: observe takes its Stats' address
}

// spanRef is one span of the batch being admitted.
type spanRef struct {
	span            ptrace.Span
	trace           *trace
	resource, scope int32
	scopeAt         int32 // the span's ScopeSpans, numbered across the batch (origins.get)
	decision        Decision
	planned         Verdict // what writeAhead plans with (planVerdicts); without a plan, the decision's
	kept, held      bool
	fresh           bool // the batch made the span known to its trace (held spans may wait on it)
	scopeAwaits     bool // spans of its scope may wait for content (asked once per scope)
	mayHold         bool // written ahead, so the memory may hold it
	connector       bool // it goes on in the batch as a connector span
	awaitsGate      bool // held behind its trace's gate
}

// origins makes a batch's shared resource and scope copies on first use, and its spans' held copies.
type origins struct {
	td                ptrace.Traces
	request           *requestOrigin
	resources, scopes int32
	resource          []*resourceOrigin // by resource index
	scope             []*scopeOrigin    // by spanRef.scopeAt
	held              ptrace.SpanSlice  // the batch's held spans
}

func (o *origins) get(r *spanRef) *scopeOrigin {
	if o.scope == nil {
		o.resource, o.scope = make([]*resourceOrigin, o.resources), make([]*scopeOrigin, o.scopes)
	}
	if so := o.scope[r.scopeAt]; so != nil {
		return so
	}
	rs := o.td.ResourceSpans().At(int(r.resource))
	if o.resource[r.resource] == nil {
		res := pcommon.NewResource()
		rs.Resource().CopyTo(res)
		o.resource[r.resource] = &resourceOrigin{request: o.request, resource: res, schemaURL: rs.SchemaUrl()}
	}
	ss := rs.ScopeSpans().At(int(r.scope))
	scope := pcommon.NewInstrumentationScope()
	ss.Scope().CopyTo(scope)
	o.scope[r.scopeAt] = &scopeOrigin{resource: o.resource[r.resource], scope: scope, schemaURL: ss.SchemaUrl()}
	return o.scope[r.scopeAt]
}

// Admit records every span of td (decisions: one per span, in order) and settles each (doc.go):
// what does not go on in td is removed from it. It returns ErrOverloaded, admitting nothing, when
// refused released spans fill the memory limit; a failed write ahead changes nothing.
func (m *Memory) Admit(info client.Info, td ptrace.Traces, decisions []Decision) (*Admission, error) {
	if m.readyBytes.Load() > m.cfg.MemoryLimitBytes {
		return nil, ErrOverloaded
	}
	adm := &Admission{ref: m.NewRecordRef(0, 1)} // its id is set by the write ahead, if any
	if err := m.admit(adm, newRequestOrigin(info), td, decisions, m.cfg.Now(), m.cfg.Journaled); err != nil {
		return nil, fmt.Errorf("svcspanfilter: recording held spans: %w", err)
	}
	adm.ref.Done(1) // the guard: the record goes when its last held span is handed on
	m.Enforce()
	return adm, nil
}

// afterPlan, when set (tests), runs between a call's write ahead and its apply.
var afterPlan func()

// admit is Admit with the held time given (recovery passes the original one) and the write ahead.
func (m *Memory) admit(adm *Admission, req *requestOrigin, td ptrace.Traces, decisions []Decision,
	heldAt time.Time, ahead bool) error {
	sc := m.scratch.Get().(*admitScratch)
	defer m.scratch.Put(sc)
	refs, shardOf := sc.refs[:0], sc.shardOf[:0]
	rss := td.ResourceSpans()
	scopes := int32(0)
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			awaits := m.join != nil && m.join.ScopeAwaitsContent(sss.At(j).Scope()) // nil: join off
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				shardOf = append(shardOf, int32(m.shardOf(span.TraceID())))
				d := decisions[len(refs)]
				refs = append(refs, spanRef{span: span, resource: int32(i), scope: int32(j), scopeAt: scopes,
					decision: d, planned: d.Verdict, scopeAwaits: awaits, mayHold: !ahead})
			}
			scopes++
		}
	}
	og := &origins{td: td, request: req, resources: int32(rss.Len()), scopes: scopes}
	defer func() {
		clear(refs) // no reference to the batch stays in the pool
		sc.refs, sc.shardOf = refs[:0], shardOf[:0]
	}()
	if ahead {
		if err := m.writeAhead(adm.ref, sc, refs, og, heldAt); err != nil {
			return err
		}
		if afterPlan != nil {
			afterPlan()
		}
	}
	m.applyByShard(adm, sc, refs, shardOf, og, heldAt)
	adm.Kept = make([]bool, len(refs))
	for i := range refs {
		adm.Kept[i] = refs[i].kept
	}
	adm.Pass = trimBatch(td, refs)
	adm.Deliveries = m.settle(&adm.out)
	return nil
}

// applyByShard admits the spans shard by shard, each locked once, in a counting sort of their
// indexes by shard: shard s has order[start[s]:start[s+1]].
func (m *Memory) applyByShard(adm *Admission, sc *admitScratch, refs []spanRef, shardOf []int32, og *origins, now time.Time) {
	start := append(sc.start[:0], make([]int32, len(m.shards)+1)...)
	for _, s := range shardOf {
		start[s]++
	}
	for s := 1; s < len(start); s++ {
		start[s] += start[s-1]
	}
	order := append(sc.order[:0], make([]int32, len(refs))...)
	for i := len(shardOf) - 1; i >= 0; i-- { // from the back: each shard's part stays in batch order
		start[shardOf[i]]--
		order[start[shardOf[i]]] = int32(i)
	}
	sc.start, sc.order = start, order
	for s, sh := range m.shards {
		if start[s] == start[s+1] {
			continue
		}
		sh.mu.Lock()
		sh.admit(m, adm, refs, order[start[s]:start[s+1]], og, now, &adm.out)
		adm.ref.add(adm.unrefd) // once per shard, before another call can release (and finish) its items
		adm.unrefd = 0
		sh.unlock(m)
	}
}

func (r spanRef) goesOn() bool { return (r.kept || r.connector) && !r.held }

// trimBatch removes from td the spans that do not go on in it (refs: td's spans in order) and what
// they leave empty; false when nothing goes on.
func trimBatch(td ptrace.Traces, refs []spanRef) bool {
	if !slices.ContainsFunc(refs, spanRef.goesOn) { // as when children come first: no pass span by span
		td.ResourceSpans().RemoveIf(func(ptrace.ResourceSpans) bool { return true })
		return false
	}
	i := 0
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(ptrace.Span) bool {
				i++
				return !refs[i-1].goesOn()
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	return true
}

type admitScratch struct {
	refs                  []spanRef
	shardOf, start, order []int32
	local                 map[callKey]int32 // indexCall
}

// admit runs under the shard lock for the spans of the batch (idx into refs) that belong to it.
func (sh *shard) admit(m *Memory, adm *Admission, refs []spanRef, idx []int32, og *origins, now time.Time, out *released) {
	sh.recordSpans(m, refs, idx, now)
	for _, i := range idx {
		r := &refs[i]
		id := r.span.SpanID() // admitKept may move the span out of r.span
		if r.kept {
			r.mayHold = r.mayHold && r.planned != Drop // kept in an experiment marked since the plan: rule 1
			old := r.trace.held[id]
			if old != nil && old.tenant() != og.request.tenant {
				// Another tenant's span with a held one's ids, no resend: it goes on, the held one stays.
				continue
			}
			if m.gate != nil {
				rs := og.td.ResourceSpans().At(int(r.resource))
				r.awaitsGate = m.gate.Kept(m.gatedOf(sh, r.trace, out), r.span, rs.Resource(),
					rs.ScopeSpans().At(int(r.scope)).Scope(), r.mayHold, now) && r.trace.gate == gate.Pending
				if r.trace.gate == gate.Shut { // shut on its arrival (not written ahead): dropped with it
					r.kept = false
					r.trace.records[id] = record{parent: r.span.ParentSpanID(), state: stateDropped}
				}
			}
			if r.kept {
				sh.admitKept(m, adm, r, old, og, now, out)
			}
		}
		if !r.kept {
			sh.admitDropped(m, adm, r, og, out)
		}
		if r.fresh {
			sh.arrived(m, r.trace, id, out)
		}
	}
	if m.cfg.Journaled {
		pickDropped(refs, idx, out)
	}
	if len(sh.unsized) > unsizedCap {
		sh.sizeHeld(m)
	}
}

// recordSpans records the shard's spans of the batch, with their final decision (spanRef.kept; all
// dropped in a trace whose gate is shut), before any is settled: a parent later in the batch is known.
func (sh *shard) recordSpans(m *Memory, refs []spanRef, idx []int32, now time.Time) {
	var last *trace
	for n, i := range idx {
		r := &refs[i]
		if id := r.span.TraceID(); last == nil || last.id != id {
			last = sh.touch(m, id, now)
			if last.records == nil { // sized for the trace's spans that follow: no growth
				run := 1
				for n+run < len(idx) && refs[idx[n+run]].span.TraceID() == id {
					run++
				}
				last.records = make(map[pcommon.SpanID]record, max(8, run))
			}
		}
		r.trace = last
		last.experiment = last.experiment || r.decision.MarksExperiment
	}
	for _, i := range idx {
		r := &refs[i]
		v := r.decision.Verdict
		r.kept = (v == Keep || v == KeepIfExperiment && r.trace.experiment) && r.trace.gate != gate.Shut
		st := stateDropped
		if r.kept {
			st = stateKept
		}
		added := r.trace.setRecord(r.span.SpanID(), r.span.ParentSpanID(), st)
		m.addBytes(r.trace, added)
		r.fresh = added != 0
	}
}

// admitKept settles kept span r; old is the held copy of the same span (sent again), if any (held
// since the plan when r was not written ahead: r goes on at once too, rule 1, twice at worst).
func (sh *shard) admitKept(m *Memory, adm *Admission, r *spanRef, old *item, og *origins, now time.Time, out *released) {
	t, span, id, tenant := r.trace, r.span, r.span.SpanID(), og.request.tenant
	var refs []*RecordRef        // of the content it carries, done when it is handed on
	if old != nil && r.mayHold { // this copy, written ahead, takes its place and carries its records
		sh.unhold(m, t, old)
		refs = append(old.contentRefs, old.ref)
	}
	t.closeOpen(m, id)
	joinedRefs, joined, awaits := sh.contentOnArrival(m, r, tenant, out)
	refs = append(refs, joinedRefs...)
	reason, at := sh.waitsFor(m, r, og, awaits, out)
	if !r.mayHold || reason == 0 && !joined && old == nil {
		// It goes on in td, by rule 1 if it was not written ahead (its trace changed since the
		// plan); its records stay until its trace is forgotten (a resend joins again).
		if reason&WaitParent != 0 {
			out.open(m, t, at, id)
			out.reparent(span, at, ReparentOpenAncestor)
		}
		if len(refs) > 0 {
			t.keepRefs().joinedRecs = append(t.keepRefs().joinedRecs, refs...)
		}
		return
	}
	if og.held == (ptrace.SpanSlice{}) { // one pdata state for all the batch's held spans
		og.held = ptrace.NewSpanSlice()
	}
	it := &item{span: og.held.AppendEmpty(), origin: og.get(r), trace: t, heldAt: now, reason: reason, ref: adm.ref, contentRefs: refs}
	span.MoveTo(it.span)
	r.held = true // out of the batch
	adm.unrefd++
	if reason == 0 || joined { // the joined content left the content count: the exact size counts it
		it.bytes, it.sized = itemSize(it.span), true
	} else {
		it.bytes = sh.spanEstimate(it.span) // sized exactly only if still held later (lazysize.go)
	}
	if reason == 0 { // it carries joined content or replaces a held copy: a delivery of this call
		out.items = append(out.items, it)
		return
	}
	sh.hold(m, t, it)
	if cs, gather := t.content[id]; gather { // what came waits in it for the rest (it is its only holder)
		it.content = ownContent(cs, tenant, out)
		sh.removeContent(m, t, id, cs)
		m.addBytes(t, sumOf(it.content, waitingContent.bytes))
	}
	if reason&WaitParent != 0 {
		t.addWaiting(it, at)
	}
}

// contentOnArrival joins the content waiting for kept span r at once when it is complete or no
// more is expected (or joined onto a copy sent before), and returns its records; a candidate with
// part of its content awaits the rest, what came left waiting for it to gather.
func (sh *shard) contentOnArrival(m *Memory, r *spanRef, tenant string, out *released,
) (refs []*RecordRef, joined, awaits bool) {
	t, span, id := r.trace, r.span, r.span.SpanID()
	awaits = r.scopeAwaits && m.join.AwaitsContent(span)
	cs, waiting := t.content[id]
	var prior []waitingContent // joined onto an earlier copy
	if t.refs != nil {
		prior = ownContent(t.refs.joined[id], tenant, nil)
	}
	if !waiting && len(prior) == 0 {
		return nil, false, awaits
	}
	if len(prior) == 0 && awaits && !m.join.Complete(contentsOf(ownContent(cs, tenant, nil))) {
		return nil, false, true
	}
	own := ownContent(cs, tenant, out)
	sh.removeContent(m, t, id, cs)
	if all := append(slices.Clone(prior), own...); len(all) > 0 {
		m.apply(t, span, all, own, out)
	}
	return refsOf(own), true, false
}

// waitsFor is what kept span r waits for, and the unknown span its parent walk stopped at; a span
// whose parent is settled is re-parented (and the gate told).
func (sh *shard) waitsFor(m *Memory, r *spanRef, og *origins, awaits bool, out *released) (HeldReason, pcommon.SpanID) {
	t, span := r.trace, r.span
	var reason HeldReason
	at, why, wait := t.parentOf(span.SpanID(), span.ParentSpanID())
	if wait {
		reason |= WaitParent
	} else {
		out.reparent(span, at, why)
		if m.gate != nil {
			rs := og.td.ResourceSpans().At(int(r.resource))
			m.gate.Settled(m.gatedOf(sh, t, out), span, rs.Resource(), rs.ScopeSpans().At(int(r.scope)).Scope())
		}
	}
	if awaits {
		reason |= WaitContent
	}
	if r.awaitsGate {
		reason |= WaitGate
	}
	return reason, at
}

// admitDropped settles dropped span r: an open parent, or a connector before, goes on as a connector.
func (sh *shard) admitDropped(m *Memory, adm *Admission, r *spanRef, og *origins, out *released) {
	t, span, id := r.trace, r.span, r.span.SpanID()
	if cs, ok := t.content[id]; ok {
		sh.dropContent(m, t, id, cs, UnmatchedSpanDropped, out)
	}
	open := t.closeOpen(m, id)
	again := !r.fresh && t.records[id].state == stateConnector
	if !m.cfg.ConnectorSpans || !(open || again) {
		return
	}
	t.records[id] = record{parent: span.ParentSpanID(), state: stateConnector}
	at, _, wait := t.parentOf(id, span.ParentSpanID())
	span.SetParentSpanID(at)
	if wait {
		out.open(m, t, at, id)
	}
	out.stats.Connectors++
	if !r.mayHold { // not written ahead (it became an open parent since): it goes on in td
		toConnector(span)
		r.connector = true
		return
	}
	conn := ptrace.NewSpan() // written ahead: a delivery of this call
	span.CopyTo(conn)
	toConnector(conn)
	out.items = append(out.items, &item{span: conn, origin: og.get(r), trace: t, ref: adm.ref, bytes: itemSize(conn), sized: true})
	adm.unrefd++
}

// toConnector strips span to its ids, name, kind, times, status code and the connector attribute.
func toConnector(span ptrace.Span) {
	span.TraceState().FromRaw("")
	span.Attributes().Clear()
	span.Attributes().PutBool(ConnectorAttribute, true)
	span.Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
	span.Links().RemoveIf(func(ptrace.SpanLink) bool { return true })
	span.SetDroppedAttributesCount(0)
	span.SetDroppedEventsCount(0)
	span.SetDroppedLinksCount(0)
	span.SetFlags(0)
	span.Status().SetMessage("")
}

// arrived settles the held spans whose parent walk stopped at id, now that id is known.
func (sh *shard) arrived(m *Memory, t *trace, id pcommon.SpanID, out *released) {
	for it, next := t.takeWaiting(id), (*item)(nil); it != nil; it = next {
		next, it.waitPrev, it.waitNext = it.waitNext, nil, nil
		if at, why, wait := t.parentOf(it.span.SpanID(), id); wait {
			t.addWaiting(it, at)
		} else {
			sh.settleParent(m, t, it, at, why, ReleaseParentArrived, out)
		}
	}
}
