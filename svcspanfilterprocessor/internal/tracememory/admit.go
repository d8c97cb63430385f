package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
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
	// Deliveries are spans of earlier calls that this batch released (their parent arrived in
	// it), one per request client context; the caller delivers them and reports back with
	// Delivered, Requeue or Discard.
	Deliveries []*Delivery
	Stats      Stats

	m   *Memory
	ref *RecordRef
	// unrefd are the items of the shard being admitted not yet counted in ref (one add per shard).
	unrefd int
	// opened are the parents the batch's connector spans made open, and dropped the dropped spans
	// to journal.
	opened  []openedParent
	dropped []droppedSpan
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
	// mayHold: written ahead, so the memory may hold it (writeAhead); connector: it goes on as a
	// connector span in its place.
	mayHold, connector bool
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

// Admit records every span of td in its trace's memory and settles each kept span: it goes on in
// td unchanged or re-parented, or it is moved out of td to be held; a dropped span goes on as a
// connector span when delivered spans point at it, and is removed from td otherwise. decisions
// has one entry per span of td in order. It returns ErrOverloaded, admitting nothing, when
// released spans refused by the next consumer fill the memory limit.
//
// Write ahead, then apply: with a journal, the spans the call may hold are written (writeAhead)
// before the call changes anything another call can see; a failed write returns the error with
// nothing changed. The open parents and dropped spans the call made known are written after, still
// before the call is acknowledged. A failure there cannot refuse the call: its spans went on or are
// held already, and the client's resend would deliver them twice. The call is acknowledged and the
// failure logged; only the placement of late spans after a crash depends on those records.
func (m *Memory) Admit(info client.Info, td ptrace.Traces, decisions []Decision) (*Admission, error) {
	if m.readyBytes.Load() > m.cfg.MemoryLimitBytes {
		return nil, ErrOverloaded
	}
	adm := &Admission{m: m, ref: &RecordRef{left: 1, journal: m.journal, logger: m.cfg.Logger}}
	now := m.cfg.Now()
	var ahead func([]spanRef, *origins) error
	if m.cfg.Journaled {
		ahead = func(refs []spanRef, og *origins) error { return m.writeAhead(adm.ref, info, refs, og, now) }
	}
	if err := m.admit(adm, newRequestOrigin(info), td, decisions, now, ahead); err != nil {
		return nil, fmt.Errorf("svcspanfilter: recording held spans: %w", err)
	}
	if err := errors.Join(m.journalOpened(context.Background(), adm.opened),
		m.journalDropped(context.Background(), adm.dropped)); err != nil && m.cfg.Logger != nil {
		m.cfg.Logger.Warn("Could not journal the open parents and dropped spans of a call; a kept span arriving after a restart below one of them may not find its nearest kept ancestor",
			zap.Int("parents", len(adm.opened)), zap.Int("dropped", len(adm.dropped)), zap.Error(err))
	}
	adm.opened, adm.dropped = nil, nil
	adm.ref.Done(1) // the guard: the record goes when its last held span is handed on
	if !adm.Stats.empty() {
		m.observe(&adm.Stats)
	}
	m.Enforce()
	return adm, nil
}

