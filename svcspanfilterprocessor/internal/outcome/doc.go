// Package outcome is outcome sampling (docs/outcome-sampling.md): it keeps or drops whole traces on
// what they did (rules of pkg/sampling), as the gate (internal/gate) of the span filter's trace
// memory. The memory holds the kept spans of a trace until its gate opens or shuts; this package
// keeps the rest: each trace's observations and decision, its held score records, kept sessions,
// their journal records and recovery. Without an outcome section none of it exists.
//
// # States
//
// A trace's state (traceState, behind the memory's gate slot of the trace) is one of:
//
//	none       no kept span or score record of it arrived (or the memory forgot it)
//	undecided  its kept spans wait behind its gate (Pending), its score records are held here;
//	           what arrived is observed into its TraceOutcome
//	kept       decided kept: its gate is Open, its root carries ReasonAttribute, its later spans
//	           and score records go on
//	dropped    decided dropped: its gate is Shut, its later spans and score records are dropped
//
// A decision lives as long as the memory remembers its trace (remember_duration from the decision
// or a later span). A session a rule kept (decide_per: session) is kept for session_keep_duration.
//
// # Events
//
//	event                 effect
//	kept span (Kept)      undecided: observed; a matching rule, or a span not written ahead (its
//	                      trace forgotten since the plan), decides at once; else it waits.
//	                      kept, session mode: a session named only now is kept
//	score record          planned (HoldScores): of an undecided trace written ahead (KindScores);
//	                      applied: undecided, held and observed (a rule decides at once); kept, it
//	                      passes; dropped, it is removed; planned to pass but its trace forgotten
//	                      since the plan: its trace is decided at once
//	root settled          noted (Settled); of a kept trace it gets ReasonAttribute
//	tick                  decided when decision_wait passed since the first kept span or score
//	                      record, or its root arrived and it was idle settle_duration
//	forced                max_held_mib exceeded (oldest first), evicted, shutdown: decided on
//	                      what arrived (the rate applies; never dropped undecided)
//	decision              journaled (KindDecided, through the memory's per-trace records, written
//	                      before anything of the operation goes on; a kept session after it,
//	                      KindSession); kept: the gate opens, held score records are released to
//	                      the logs side; dropped: the gate shuts, held score records are removed
//	session expiry        a kept session past session_keep_duration, or beyond max_sessions
//	                      (least recently kept first), is forgotten and its record removed
//	recovery              RecoverDecisions (KindDecided, KindSession) before the memory's held
//	                      spans, which then follow their decision; RecoverScores after them, held
//	                      and observed again with their original time. Off now: Forget
//
// # Invariants (Check, run by the trace memory's randomised tests after every step)
//
//  1. A trace is decided if and only if its gate is not Pending.
//  2. Score records are held only by an undecided trace; the memory counts their bytes behind its gate.
//  3. A span or score record of a trace decided dropped never goes on, one of a trace decided kept
//     is never dropped; also after a restart while the trace is remembered (its decision is
//     journaled before anything of it goes on).
//  4. A held score record is in the KindScores record its call wrote ahead (the memory's journal
//     oracle counts the references of Refs and Check).
//  5. Kept sessions are one per session, in the order they were kept, at most max_sessions, in the budget.
package outcome // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"
