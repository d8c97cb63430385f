package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// Recover restores the dropped spans (KindDropped), then the open parents (KindOpenParents, and
// KindOpen of v0.1.0), so that the spans recovered after them walk through the ones and point at
// the others, then re-admits the held spans of the KindSpans records, oldest first, with their
// original held time (their waits resume with the original deadlines) and their request's client
// metadata; spans that resolve among themselves are queued for the releaser at once. Records of other kinds are left to their owners.
// Kept spans that went on are not journaled.
func (m *Memory) Recover(records []journal.Record) error {
	var errs []error
	for _, pass := range []struct {
		kind    journal.Kind
		recover func(journal.Record) error
	}{
		{journal.KindDropped, m.recoverDropped},
		{journal.KindOpen, m.recoverOpenV1},
		{journal.KindOpenParents, m.recoverOpen},
		{journal.KindSpans, m.recoverSpans},
	} {
		for _, rec := range records {
			if rec.Kind == pass.kind {
				errs = append(errs, pass.recover(rec))
			}
		}
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

// recoverSpans re-admits the spans of one KindSpans record.
func (m *Memory) recoverSpans(rec journal.Record) error {
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(rec.Payload)
	if err != nil {
		m.NewRecordRef(rec.ID, 1).Done(1) // unreadable: nothing to deliver from it
		return fmt.Errorf("journal record %d: %w", rec.ID, err)
	}
	decisions := make([]Decision, td.SpanCount())
	for i := range decisions {
		decisions[i].Verdict = Keep
	}
	adm := &Admission{ref: m.NewRecordRef(rec.ID, 1)}
	info := client.Info{Metadata: client.NewMetadata(rec.Metadata)}
	_ = m.admit(adm, newRequestOrigin(info), td, decisions, rec.HeldAt, false) // nothing to write ahead
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
	return nil
}
