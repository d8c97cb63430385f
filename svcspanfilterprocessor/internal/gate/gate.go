// Package gate is the small interface between the trace memory and a component that decides on
// whole traces (internal/outcome): the memory holds a trace's kept spans behind a gate until the
// gate opens (they go on) or shuts (they are discarded). The memory knows nothing of why; the
// component knows nothing of parents, held items or the journal's per-call records.
package gate // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// Status of a trace's gate.
type Status uint8

const (
	Pending Status = iota // its kept spans wait
	Open                  // they go on, as without a gate
	Shut                  // they are dropped
)

// ForceReason is why the memory needs a pending trace opened or shut at once.
type ForceReason uint8

const (
	ForceBudget   ForceReason = iota // what waits behind gates exceeds its bound (oldest trace first)
	ForceEvicted                     // the memory evicts the trace
	ForceShutdown                    // the collector stops
)

// Gate is called by the trace memory under the lock of the trace it names, for traces it has seen.
type Gate interface {
	// Kept: a kept span of tr arrived, before it is settled; held: it was written ahead, so the
	// memory may hold it. wait: it waits behind tr's gate. The gate may Open or Shut tr.
	Kept(tr Trace, span ptrace.Span, resource pcommon.Resource, scope pcommon.InstrumentationScope, held bool,
		now time.Time) (wait bool)
	// Settled: a kept span's parent is settled (a root has none): on arrival, when its parent
	// arrives or its wait ends, or when the gate opens while the span is held.
	Settled(tr Trace, span ptrace.Span, resource pcommon.Resource, scope pcommon.InstrumentationScope)
	// Tick: tr is pending and holds something; at every expiry round.
	Tick(tr Trace, now time.Time)
	// Force: tr, pending, must be opened or shut now.
	Force(tr Trace, now time.Time, why ForceReason)
	// Finished gets what the gate passed to Trace.After in one operation, once the records the
	// operation made (Trace.Record) are written and before what it released goes on; no lock held.
	Finished(after []any)
	// Expire runs at every expiry round, after the traces.
	Expire(now time.Time)
	// RecordKind is the journal kind of the entries of Trace.Record.
	RecordKind() journal.Kind
}

// Trace is the memory's handle on one trace, valid only inside the Gate call (or Memory.Gated) it
// is passed to.
type Trace interface {
	ID() pcommon.TraceID
	Experiment() bool // a span marked it an experiment
	Status() Status
	// State is the gate's own per-trace state (nil at first); SetState counts bytes more with it.
	State() any
	SetState(state any, bytes int64)
	// LastActivity is when a span (or Touch) last came; the trace is remembered from it.
	LastActivity() time.Time
	Touch(now time.Time)
	// Open releases what waits behind the gate (unless it waits for more); Shut discards it and
	// drops the trace's later kept spans. Either is final.
	Open()
	Shut()
	// Hold counts bytes (negative: fewer) of what the gate holds itself for the trace: in the
	// budget, behind the gate, and the trace stays in memory while any is held.
	Hold(bytes int64)
	// Record journals an entry (after the trace id) of kind RecordKind, kept until the trace is
	// forgotten; nothing without a journal.
	Record(fields ...[]byte)
	// After hands x to Finished at the end of the operation; Done there finishes ref.
	After(x any)
	Done(ref Ref)
}

// Ref counts the items of a journal record still to hand on; the last Done removes the record.
type Ref interface {
	Hold(n int)
	Done(n int)
}

// Memory is what the gate asks of the trace memory outside its calls.
type Memory interface {
	// Pending: the trace's gate is pending (also when the memory does not know it): read only.
	Pending(id pcommon.TraceID) bool
	// Gated runs f on the traces of ids, each made if unknown and, while pending, active at now,
	// under its lock, as one operation (Finished and the releases follow once all are done).
	Gated(ids []pcommon.TraceID, now time.Time, f func(i int, tr Trace))
	// SizeOf is what attrs count in the budget.
	SizeOf(attrs pcommon.Map) int64
	// Room: ErrContentOverloaded unless size bytes fit in the budget after what can be evicted.
	Room(size int64) error
	// Enforce brings the memory back within its bounds.
	Enforce()
	// ForcePending forces the pending traces that hold something and which selects (shutdown).
	ForcePending(which func(Trace) bool)
	// NewRef is the reference of journal record id (0: none yet) with items still to hand on.
	NewRef(id uint64, items int) Ref
	// Ready counts bytes (negative: fewer) released by the gate and not yet handed on; Count, bytes
	// the gate keeps outside any trace. Both in the budget.
	Ready(bytes int64)
	Count(bytes int64)
	// RecoverEntries restores per-trace entries of rec (size: the length of the one p starts with),
	// each kept by its trace until it is forgotten.
	RecoverEntries(rec journal.Record, size func(p []byte) int, restore func(tr Trace, entry []byte)) error
}
