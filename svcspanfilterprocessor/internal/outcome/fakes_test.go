package outcome

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/pkg/svcattr"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// The fakes of the trace memory's side of internal/gate: the Sampler runs behind them alone. They
// keep the contract of gate.go as the trace memory (internal/tracememory/gated.go) keeps it: the
// Trace handle is valid inside one operation; the operation ends by writing the Record entries
// (one journal record of RecordKind, each entry the trace id and its fields, kept by its traces
// until they are forgotten), then finishing the Done refs, then handing what went to After to
// Finished.

// fakeJournal is a journal.Journal in memory that fails the test on a record removed twice.
type fakeJournal struct {
	t         *testing.T
	next      uint64
	live      map[uint64]journal.Record
	removes   [][]uint64   // every Remove call
	appendErr error        // Append fails with it (of failKind only, when set)
	failKind  journal.Kind // 0: every kind
	removeErr error
}

func newFakeJournal(t *testing.T) *fakeJournal {
	return &fakeJournal{t: t, live: map[uint64]journal.Record{}}
}

func (j *fakeJournal) Append(_ context.Context, kind journal.Kind, heldAt time.Time, md map[string][]string,
	payload []byte) (uint64, error) {
	if j.appendErr != nil && (j.failKind == 0 || j.failKind == kind) {
		return 0, j.appendErr
	}
	j.next++
	j.live[j.next] = journal.Record{ID: j.next, Kind: kind, HeldAt: heldAt, Metadata: md, Payload: bytes.Clone(payload)}
	return j.next, nil
}

func (j *fakeJournal) Remove(_ context.Context, ids ...uint64) error {
	j.removes = append(j.removes, slices.Clone(ids))
	if j.removeErr != nil {
		return j.removeErr
	}
	for _, id := range ids {
		if _, ok := j.live[id]; !ok {
			j.t.Errorf("journal record %d removed, but it is not there (removed twice?)", id)
		}
		delete(j.live, id)
	}
	return nil
}

// records are the live records, oldest first, as recovery reads them.
func (j *fakeJournal) records() []journal.Record {
	var out []journal.Record
	for _, rec := range j.live {
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b journal.Record) int { return int(a.ID) - int(b.ID) })
	return out
}

func (j *fakeJournal) ofKind(kind journal.Kind) []journal.Record {
	return slices.DeleteFunc(j.records(), func(r journal.Record) bool { return r.Kind != kind })
}

// fakeRef is a gate.Ref: the last Done removes its record; below zero fails the test.
type fakeRef struct {
	m    *fakeMemory
	id   uint64
	left int
}

func (r *fakeRef) Hold(n int) { r.left += n }

func (r *fakeRef) Done(n int) {
	r.left -= n
	if r.left < 0 {
		r.m.t.Errorf("journal record %d: done %d times more than held", r.id, -r.left)
	}
	if r.left == 0 && r.id != 0 {
		_ = r.m.j.Remove(context.Background(), r.id)
	}
}

// operation is what the gate did in one operation of the memory.
type operation struct {
	now     time.Time
	after   []any
	done    []gate.Ref
	payload []byte       // the Record entries: trace id, fields
	traces  []*fakeTrace // of the entries
}

// fakeMemory is a gate.Memory of fakeTraces.
type fakeMemory struct {
	t       *testing.T
	j       *fakeJournal // nil: the Record entries are not written (no storage)
	gate    *Sampler
	traces  map[pcommon.TraceID]*fakeTrace
	out     *operation // the operation under way
	roomErr error
	asked   []int64 // sizes Room was asked for
	enforce int     // Enforce calls
	ready   int64   // Ready bytes
	own     int64   // Count bytes
	sent    []sentSpan
}

// sentSpan is a kept span that went on (at once or when its gate opened).
type sentSpan struct {
	trace pcommon.TraceID
	span  ptrace.Span
	res   pcommon.Resource
	scope pcommon.InstrumentationScope
}

func newFakeMemory(t *testing.T, j *fakeJournal) *fakeMemory {
	return &fakeMemory{t: t, j: j, traces: map[pcommon.TraceID]*fakeTrace{}}
}

// op runs f as one operation of the memory and ends it as the memory does.
func (m *fakeMemory) op(now time.Time, f func()) {
	m.t.Helper()
	require.Nil(m.t, m.out, "operations do not nest")
	out := &operation{now: now}
	m.out = out
	f()
	m.out = nil
	if len(out.traces) > 0 && m.j != nil {
		id, err := m.j.Append(context.Background(), m.gate.RecordKind(), now, nil, out.payload)
		require.NoError(m.t, err)
		ref := m.NewRef(id, 1).(*fakeRef) // the guard until every trace keeps it
		for _, tr := range out.traces {
			if m.traces[tr.id] == tr && !slices.Contains(tr.records, ref) { // not forgotten since
				tr.records = append(tr.records, ref)
				ref.Hold(1)
			}
		}
		ref.Done(1)
	}
	for _, r := range out.done {
		r.Done(1)
	}
	if len(out.after) > 0 {
		m.gate.Finished(out.after)
	}
}

