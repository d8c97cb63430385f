package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"container/list"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/jsontext"
	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/pkg/svcattr"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// Outcome sampling (docs/outcome-sampling.md; doc.go has its states and events).

// ReasonAttribute is the root span attribute of a kept trace that names why it was kept: a per-key
// trace metadata attribute, shown in the trace's metadata (docs/outcome-sampling.md).
const ReasonAttribute = "svc.trace.metadata.sampling_reason"

const decisionCost = 96 // what a trace's decision state counts in the budget

// traceDecision is a trace's outcome state; only outcome mode allocates it (behind trace.refs).
type traceDecision struct {
	state   sampling.TraceOutcome
	firstAt time.Time // its first kept span: DecisionWait runs from it
	root    bool      // its root span arrived
	decided bool
	keep    bool
	reason  string
}

// Decided is one trace decision, in Stats.
type Decided struct {
	Trace  pcommon.TraceID
	Keep   bool
	Reason string
	Wait   time.Duration // from the trace's first kept span
}

func (t *trace) decisionOf() *traceDecision {
	if t.refs == nil {
		return nil
	}
	return t.refs.decision
}

// dropped reports whether t was decided dropped.
func (t *trace) dropped() bool {
	d := t.decisionOf()
	return d != nil && d.decided && !d.keep
}

func isDecided(t *trace, _ pcommon.SpanID) bool {
	d := t.decisionOf()
	return d != nil && d.decided
}

// decisionState is t's decision state, made on first use (counted in the budget).
func (m *Memory) decisionState(t *trace) *traceDecision {
	r := t.keepRefs()
	if r.decision == nil {
		r.decision = &traceDecision{}
		m.addBytes(t, decisionCost)
	}
	return r.decision
}

// observeKept observes kept span r into its undecided trace, before it is settled, and reports
// whether it waits for the decision: a matching rule, or a span not written ahead (its trace was
// forgotten since the plan), decides the trace at once. In session mode, a trace a rule kept before
// any of its spans named its session (a failing call ends, and is exported, before the agent span
// that carries the session) keeps the session once a later span names it.
func (sh *shard) observeKept(m *Memory, r *spanRef, og *origins, now time.Time, out *released) (waits bool) {
	t, o := r.trace, m.cfg.Outcome
	d := m.decisionState(t)
	rs := og.td.ResourceSpans().At(int(r.resource))
	resource, scope := rs.Resource(), rs.ScopeSpans().At(int(r.scope)).Scope()
	if d.decided {
		_, known := d.state.Session()
		rule, matched := o.Matched(&d.state)
		if known || !matched || !d.keep || o.Config().DecidePer != sampling.DecidePerSession {
			return false
		}
		o.ObserveSpan(&d.state, r.span, resource, scope)
		if k, ok := d.state.Session(); ok {
			o.KeepSession(k, rule, now)
			if m.cfg.Journaled {
				out.sessions = append(out.sessions, keptSession{key: k, reason: rule, at: now})
			}
		}
		return false
	}
	o.ObserveSpan(&d.state, r.span, resource, scope)
	if d.firstAt.IsZero() || now.Before(d.firstAt) {
		d.firstAt = now
	}
	if _, matched := o.Matched(&d.state); matched || !r.mayHold {
		sh.decide(m, t, now, out)
		return false
	}
	return true
}

// markRoot notes that kept span (settled, not waiting for a parent) is its trace's root; the root of
// a kept trace gets the reason as the platform reads its metadata: JSON text on a span of the new
// svc SDKs (it decodes their values), else the string.
func markRoot(t *trace, span ptrace.Span, resource pcommon.Resource, scope pcommon.InstrumentationScope) {
	d := t.decisionOf()
	if d == nil || !span.ParentSpanID().IsEmpty() {
		return
	}
	d.root = true
	if reason := d.reason; d.decided && d.keep {
		if svcattr.IsNewSDKEncoding(resource, scope) {
			reason = string(jsontext.AppendString(nil, reason))
		}
		span.Attributes().PutStr(ReasonAttribute, reason)
	}
}

