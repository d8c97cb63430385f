package outcome // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// The journal kinds of outcome sampling (the trace memory's are 1 to 5).
const (
	// KindDecided: decided traces, so that their later spans follow after a restart: per trace, its
	// id, the length of the reason (1 byte), the reason (kept), or 0 (dropped). HeldAt: its time.
	// A trace memory record (gate.Trace.Record): removed once every trace in it is forgotten.
	KindDecided journal.Kind = 6
	// KindSession: a session a rule kept (decide_per: session): its key (8 bytes, big endian), the
	// reason; HeldAt: when it was kept (session_keep_duration runs from it).
	KindSession journal.Kind = 7
	KindScores  journal.Kind = 8 // plog proto of one logs call's score records held for their trace's decision
)

// LazyKinds are the kinds whose late delete only restores what is forgotten or over (journal.Open).
var LazyKinds = []journal.Kind{KindDecided, KindSession}

// RecoverDecisions restores kept sessions (oldest first, as they were kept) and decided traces;
// before the trace memory recovers its held spans, which then follow their trace's decision.
// Decisions newest first: a trace forgotten and decided again while its older record lived on
// follows its newest decision.
func (s *Sampler) RecoverDecisions(records []journal.Record) error {
	var errs []error
	for _, rec := range records {
		if rec.Kind == KindSession {
			if err := s.recoverSession(rec); err != nil {
				errs = append(errs, fmt.Errorf("journal record %d: %w", rec.ID, err))
			}
		}
	}
	restore := func(tr gate.Trace, e []byte) {
		if st := s.state(tr); !st.decided {
			st.decided, st.keep, st.reason = true, len(e) > 1, cmp.Or(string(e[1:]), sampling.ReasonDropped)
			if st.keep {
				tr.Open()
			} else {
				tr.Shut()
			}
		}
	}
	for _, rec := range slices.Backward(records) {
		if rec.Kind != KindDecided {
			continue
		}
		if err := s.Memory.RecoverEntries(rec, decidedBytes, restore); err != nil {
			errs = append(errs, fmt.Errorf("journal record %d: %w", rec.ID, err))
		}
	}
	return errors.Join(errs...)
}

// RecoverScores holds again the score records of the journal, after the held spans and before the
// memory enforces its budget (Memory.Recover runs it).
func (s *Sampler) RecoverScores(records []journal.Record) error {
	var errs []error
	for _, rec := range records {
		if rec.Kind == KindScores {
			if err := s.recoverScores(rec); err != nil {
				errs = append(errs, fmt.Errorf("journal record %d: %w", rec.ID, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Forget removes the records of outcome sampling when it is off now: nothing is decided by trace.
func Forget(j journal.Journal, records []journal.Record) error {
	var ids []uint64
	for _, rec := range records {
		if rec.Kind >= KindDecided && rec.Kind <= KindScores {
			ids = append(ids, rec.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if err := j.Remove(context.Background(), ids...); err != nil {
		return fmt.Errorf("removing the journal records of outcome sampling, off now: %w", err)
	}
	return nil
}

// decidedBytes is the length of the KindDecided entry p starts with: trace id, reason length, reason.
func decidedBytes(p []byte) int {
	if len(p) < 17 {
		return 17
	}
	return 17 + int(p[16])
}