// touch is the trace of id, made if unknown, active at now.
func (m *fakeMemory) touch(id pcommon.TraceID, now time.Time) *fakeTrace {
	tr := m.traces[id]
	if tr == nil {
		tr = &fakeTrace{m: m, id: id, last: now}
		m.traces[id] = tr
	} else {
		tr.Touch(now)
	}
	return tr
}

// forget forgets the trace: the records it keeps are done.
func (m *fakeMemory) forget(id pcommon.TraceID) {
	tr := m.traces[id]
	delete(m.traces, id)
	for _, r := range tr.records {
		r.Done(1)
	}
}

func (m *fakeMemory) Pending(id pcommon.TraceID) bool {
	tr := m.traces[id]
	return tr == nil || tr.status == gate.Pending
}

// Gated: a trace made if unknown and, while pending, active at now (a settled trace is not kept
// longer for it).
func (m *fakeMemory) Gated(ids []pcommon.TraceID, now time.Time, f func(int, gate.Trace)) {
	m.op(now, func() {
		for i, id := range ids {
			tr := m.traces[id]
			if tr == nil || tr.status == gate.Pending {
				tr = m.touch(id, now)
			}
			f(i, tr)
		}
	})
}

// SizeOf: ten bytes an attribute.
func (m *fakeMemory) SizeOf(attrs pcommon.Map) int64 { return 10 * int64(attrs.Len()) }

func (m *fakeMemory) Room(size int64) error {
	m.asked = append(m.asked, size)
	return m.roomErr
}

func (m *fakeMemory) Enforce() { m.enforce++ }

// ForcePending forces, in one operation, the pending traces that hold something (a state) and
// which selects.
func (m *fakeMemory) ForcePending(which func(gate.Trace) bool) {
	var ids []pcommon.TraceID
	for id := range m.traces {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b pcommon.TraceID) int { return bytes.Compare(a[:], b[:]) })
	m.op(m.gate.Now(), func() {
		for _, id := range ids {
			if tr := m.traces[id]; tr.status == gate.Pending && tr.state != nil && which(tr) {
				m.gate.Force(tr, m.gate.Now(), gate.ForceShutdown)
			}
		}
	})
}

func (m *fakeMemory) NewRef(id uint64, items int) gate.Ref {
	return &fakeRef{m: m, id: id, left: items}
}
func (m *fakeMemory) Ready(bytes int64) { m.ready += bytes }
func (m *fakeMemory) Count(bytes int64) { m.own += bytes }

// RecoverEntries reads the entries as the memory does (tracememory.perTrace): every entry checked
// before any is restored, each a 16-byte trace id and what restore reads; its trace keeps the record.
// A record that cannot be read is removed (its guard is its only reference).
func (m *fakeMemory) RecoverEntries(rec journal.Record, size func([]byte) int,
	restore func(gate.Trace, []byte)) error {
	guard := m.NewRef(rec.ID, 1).(*fakeRef)
	defer guard.Done(1)
	for p := rec.Payload; len(p) > 0; p = p[size(p):] {
		if size(p) > len(p) {
			return fmt.Errorf("a truncated entry in its %d bytes", len(rec.Payload))
		}
	}
	if len(rec.Payload) == 0 {
		return errors.New("no entries")
	}
	m.op(rec.HeldAt, func() {
		for p := rec.Payload; len(p) > 0; p = p[size(p):] {
			tr := m.touch(pcommon.TraceID(p[:16]), rec.HeldAt)
			restore(tr, p[16:size(p)])
			if !slices.Contains(tr.records, guard) {
				tr.records = append(tr.records, guard)
				guard.Hold(1)
			}
		}
	})
	return nil
}

// fakeTrace is a gate.Trace.
type fakeTrace struct {
	m          *fakeMemory
	id         pcommon.TraceID
	experiment bool
	status     gate.Status
	state      any
	stateBytes int64
	last       time.Time
	held       int64      // what the gate holds (Hold)
	entries    [][]byte   // every Record, its fields joined (the journal entry after the trace id)
	records    []*fakeRef // journal records it keeps until it is forgotten
	waiting    []sentSpan // its kept spans behind the gate
	opens      int
	shuts      int
}

var _ gate.Trace = (*fakeTrace)(nil)

