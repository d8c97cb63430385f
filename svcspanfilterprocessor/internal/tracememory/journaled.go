package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// writeAhead is the plan (doc.go): it marks the spans of the call that the memory may hold or
// release as deliveries of the call (spanRef.mayHold: a kept span that may wait or replace a held
// copy, a dropped one that may go on as a connector) and writes their copies in one KindSpans record.
func (m *Memory) writeAhead(ref *RecordRef, sc *admitScratch, refs []spanRef, og *origins,
	heldAt time.Time) error {
	var local map[callKey]int32
	var copies ptrace.Traces // made on first use: a call of whole traces allocates none
	under := newCopier()
	m.planVerdicts(refs)
	for i := range refs {
		r := &refs[i]
		tid, id := r.span.TraceID(), r.span.SpanID()
		switch {
		case r.planned == Drop:
			r.mayHold = m.cfg.ConnectorSpans && m.known(tid, id, mayConnect)
		case r.scopeAwaits && m.join.AwaitsContent(r.span):
			r.mayHold = true
		case m.gate != nil && !m.known(tid, id, isSettled):
			r.mayHold = true // it waits behind its trace's gate
		default:
			if local == nil {
				local = sc.indexCall(refs)
			}
			r.mayHold = !resolvesInCall(refs, local, r) || m.known(tid, id, waitedForOrHeld)
		}
		if !r.mayHold {
			continue
		}
		if copies == (ptrace.Traces{}) {
			copies = ptrace.NewTraces()
		}
		cp := under.spans(copies, og.get(r)).AppendEmpty()
		r.span.CopyTo(cp)
		if r.planned == Drop {
			toConnector(cp)
		}
	}
	if copies == (ptrace.Traces{}) {
		return nil
	}
	payload, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(copies)
	if err == nil {
		md := journal.Metadata(og.request.info)
		ref.id, err = m.journal.Append(context.Background(), journal.KindSpans, heldAt, md, payload)
	}
	return err
}

// mayConnect: delivered spans point at it, or it went on as a connector; waitedForOrHeld: content
// waits for it, or this call releases a held copy of it (so it must carry it durably).
func mayConnect(t *trace, id pcommon.SpanID) bool {
	_, open := t.open[id]
	return open || t.records[id].state == stateConnector
}

func waitedForOrHeld(t *trace, id pcommon.SpanID) bool {
	_, waited := t.content[id]
	return waited || t.held[id] != nil
}

