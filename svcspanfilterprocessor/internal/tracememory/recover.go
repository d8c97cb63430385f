package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// Recover re-admits the held spans of the journal's KindSpans records, oldest first, with their
// original held time (so their waits resume with the original deadlines) and their request's client
// metadata. Spans that resolve among themselves are queued for the releaser at once. Records of
// other kinds are left to their owners, except KindDropped and KindOpen: the dropped spans and then
// the open parents are restored first, with their original time, so recovered and later spans walk
// through the dropped ones and point at the open ones. Kept spans that went on are not journaled.
func (m *Memory) Recover(records []journal.Record) error {
	var errs []error
	// The dropped spans first, then the open parents: recovered spans walk through the ones and
	// point at the others.
	for _, kind := range []journal.Kind{journal.KindDropped, journal.KindOpen} {
		for _, rec := range records {
			if rec.Kind != kind {
				continue
			}
			recover := m.recoverOpen
			if kind == journal.KindDropped {
				recover = m.recoverDropped
			}
			if err := recover(rec); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, rec := range records {
		if rec.Kind == journal.KindSpans {
			errs = append(errs, m.recoverSpans(rec)...)
		}
	}
	for _, sh := range m.shards {
		sh.mu.Lock()
		sh.sizeHeld(m)
		sh.unlock(m)
	}
	m.Enforce()
	if len(errs) > 0 {
		return fmt.Errorf("tracememory: %d journal records could not be read: %v", len(errs), errs)
	}
	return nil
}

// recoverSpans re-admits the spans of one KindSpans record.
func (m *Memory) recoverSpans(rec journal.Record) []error {
	var errs []error
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(rec.Payload)
	if err != nil {
		m.NewRecordRef(rec.ID, 1).Done(1) // unreadable: nothing to deliver from it
		return []error{fmt.Errorf("journal record %d: %w", rec.ID, err)}
	}
	decisions := make([]Decision, td.SpanCount())
	for i := range decisions {
		decisions[i].Verdict = Keep
	}
	adm := &Admission{m: m, ref: m.NewRecordRef(rec.ID, 1)}
	info := client.Info{Metadata: client.NewMetadata(rec.Metadata)}
	_ = m.admit(adm, newRequestOrigin(info), td, decisions, rec.HeldAt, nil) // nothing to write ahead
	if err := m.journalOpened(context.Background(), adm.opened); err != nil {
		errs = append(errs, err) // only a later restart would not bridge them
	}
	adm.opened, adm.dropped = nil, nil // recovered spans are kept: none is dropped
	if adm.Pass {
		// Spans that resolve at once go on under the record too.
		n := td.SpanCount()
		adm.ref.add(n)
		d := &Delivery{Info: info, Traces: td, Spans: n, refs: map[*RecordRef]int{adm.ref: n}}
		adm.Deliveries = append(adm.Deliveries, d)
	}
	m.queue(adm.Deliveries)
	adm.ref.Done(1) // the guard: the record goes when its last span is handed on
	if !adm.Stats.empty() {
		m.observe(&adm.Stats)
	}
	return errs
}