func (tr *fakeTrace) ID() pcommon.TraceID     { return tr.id }
func (tr *fakeTrace) Experiment() bool        { return tr.experiment }
func (tr *fakeTrace) Status() gate.Status     { return tr.status }
func (tr *fakeTrace) State() any              { return tr.state }
func (tr *fakeTrace) LastActivity() time.Time { return tr.last }

func (tr *fakeTrace) SetState(state any, bytes int64) {
	tr.state = state
	tr.stateBytes += bytes
}

func (tr *fakeTrace) Touch(now time.Time) {
	if now.After(tr.last) {
		tr.last = now
	}
}

// inOp is the operation under way; a handle used outside one fails the test.
func (tr *fakeTrace) inOp() *operation {
	tr.m.t.Helper()
	require.NotNil(tr.m.t, tr.m.out, "gate.Trace used outside an operation")
	return tr.m.out
}

// Open releases the spans waiting behind the gate; their root's parent is settled: the gate hears
// of it (Settled), as from the memory.
func (tr *fakeTrace) Open() {
	tr.inOp()
	if tr.status != gate.Pending {
		return
	}
	tr.status, tr.opens = gate.Open, tr.opens+1
	for _, w := range tr.waiting {
		tr.m.gate.Settled(tr, w.span, w.res, w.scope)
		tr.m.sent = append(tr.m.sent, w)
	}
	tr.waiting = nil
}

func (tr *fakeTrace) Shut() {
	tr.inOp()
	if tr.status != gate.Pending {
		return
	}
	tr.status, tr.shuts, tr.waiting = gate.Shut, tr.shuts+1, nil
}

func (tr *fakeTrace) Hold(bytes int64) {
	tr.inOp()
	tr.held += bytes
	if tr.held < 0 {
		tr.m.t.Errorf("trace %v: the gate holds %d bytes", tr.id, tr.held)
	}
}

func (tr *fakeTrace) Record(fields ...[]byte) {
	out := tr.inOp()
	entry := bytes.Join(fields, nil)
	tr.entries = append(tr.entries, entry)
	out.payload = append(append(out.payload, tr.id[:]...), entry...)
	out.traces = append(out.traces, tr)
}

func (tr *fakeTrace) After(x any) { out := tr.inOp(); out.after = append(out.after, x) }
func (tr *fakeTrace) Done(r gate.Ref) {
	out := tr.inOp()
	out.done = append(out.done, r)
}

// harness is a Sampler behind the fakes, its clock and what it observed.
type harness struct {
	t     *testing.T
	j     *fakeJournal
	m     *fakeMemory
	s     *Sampler
	now   time.Time
	stats Stats // every Stats observed, summed
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	testWait   = time.Minute
	testSettle = 5 * time.Second
)

// newOutcome is "errors, then flagged scores (helpful: false), then the rate", per trace or session.
func newOutcome(t *testing.T, per string, rate float64, mods ...func(*sampling.OutcomeConfig)) *sampling.Outcome {
	cfg := sampling.DefaultOutcomeConfig()
	cfg.DecidePer = per
	no := false
	cfg.Rules = []sampling.OutcomeRule{{Name: "errors", Kind: sampling.RuleError},
		{Name: "flagged", Kind: sampling.RuleScore, ScoreName: "helpful", Boolean: &no}}
	cfg.DecisionWait, cfg.SettleDuration = testWait, testSettle
	for _, mod := range mods {
		mod(&cfg)
	}
	o, err := sampling.NewOutcome(cfg, sampling.NewRatio(rate))
	require.NoError(t, err)
	return o
}

// newHarness is a Sampler of o over a journaled fake memory (j nil: a new journal).
func newHarness(t *testing.T, o *sampling.Outcome, j *fakeJournal) *harness {
	if j == nil {
		j = newFakeJournal(t)
	}
	h := &harness{t: t, j: j, m: newFakeMemory(t, j), now: t0}
	h.s = New(Settings{Outcome: o, Memory: h.m, Journal: j, Now: func() time.Time { return h.now },
		Observe: func(st *Stats) { // (no Logger: New's default)
			h.stats.Decided = append(h.stats.Decided, st.Decided...)
			h.stats.ScoresDropped += st.ScoresDropped
		}})
	h.m.gate = h.s
	return h
}

// spanSpec is a kept span: a root unless child, failing when err.
type spanSpec struct {
	name    string
	child   bool
	err     bool
	session string // session.id
	newSDK  bool   // from a svc SDK that encodes metadata values as JSON text
	at      time.Duration
	notHeld bool // not written ahead
}

var rootSpanID = pcommon.SpanID{0xaa, 7: 1}