// admit is Admit with the held time given (recovery passes the original one); ahead, when not
// nil, runs before anything changes and its error admits nothing.
func (m *Memory) admit(adm *Admission, req *requestOrigin, td ptrace.Traces, decisions []Decision, heldAt time.Time, ahead func([]spanRef, *origins) error) error {
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
					decision: decisions[len(refs)], scopeAwaits: awaits, mayHold: ahead == nil})
			}
			scopes++
		}
	}
	og := &origins{td: td, request: req, resources: int32(rss.Len()), scopes: scopes}
	defer func() {
		clear(refs) // no reference to the batch stays in the pool
		sc.refs, sc.shardOf = refs[:0], shardOf[:0]
	}()
	if ahead != nil {
		if err := ahead(refs, og); err != nil {
			return err
		}
	}
	var out released
	m.applyByShard(adm, sc, refs, shardOf, og, heldAt, &out)
	adm.Kept = make([]bool, len(refs))
	goesOn := 0
	for i := range refs {
		adm.Kept[i] = refs[i].kept
		if (refs[i].kept || refs[i].connector) && !refs[i].held {
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
	adm.Deliveries = m.group(out.items)
	adm.Stats = out.stats
	return nil
}

// applyByShard admits the spans shard by shard (each shard locked once), in a counting sort of
// their indexes by shard.
func (m *Memory) applyByShard(adm *Admission, sc *admitScratch, refs []spanRef, shardOf []int32, og *origins, now time.Time, out *released) {
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
	for s := range m.shards {
		idx := order[counts[s]:counts[s+1]]
		if len(idx) == 0 {
			continue
		}
		sh := m.shards[s]
		sh.mu.Lock()
		sh.admit(m, adm, refs, idx, og, now, out)
		// Counted once per shard, before another call can release (and finish) its items.
		adm.ref.add(adm.unrefd)
		adm.unrefd = 0
		sh.unlock(m)
	}
	out.finishRefs()
	adm.opened, adm.dropped = out.opened, out.dropped
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
				return r.held || !(r.kept || r.connector)
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
func (sh *shard) admit(m *Memory, adm *Admission, refs []spanRef, idx []int32, og *origins, now time.Time, out *released) {
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
				continue
			}
			sh.admitKept(m, adm, r, old, og, now, out)
		} else {
			sh.admitDropped(m, adm, r, og, out)
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
func (sh *shard) admitKept(m *Memory, adm *Admission, r *spanRef, old *item, og *origins, now time.Time, out *released) {
	t, span := r.trace, r.span
	id := span.SpanID()
	var contentRefs []*RecordRef
	if old != nil {
		// Sent again: this copy, written ahead, takes its place. The content joined onto the old
		// copy is joined onto this one (trace.joined); its records go with this one.
		sh.unhold(m, t, old)
		out.done = append(out.done, old.ref)
		contentRefs = old.contentRefs
	}
	if ref, ok := t.open[id]; ok {
		delete(t.open, id)
		m.addBytes(t, -openCost)
		out.closeOpen(ref)
	}
	reason, at, joined, gather := sh.settleKept(m, r, og.request.tenant, out)
	if joined != nil {
		contentRefs = append(contentRefs, joined...)
	}
	if reason != 0 && !r.mayHold {
		// Not written ahead (its trace changed between the plan and now): it goes on at once, as
		// when its wait ends (rule 1: pointing at the unknown span, which becomes open).
		if reason&WaitParent != 0 {
			sh.goOnAt(m, t, span, at, out)
		}
		reason = 0
	}
	if reason == 0 && (joined == nil || !r.mayHold) {
		// It goes on in td. Content joined onto it when its write ahead did not expect that
		// (the content came since) stays journaled until its trace is forgotten: a resend after a
		// refusal of td joins that content again.
		if len(contentRefs) > 0 {
			t.keepRefs().joinedRecs = append(t.keepRefs().joinedRecs, contentRefs...)
		}
		return
	}
	it := &item{span: og.newHeld(), origin: og.get(r), trace: t, heldAt: now, reason: reason, ref: adm.ref, contentRefs: contentRefs}
	span.MoveTo(it.span)
	r.held = true // out of the batch
	adm.unrefd++
	if reason == 0 {
		// It carries joined content: it goes on as a delivery of this call, journaled with it,
		// so that the content's records are removed only once it was handed on.
		it.bytes, it.sized = itemSize(it.span), true
		out.items = append(out.items, it)
		return
	}
	sh.holdNew(m, it, joined != nil, gather, at, out)
	adm.Held++
}

// holdNew holds it, a span of the call that waits; sized: it carries content joined just now.
func (sh *shard) holdNew(m *Memory, it *item, sized, gather bool, at pcommon.SpanID, out *released) {
	if sized {
		// The joined content left the budget's content count: sized exactly, so that the budget
		// keeps counting that content.
		it.bytes, it.sized = itemSize(it.span), true
	} else {
		it.bytes = sh.spanEstimate(it.span) // sized exactly only if still held later (lazysize.go)
	}
	sh.hold(m, it.trace, it)
	if gather {
		sh.takeWaitingContent(m, it.trace, it, out)
	}
	if it.reason&WaitParent != 0 {
		it.trace.addWaiting(it, at)
	}
}

// settleKept joins the content waiting for kept span r (or joined onto an earlier copy of it) and
// walks up from its parent: it returns what the span waits for, the unknown span the walk stopped
// at, the records of the content joined (not nil when content was joined), and whether it gathers
// content while it waits for more.
func (sh *shard) settleKept(m *Memory, r *spanRef, tenant string, out *released) (HeldReason, pcommon.SpanID, []*RecordRef, bool) {
	t, span := r.trace, r.span
	id := span.SpanID()
	// Content that waits for this span is joined at once when it is complete or the span expects
	// no more; a candidate with part of its content waits for the rest, gathering what came. A
	// copy of a span whose content was joined before (sent again) gets that content at once.
	awaits := r.scopeAwaits && m.join.AwaitsContent(span)
	_, waiting := t.content[id]
	again := len(ownContent(t.joinedOf(id), tenant, nil)) > 0
	var joined []*RecordRef
	gather := false
	if waiting || again {
		if again || !awaits || m.join.Complete(contentsOf(ownContent(t.content[id], tenant, nil))) {
			joined = sh.joinWaitingContent(m, t, span, tenant, out)
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
	return reason, at, joined, gather
}

// goOnAt sends span on pointing at at, the unknown span its walk stopped at, which becomes open.
func (sh *shard) goOnAt(m *Memory, t *trace, span ptrace.Span, at pcommon.SpanID, out *released) {
	out.open(m, t, at)
	if at != span.ParentSpanID() {
		setParent(span, at)
		out.stats.Reparented[ReparentOpenAncestor]++
	}
}

// admitDropped settles dropped span r: its waiting content is discarded, and when delivered
// spans point at it (an open parent), or it went on as a connector before (sent again), it goes
// on as a connector span.
func (sh *shard) admitDropped(m *Memory, adm *Admission, r *spanRef, og *origins, out *released) {
	t, span := r.trace, r.span
	id := span.SpanID()
	if cs, ok := t.content[id]; ok {
		sh.dropContent(m, t, id, cs, UnmatchedSpanDropped, out) // content of a dropped span goes nowhere
	}
	ref, open := t.open[id]
	if open {
		delete(t.open, id)
		m.addBytes(t, -openCost)
		out.closeOpen(ref)
	}
	again := !r.fresh && t.records[id].state == stateConnector
	if !m.cfg.ConnectorSpans || !(open || again) {
		return
	}
	t.records[id] = record{parent: span.ParentSpanID(), state: stateConnector}
	end, at := t.walk(id, span.ParentSpanID())
	switch {
	case end == endDelivered && !t.cutsCycle(id, at):
		span.SetParentSpanID(at)
	case end == endUnknown:
		span.SetParentSpanID(at)
		out.open(m, t, at)
	default:
		span.SetParentSpanID(pcommon.SpanID{})
	}
	out.stats.Connectors++
	if !r.mayHold {
		// Not written ahead (it became an open parent since): it goes on in td, in its place.
		toConnector(span)
		r.connector = true
		return
	}
	// Written ahead: it goes on as a delivery of this call, journaled with it until handed on.
	conn := ptrace.NewSpan()
	span.CopyTo(conn)
	toConnector(conn)
	out.items = append(out.items, &item{span: conn, origin: og.get(r), trace: t, ref: adm.ref, bytes: itemSize(conn), sized: true})
	adm.unrefd++
}

// toConnector strips span to a connector: its ids, name, kind, times and status code, and the
// single connector attribute.
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

func (r *RecordRef) add(n int) {
	if n == 0 {
		return
	}
	r.mu.Lock()
	r.left += n
	r.mu.Unlock()
}