// decide decides t on what it observed (every path: doc.go, "decision") and applies it: kept, its
// held spans stop waiting for it (and go on unless they wait for more) and its held scores go on;
// dropped, both are discarded.
func (sh *shard) decide(m *Memory, t *trace, now time.Time, out *released) {
	d := m.decisionState(t)
	if d.decided {
		return
	}
	o := m.cfg.Outcome
	d.keep, d.reason = o.Decide(&d.state, t.id, t.experiment, now)
	d.decided = true
	if now.After(t.lastActivity) { // the decision lives remember_duration from now
		t.lastActivity = now
	}
	if m.cfg.Journaled { // after a restart its later spans, alone, could be decided otherwise: torn
		reason := d.reason[:min(len(d.reason), 255)]
		if !d.keep {
			reason = "" // KindDecided: dropped
		}
		out.decided.add(t, []byte{byte(len(reason))}, []byte(reason))
		k, ok := d.state.Session()
		if _, rule := o.Matched(&d.state); ok && rule && o.Config().DecidePer == sampling.DecidePerSession {
			out.sessions = append(out.sessions, keptSession{key: k, reason: reason, at: now})
		}
	}
	out.stats.Decided = append(out.stats.Decided, Decided{Trace: t.id, Keep: d.keep, Reason: d.reason, Wait: now.Sub(d.firstAt)})
	for _, hs := range t.refs.scores { // its held score records go on or are dropped with it
		m.addBytes(t, -hs.bytes)
		sh.pending.decisionBytes -= hs.bytes
		if d.keep {
			out.scores = append(out.scores, hs)
		} else {
			out.done = append(out.done, hs.ref)
			out.stats.ScoresDropped++
		}
	}
	t.refs.scores = nil
	for _, it := range t.held { // only it leaves t.held
		if it.reason&WaitDecision == 0 {
			continue
		}
		if !d.keep { // discarded, the content it gathered (waiting again once unheld) unmatched
			sh.unhold(m, t, it)
			if id := it.span.SpanID(); t.content[id] != nil {
				sh.dropContent(m, t, id, t.content[id], UnmatchedSpanDropped, out)
			}
			it.reason = 0
			out.done = append(append(out.done, it.ref), it.contentRefs...)
			out.stats.Discarded++
			continue
		}
		sh.decisionWaitOver(it)
		if it.reason&WaitParent == 0 {
			markRoot(t, it.span, it.origin.resource.resource, it.origin.scope)
		}
		if it.reason == 0 {
			sh.release(m, t, it, ReleaseDecided, out)
		}
	}
	sh.place(t)
}

// decisionWaitOver ends it's wait for the decision (under the shard lock).
func (sh *shard) decisionWaitOver(it *item) {
	if it.reason&WaitDecision != 0 {
		sh.pending.decisionBytes -= it.bytes
	}
	it.reason &^= WaitDecision
}

// expireDecision decides t when its decision wait is over, or its root arrived and it settled.
func (sh *shard) expireDecision(m *Memory, t *trace, now time.Time, out *released) {
	d := t.decisionOf()
	if d == nil || d.decided || d.firstAt.IsZero() {
		return
	}
	cfg := m.cfg.Outcome.Config()
	if now.Sub(d.firstAt) >= cfg.DecisionWait || (d.root && now.Sub(t.lastActivity) >= cfg.SettleDuration) {
		sh.decide(m, t, now, out)
	}
}

// enforceDecisions decides the oldest undecided traces while the spans waiting for a decision
// exceed MaxHeldBytes.
func (m *Memory) enforceDecisions() {
	if m.cfg.Outcome == nil || m.cfg.MaxHeldBytes <= 0 {
		return
	}
	var out released
	undecided := fronts{pick: func(sh *shard) *trace { // the least recently active undecided trace
		for t := sh.waiting.head; t != nil; t = t.next {
			if d := t.decisionOf(); d != nil && !d.decided {
				return t
			}
		}
		return nil
	}}
	decide := func(sh *shard, t *trace) {
		sh.decide(m, t, m.cfg.Now(), &out)
		out.stats.DecidedEarly++
	}
	for m.decisionBytes.Load() > m.cfg.MaxHeldBytes && undecided.takeOldest(m, decide) {
	}
	m.finish(&out)
}