func makeSpan(id pcommon.TraceID, s spanSpec) (ptrace.Span, pcommon.Resource, pcommon.InstrumentationScope) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "agent")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("test")
	if s.newSDK {
		rs.Resource().Attributes().PutStr(svcattr.TelemetrySDKLanguage, "python")
		ss.Scope().SetName(svcattr.SDKScopeName)
		ss.Scope().SetVersion("5.1.0")
	}
	span := ss.Spans().AppendEmpty()
	span.SetName(s.name)
	span.SetTraceID(id)
	span.SetSpanID(rootSpanID)
	if s.child {
		f := fnv.New64a()
		f.Write([]byte(s.name))
		span.SetSpanID(pcommon.SpanID(f.Sum(nil)))
		span.SetParentSpanID(rootSpanID)
	}
	if s.err {
		span.Status().SetCode(ptrace.StatusCodeError)
	}
	if s.session != "" {
		span.Attributes().PutStr("session.id", s.session)
	}
	return span, rs.Resource(), ss.Scope()
}

// kept is a kept span's arrival as the memory admits it (one operation at h.now+s.at): Kept; a span
// of a trace shut now is dropped, else a root's parent is settled on arrival (Settled); it waits
// behind the gate or goes on.
func (h *harness) kept(id pcommon.TraceID, s spanSpec) (wait bool) {
	h.t.Helper()
	span, res, scope := makeSpan(id, s)
	now := h.now.Add(s.at)
	h.m.op(now, func() {
		tr := h.m.touch(id, now)
		wait = h.s.Kept(tr, span, res, scope, !s.notHeld, now) && tr.status == gate.Pending
		if tr.status == gate.Shut {
			return
		}
		h.s.Settled(tr, span, res, scope)
		if wait {
			tr.waiting = append(tr.waiting, sentSpan{id, span, res, scope})
		} else {
			h.m.sent = append(h.m.sent, sentSpan{id, span, res, scope})
		}
	})
	return wait
}

// tick is the expiry round at now of a trace that waits, then Expire.
func (h *harness) tick(id pcommon.TraceID, now time.Time) {
	h.m.op(now, func() {
		if tr := h.m.traces[id]; tr != nil && tr.status == gate.Pending {
			h.s.Tick(tr, now)
		}
	})
	h.s.Expire(now)
}

func (h *harness) force(id pcommon.TraceID, now time.Time, why gate.ForceReason) {
	h.m.op(now, func() { h.s.Force(h.m.traces[id], now, why) })
}

// sentRoot is the reason attribute of the trace's root that went on; ok: it went on.
func (h *harness) sentRoot(id pcommon.TraceID) (reason string, sent, tagged bool) {
	for _, s := range h.m.sent {
		if s.trace == id && s.span.ParentSpanID().IsEmpty() {
			if v, tagged := s.span.Attributes().Get(ReasonAttribute); tagged {
				return v.AsString(), true, true
			}
			return "", true, false
		}
	}
	return "", false, false
}

// checkStates runs the per-trace invariant on every trace of the memory.
func (h *harness) checkStates() {
	h.t.Helper()
	for id, tr := range h.m.traces {
		if st := stateOf(tr); st != nil {
			require.NoError(h.t, st.Check(tr.status, tr.held), "trace %v", id)
		}
	}
}

// score is a score record of a trace: name=value (BOOLEAN), with an id.
type score struct {
	id, name string
	value    bool
	trace    pcommon.TraceID
}

func scoreLogs(scores ...score) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "evaluator")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("scores")
	for _, s := range scores {
		lr := sl.LogRecords().AppendEmpty()
		lr.SetEventName(scorerecord.EventName)
		lr.SetTraceID(s.trace)
		lr.Attributes().PutStr(scorerecord.AttrID, s.id)
		lr.Attributes().PutStr(scorerecord.AttrName, s.name)
		lr.Attributes().PutBool(scorerecord.AttrValue, s.value)
		lr.Attributes().PutStr(scorerecord.AttrDataType, scorerecord.DataTypeBoolean)
	}
	return ld
}

// scoreIDs are the ids of the score records of ld, in order.
func scoreIDs(ld plog.Logs) []string {
	var ids []string
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				if v, ok := lr.Attributes().Get(scorerecord.AttrID); ok {
					ids = append(ids, v.Str())
				}
			}
		}
	}
	return ids
}

// scoreBytes is what a score record of scoreLogs counts (SizeOf: four attributes).
const scoreBytes = 4*10 + scoreCost

// addScores is HoldScores, then Apply, as the logs side calls them.
func (h *harness) addScores(sink any, ld plog.Logs) (hold *ScoreHold, held, dropped int) {
	h.t.Helper()
	hold, err := h.s.HoldScores(client.Info{}, sink, ld)
	require.NoError(h.t, err)
	if hold != nil {
		held, dropped = hold.Apply(ld)
	}
	return hold, held, dropped
}