func (m *Memory) known(tid pcommon.TraceID, id pcommon.SpanID, what func(*trace, pcommon.SpanID) bool) bool {
	sh := m.shards[m.shardOf(tid)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.traces[tid]
	return t != nil && what(t, id)
}

// planVerdicts plans a span kept only in an experiment as kept when the call or the memory marks
// its trace as one, else dropped (not written ahead; marked before apply, it goes on by rule 1).
func (m *Memory) planVerdicts(refs []spanRef) {
	var marked map[pcommon.TraceID]bool // made on first use: most calls mark no experiment
	for i := range refs {
		if refs[i].decision.MarksExperiment {
			made(&marked)[refs[i].span.TraceID()] = true
		}
	}
	for i := range refs {
		if r := &refs[i]; r.planned == KeepIfExperiment {
			r.planned = Drop
			if marked[r.span.TraceID()] || m.known(r.span.TraceID(), r.span.SpanID(), isExperiment) {
				r.planned = Keep
			}
		}
	}
}

func isExperiment(t *trace, _ pcommon.SpanID) bool { return t.experiment }

type callKey struct {
	trace pcommon.TraceID
	span  pcommon.SpanID
}

// indexCall indexes the call's spans in a map kept from call to call (made per call, it was half the
// plan's CPU), unless one much larger call left it to clear at every later one.
func (sc *admitScratch) indexCall(refs []spanRef) map[callKey]int32 {
	if sc.local == nil || len(sc.local) > 2*len(refs)+1024 {
		sc.local = make(map[callKey]int32, len(refs))
	}
	clear(sc.local)
	for i := range refs {
		sc.local[callKey{refs[i].span.TraceID(), refs[i].span.SpanID()}] = int32(i)
	}
	return sc.local
}

// resolvesInCall: the walk of r through the call's dropped spans ends at a kept span of it or a root.
func resolvesInCall(refs []spanRef, local map[callKey]int32, r *spanRef) bool {
	tid, self := r.span.TraceID(), r.span.SpanID()
	p := r.span.ParentSpanID()
	for range len(refs) + 1 {
		if p.IsEmpty() || p == self {
			return true
		}
		j, ok := local[callKey{tid, p}]
		if !ok {
			return false
		}
		if refs[j].planned == Keep {
			return true
		}
		p = refs[j].span.ParentSpanID()
	}
	return true
}

// The sizes of an entry of KindDropped, KindOpenParents and KindOpen (journal.go).
const (
	droppedBytes = 16 + 8 + 8 + 1
	openBytes    = 16 + 8 + 8
	openBytesV1  = 16 + 8
	refCost      = 16 // what a journal record reference of a trace counts in the budget
)

// entries are those of one per-trace record to write (KindOpenParents, KindDropped, the gate's).
type entries struct {
	payload []byte
	traces  []*trace
}

func (e *entries) add(t *trace, fields ...[]byte) {
	e.payload = append(e.payload, t.id[:]...)
	for _, f := range fields {
		e.payload = append(e.payload, f...)
	}
	e.traces = append(e.traces, t)
}

// pickDropped adds to out the call's dropped spans in one shard (idx into refs, admitted).
func pickDropped(refs []spanRef, idx []int32, out *released) {
	n := 0
	for _, i := range idx {
		if !refs[i].kept {
			n++
		}
	}
	out.dropped.payload = slices.Grow(out.dropped.payload, droppedBytes*n) // grown once, not by doubling
	out.dropped.traces = slices.Grow(out.dropped.traces, n)
	for _, i := range idx {
		r := &refs[i]
		if id := r.span.SpanID(); !r.kept && !id.IsEmpty() {
			rec := r.trace.records[id]
			connector := []byte{0}
			if rec.state == stateConnector {
				connector[0] = 1
			}
			out.dropped.add(r.trace, id[:], rec.parent[:], connector)
		}
	}
}

// journalAfterApply writes the open parents, dropped spans and gate entries an operation made
// known (no shard lock held) before the spans pointing at them go on. A failure is logged: a call
// refused after apply would be sent again and what went on would reach the platform twice.
func (m *Memory) journalAfterApply(out *released) {
	err := errors.Join(m.journalEntries(journal.KindOpenParents, out.opened),
		m.journalEntries(journal.KindDropped, out.dropped))
	if m.gate != nil {
		err = errors.Join(err, m.journalEntries(m.gate.RecordKind(), out.gated))
	}
	if err != nil {
		m.cfg.Logger.Warn("Could not journal open parents, dropped spans or gate entries; after a restart a "+
			"span below one of them may not find its nearest kept ancestor, or a later span of a settled "+
			"trace be settled again", zap.Int("parents", len(out.opened.traces)),
			zap.Int("dropped", len(out.dropped.traces)), zap.Int("gated", len(out.gated.traces)), zap.Error(err))
	}
	out.opened, out.dropped, out.gated = entries{}, entries{}, entries{}
}

// journalEntries appends a record of kind and attaches it to the traces of its entries.
func (m *Memory) journalEntries(kind journal.Kind, e entries) error {
	if len(e.traces) == 0 {
		return nil
	}
	id, err := m.journal.Append(context.Background(), kind, m.cfg.Now(), nil, e.payload)
	if err != nil {
		return fmt.Errorf("record of kind %d: %w", kind, err)
	}
	ref := m.NewRecordRef(id, 1) // a guard until every trace holds it
	for _, t := range e.traces {
		sh := m.shards[m.shardOf(t.id)]
		sh.mu.Lock()
		if sh.traces[t.id] == t { // not forgotten while the record was written
			t.attach(m, ref)
		}
		sh.unlock(m)
	}
	ref.Done(1)
	return nil
}

// attach makes ref one of the records t keeps until it is forgotten (once per record).
func (t *trace) attach(m *Memory, ref *RecordRef) {
	r := t.keepRefs()
	if n := len(r.records); n > 0 && r.records[n-1] == ref {
		return
	}
	r.records = append(r.records, ref)
	ref.add(1)
	m.addBytes(t, refCost)
}

// Recover restores the records of its kinds in the order of doc.go ("recovery"), oldest first (held
// spans that resolve among themselves are queued at once); other kinds are left to their owners (a
// gate's per-trace entries before, RecoverEntries). What a record restores holds its reference
// beyond the guard: one that cannot be read is removed.
func (m *Memory) Recover(records []journal.Record, then ...func() error) error {
	fixed := func(n int) func([]byte) int { return func([]byte) int { return n } }
	var errs []error
	for _, pass := range []struct {
		kind    journal.Kind
		recover func(journal.Record, *RecordRef) error
	}{
		{journal.KindDropped, m.perTrace(fixed(droppedBytes), func(t *trace, e []byte) {
			st := stateDropped
			if e[16] == 1 {
				st = stateConnector
			}
			m.addBytes(t, t.setRecord(pcommon.SpanID(e[:8]), pcommon.SpanID(e[8:16]), st))
		})},
		{journal.KindOpen, m.perTrace(fixed(openBytesV1), func(t *trace, e []byte) {
			t.addOpen(m, pcommon.SpanID(e[:8]))
		})},
		{journal.KindOpenParents, m.perTrace(fixed(openBytes), func(t *trace, e []byte) {
			id, child := pcommon.SpanID(e[:8]), pcommon.SpanID(e[8:16]) // its child: a kept span below
			if _, known := t.records[child]; !known {
				m.addBytes(t, t.setRecord(child, id, stateKept))
			}
			t.addOpen(m, id)
		})},
		{journal.KindSpans, m.recoverSpans},
	} {
		for _, rec := range records {
			if rec.Kind != pass.kind {
				continue
			}
			guard := m.NewRecordRef(rec.ID, 1)
			if err := pass.recover(rec, guard); err != nil {
				errs = append(errs, fmt.Errorf("journal record %d: %w", rec.ID, err))
			}
			guard.Done(1)
		}
	}
	for _, f := range then { // (the gate's records that follow held spans) before the budget is enforced
		errs = append(errs, f())
	}
	for _, sh := range m.shards {
		sh.mu.Lock()
		sh.sizeHeld(m)
		sh.unlock(m)
	}
	m.Enforce()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tracememory: journal records could not be read: %w", err)
	}
	return nil
}

