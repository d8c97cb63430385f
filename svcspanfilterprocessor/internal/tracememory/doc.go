// Package tracememory is the span filter's per-trace memory: what it knows of each trace's spans, the
// kept spans it holds until their parent is settled, the parents delivered spans point at, and the
// budget that bounds all of it. It decides where a kept span hangs; the processor decides what is kept.
//
// # States
//
// A trace (trace.go) is in one of four states, by the shard list it is on:
//
//	idle       records of its spans (id, parent, kept/dropped/connector), no held span
//	waiting    records and at least one held span
//	late       compacted: only its dropped spans, open parents, the kept spans pointing at them
//	           and waiting content are kept
//	forgotten  not in memory (never seen, or forgotten)
//
// and carries in any state: open parents (ids delivered spans point at that it has not seen), content
// waiting for its span, content joined onto its spans (for copies sent again), and the journal
// records of its open parents and dropped spans. With a gate (gated.go, internal/gate: outcome
// sampling) its gate is also pending, open or shut, and it carries the gate's state of it.
//
// A kept span is, in turn:
//
//	passed     it goes on in its own request, its parent settled (unchanged, re-parented, or a root)
//	held       waiting for its parent (WaitParent: indexed under the unknown span its walk stopped at),
//	           for its content (WaitContent), behind its trace's pending gate (WaitGate), or several
//	ready      released (or a delivery of its own call: carrying content joined on arrival, or a
//	           connector), in a Delivery counted in ReadyBytes until the next component takes it
//	handed on  Delivered (or given up): its journal record is done when its last span is (a record
//	           of content joined onto it stays until its trace is forgotten, to join a resend again)
//
// With a journal every call runs: plan (read only: which spans may be held, or go on as deliveries
// of the call) -> write ahead (one KindSpans record of copies of those spans) -> apply (the events
// below, under the shard locks) -> write the open parents and dropped spans it made known -> answer.
// A failed write ahead refuses the call before anything changed; nothing is ever undone (a logs
// call writes what it holds before it applies any). A failed
// write after apply is logged (a resend would deliver twice what went on): only where late spans
// hang after a crash depends on it. A span the plan did not expect to hold goes on by rule 1.
//
// Why: the plan looks at the call (a span whose walk ends inside it can hold nothing) and asks the
// memory read-only questions, so calls of whole traces write nothing and the plan adds no state.
// Planning from a copy, or applying and undoing, would add states; what the plan cannot foresee
// ends in rule 1, always safe. Without a journal, no plan.
//
// # Events
//
//	event                     effect
//	span arrives, kept        recorded; walk up through dropped records: root / below the first
//	                          delivered span (cycle: root) / held on the first unknown span;
//	                          content waiting for it, or joined onto an earlier copy, joins it
//	span arrives, dropped     recorded; an open parent becomes a connector span; its waiting content
//	                          is discarded (span_dropped)
//	parent arrives            the spans held on it walk on: released, or held on the next unknown span
//	content arrives           a held span gathers it (released once complete); before its span it
//	                          waits content_join.wait; after its span went on it is discarded
//	wait ends                 wait_duration idle or max_wait_duration: held spans go on pointing at the
//	                          unknown span (open parent); content wait: the span goes with what came
//	budget exceeded           idle/late traces forgotten oldest first, then waiting traces released
//	                          (rule 1); waiting content is never evicted (the logs side pushes back)
//	next component refuses    retryable: requeued (in the budget, journaled); permanent: counted
//	                          undeliverable, its records done; a panic: requeued alone, retried
//	                          after a backoff, given up (counted undeliverable) after a few attempts
//	shutdown                  Drain releases every held span by rule 1 (on_shutdown keep: they stay journaled)
//	recovery                  content (its wait restarts), the gate's per-trace entries (its owner's,
//	                          RecoverEntries), dropped records, open parents with the spans pointing
//	                          at them, then held spans, all with their original time
//	kept span, gated          (a gate) the gate is told (Kept); it waits behind a pending gate if the
//	                          gate says so; of a trace whose gate is shut it is recorded dropped
//	parent settled, gated     the gate is told (Settled): on arrival, parent arrival, wait end, opening
//	gate opens / shuts        (the gate's call, in one of its events) opens: WaitGate ends, held spans
//	                          go on once they wait for nothing else; shuts: they and the content they
//	                          gathered are discarded. Its per-trace entries (Record) are journaled
//	                          before anything of the operation goes on; then the gate's Finished
//	gate forced               what waits behind gates over MaxGatedBytes (least recently active first),
//	                          eviction and shutdown: the gate must open or shut the trace (Force)
//	remember_duration idle    forgotten, or compacted to late with open parents or waiting content;
//	                          late_parent_window ends a late trace
//
// # Invariants (checkInvariants checks 1-6 and 9 and, through checkCounts, 7 at the end of every
// test scenario; the journal tests check 8; the randomised tests check 1-8 after every step,
// restarts included: everyStep)
//
//  1. A delivered kept span hangs, through connectors only, below its nearest kept ancestor; a root
//     only when every ancestor is known dropped (or in a cycle); else below a span that never
//     arrived (an open parent), never one that arrived and was dropped without a connector.
//  2. No delivered span is its own ancestor.
//  3. Only kept spans and connectors are delivered; a connector carries only its marker.
//  4. Nothing is delivered twice, except after a restart (at least once), with the same parent, and
//     a span sent again while its first copy is held, when the copy's plan ran before the first
//     was held: the held first copy stays (its call was acknowledged) and the copy goes on too.
//  5. After shutdown nothing is held and every kept span that arrived was delivered (with a gate:
//     of the traces whose gate is not shut).
//  6. A held span waits only on a span its trace does not know.
//  7. The memory's counters (bytes, held bytes, held spans, gated bytes, traces) are the sums over
//     its traces, held items and what the gate holds, and the items counted by an estimate are
//     exactly those on their shard's unsized list; a trace is on the waiting list if and only if it
//     holds something (or its gate holds something for it).
//  8. Journal (Config.Journaled): a span is held only if its call wrote it ahead; a call is
//     acknowledged only once the open parents and dropped spans it made known are written (or
//     their failed write logged); a record of held spans is removed when its last span is handed
//     on, of dropped spans or open parents when every trace in it is forgotten (the records an
//     operation finishes, in one write); a call of whole traces with no content waiting and no
//     copy held writes no held span.
//  9. Gate: a span of a trace whose gate is shut is never delivered; a span waits behind a gate only
//     while it is pending, and with a gate every held span of a pending trace waits behind it (its
//     parent wait ends only after the gate's: no connector of a trace that may be shut). The gate's
//     own invariants (internal/outcome) are checked with these.
package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