// SetOutcome turns outcome sampling on, before the first span (the processor's Start).
func (m *Memory) SetOutcome(o *sampling.Outcome, maxHeldBytes int64) {
	m.cfg.Outcome, m.cfg.MaxHeldBytes = o, maxHeldBytes
}

// keptSession is a session a rule kept, journaled (KindSession) until session_keep_duration ends.
type keptSession struct {
	key    sampling.SessionKey
	reason string
	at     time.Time
	ref    *RecordRef
}

const sessionCost = 128 // what a kept session counts in the budget, beside its reason

// keptSessions are the journaled kept sessions: one each (its latest keep and record), at most
// max_sessions (the least recently kept forgotten first, as Outcome forgets them), in the budget,
// ordered by keep time: expiry takes them from the front.
type keptSessions struct {
	mu    sync.Mutex
	order list.List // of *keptSession, least recently kept first
	byKey map[sampling.SessionKey]*list.Element
}

// keepSession makes s its session's kept session; the records it replaces or forgets are done.
func (m *Memory) keepSession(s *keptSession) {
	k := &m.sessions
	var done []*RecordRef
	k.mu.Lock()
	if e := k.byKey[s.key]; e != nil && s.at.Before(e.Value.(*keptSession).at) {
		done = append(done, s.ref) // kept again since (a concurrent call, or an older record recovered)
	} else {
		if e != nil {
			done = append(done, m.forgetSession(e))
		}
		e = k.order.Back()
		for e != nil && e.Value.(*keptSession).at.After(s.at) {
			e = e.Prev()
		}
		if e == nil {
			e = k.order.PushFront(s)
		} else {
			e = k.order.InsertAfter(s, e)
		}
		made(&k.byKey)[s.key] = e
		m.bytes.Add(sessionCost + int64(len(s.reason)))
		for k.order.Len() > m.cfg.Outcome.Config().MaxSessions {
			done = append(done, m.forgetSession(k.order.Front()))
		}
	}
	k.mu.Unlock()
	for _, ref := range done { // the journal's lock is not taken under the sessions' lock
		ref.Done(1)
	}
}

// forgetSession removes a kept session (under the sessions' lock) and returns its record.
func (m *Memory) forgetSession(e *list.Element) *RecordRef {
	s := m.sessions.order.Remove(e).(*keptSession)
	delete(m.sessions.byKey, s.key)
	m.bytes.Add(-sessionCost - int64(len(s.reason)))
	return s.ref
}

// expireSessions forgets the kept sessions whose session_keep_duration is over, oldest first.
func (m *Memory) expireSessions(now time.Time) {
	if m.cfg.Outcome == nil {
		return
	}
	keep := m.cfg.Outcome.Config().SessionKeepDuration
	var over []*RecordRef
	m.sessions.mu.Lock()
	for e := m.sessions.order.Front(); e != nil && now.Sub(e.Value.(*keptSession).at) >= keep; {
		over = append(over, m.forgetSession(e))
		e = m.sessions.order.Front()
	}
	m.sessions.mu.Unlock()
	for _, ref := range over {
		ref.Done(1)
	}
}

// recoverSession keeps a KindSession record's session again from the time it was kept.
func (m *Memory) recoverSession(rec journal.Record, ref *RecordRef) error {
	if len(rec.Payload) < 8 {
		return errors.New("a truncated kept session")
	}
	ref.add(1)
	key := sampling.SessionKey(binary.BigEndian.Uint64(rec.Payload))
	s := &keptSession{key: key, reason: string(rec.Payload[8:]), at: rec.HeldAt, ref: ref}
	m.cfg.Outcome.KeepSession(s.key, s.reason, s.at)
	m.keepSession(s)
	return nil
}