// perTrace recovers a record of entries (size: the length of the one p starts with), each a trace
// id, then what restore reads, all read before any is restored. Their traces keep the record, active
// since its time (a restart neither lengthens nor shortens late_parent_window).
func (m *Memory) perTrace(size func([]byte) int,
	restore func(*trace, []byte)) func(journal.Record, *RecordRef) error {
	return func(rec journal.Record, ref *RecordRef) error {
		for p := rec.Payload; len(p) > 0; p = p[size(p):] {
			if size(p) > len(p) {
				return fmt.Errorf("a truncated entry in its %d bytes", len(rec.Payload))
			}
		}
		if len(rec.Payload) == 0 {
			return errors.New("no entries")
		}
		for p := rec.Payload; len(p) > 0; p = p[size(p):] {
			sh := m.shards[m.shardOf(pcommon.TraceID(p[:16]))]
			sh.mu.Lock()
			t := sh.touch(m, pcommon.TraceID(p[:16]), rec.HeldAt)
			restore(t, p[16:size(p)])
			t.attach(m, ref)
			sh.unlock(m)
		}
		return nil
	}
}

func (m *Memory) recoverSpans(rec journal.Record, ref *RecordRef) error {
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(rec.Payload)
	if err != nil {
		return err
	}
	adm := &Admission{ref: ref}
	info := client.Info{Metadata: client.NewMetadata(rec.Metadata)}
	keep := slices.Repeat([]Decision{{Verdict: Keep}}, td.SpanCount())
	_ = m.admit(adm, newRequestOrigin(info), td, keep, rec.HeldAt, false) // no write ahead: no error
	if adm.Pass {
		n := td.SpanCount() // spans that resolve at once go on under the record too
		ref.add(n)
		d := &Delivery{Info: info, Traces: td, Spans: n, refs: map[*RecordRef]int{ref: n}}
		adm.Deliveries = append(adm.Deliveries, d)
	}
	queue(m, &m.ready, adm.Deliveries, m.wake)
	return nil
}
