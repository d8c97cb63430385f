package outcome

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// The Sampler alone, behind the fakes of fakes_test.go: the state table of doc.go, event by event.

// Every trigger of doc.go's "decision" drives the trace's state: its gate, its journal entry (the
// reason's length and the reason; 0 for dropped), its observed Decided and its root's reason.
func TestDecisionTriggers(t *testing.T) {
	id := pcommon.TraceID{0xd1, 15: 1}
	tests := []struct {
		name       string
		rate       float64
		experiment bool
		spans      []spanSpec
		wait       []bool // what Kept returned, span by span
		trigger    func(t *testing.T, h *harness)
		status     gate.Status
		entry      string   // the Record entry after the trace id; "": none
		decided    *Decided // nil: undecided
		root       string   // ReasonAttribute on the root that went on; "": none
		rootSent   bool
	}{
		{
			name:  "a rule matches a kept root: kept at once",
			spans: []spanSpec{{name: "agent", err: true}}, wait: []bool{false},
			status: gate.Open, entry: "\x06errors", decided: &Decided{Keep: true, Reason: "errors"},
			root: "errors", rootSent: true,
		},
		{
			name:   "a rule matches a later child: kept at once, its waiting root released with the reason",
			spans:  []spanSpec{{name: "agent"}, {name: "llm", child: true, err: true, at: 2 * time.Second}},
			wait:   []bool{true, false},
			status: gate.Open, entry: "\x06errors", decided: &Decided{Keep: true, Reason: "errors", Wait: 2 * time.Second},
			root: "errors", rootSent: true,
		},
		{
			name:  "the root of a new svc SDK gets the reason as JSON text",
			spans: []spanSpec{{name: "agent", err: true, newSDK: true}}, wait: []bool{false},
			status: gate.Open, entry: "\x06errors", decided: &Decided{Keep: true, Reason: "errors"},
			root: `"errors"`, rootSent: true,
		},
		{
			name:  "forced by max_held_mib: dropped by the rate, early",
			spans: []spanSpec{{name: "agent"}}, wait: []bool{true},
			trigger: func(t *testing.T, h *harness) { h.force(id, t0.Add(time.Second), gate.ForceBudget) },
			status:  gate.Shut, entry: "\x00",
			decided: &Decided{Keep: false, Reason: sampling.ReasonDropped, Wait: time.Second, Early: true},
		},
		{
			name: "forced on eviction: kept by the rate, not early", rate: 1,
			spans: []spanSpec{{name: "llm", child: true}}, wait: []bool{true},
			trigger: func(t *testing.T, h *harness) { h.force(id, t0.Add(2*time.Second), gate.ForceEvicted) },
			status:  gate.Open, entry: "\x06sample", decided: &Decided{Keep: true, Reason: "sample", Wait: 2 * time.Second},
		},
		{
			name: "forced at shutdown: kept by the rate", rate: 1,
			spans: []spanSpec{{name: "agent"}}, wait: []bool{true},
			trigger: func(t *testing.T, h *harness) {
				h.now = t0.Add(3 * time.Second)
				h.m.ForcePending(func(gate.Trace) bool { return true })
			},
			status: gate.Open, entry: "\x06sample", decided: &Decided{Keep: true, Reason: "sample", Wait: 3 * time.Second},
			root: "sample", rootSent: true,
		},
		{
			name: "decision_wait: decided once it is over, not before", rate: 1,
			spans: []spanSpec{{name: "llm", child: true}}, wait: []bool{true},
			trigger: func(t *testing.T, h *harness) {
				h.tick(id, t0.Add(testWait-time.Nanosecond))
				require.Empty(t, h.stats.Decided, "decision_wait not over")
				h.tick(id, t0.Add(testWait))
			},
			status: gate.Open, entry: "\x06sample", decided: &Decided{Keep: true, Reason: "sample", Wait: testWait},
		},
		{
			name:  "root settled and idle settle_duration: decided, not before",
			spans: []spanSpec{{name: "agent"}}, wait: []bool{true},
			trigger: func(t *testing.T, h *harness) {
				h.tick(id, t0.Add(testSettle-time.Nanosecond))
				require.Empty(t, h.stats.Decided, "not idle settle_duration yet")
				h.tick(id, t0.Add(testSettle))
			},
			status: gate.Shut, entry: "\x00", decided: &Decided{Reason: sampling.ReasonDropped, Wait: testSettle},
		},
		{
			name:  "no root: settle_duration decides nothing, decision_wait not over",
			spans: []spanSpec{{name: "llm", child: true}}, wait: []bool{true},
			trigger: func(t *testing.T, h *harness) {
				h.tick(id, t0.Add(testSettle))
				h.tick(id, t0.Add(testWait-time.Nanosecond))
			},
			status: gate.Pending,
		},
		{
			name:  "a later span delays the settled root's decision",
			spans: []spanSpec{{name: "agent"}, {name: "llm", child: true, at: 3 * time.Second}}, wait: []bool{true, true},
			trigger: func(t *testing.T, h *harness) {
				h.tick(id, t0.Add(testSettle))
				require.Empty(t, h.stats.Decided, "active 2s ago")
				h.tick(id, t0.Add(3*time.Second+testSettle))
			},
			status: gate.Shut, entry: "\x00", decided: &Decided{Reason: sampling.ReasonDropped, Wait: 3*time.Second + testSettle},
		},
		{
			name:  "a span not written ahead: decided at once, dropped with it",
			spans: []spanSpec{{name: "agent", notHeld: true}}, wait: []bool{false},
			status: gate.Shut, entry: "\x00", decided: &Decided{Reason: sampling.ReasonDropped},
		},
		{
			name: "a span not written ahead: decided at once, kept by the rate", rate: 1,
			spans: []spanSpec{{name: "agent", notHeld: true}}, wait: []bool{false},
			status: gate.Open, entry: "\x06sample", decided: &Decided{Keep: true, Reason: "sample"},
			root: "sample", rootSent: true,
		},
		{
			name: "an experiment: kept whatever the rate", experiment: true,
			spans: []spanSpec{{name: "agent"}}, wait: []bool{true},
			trigger: func(t *testing.T, h *harness) { h.tick(id, t0.Add(testSettle)) },
			status:  gate.Open, entry: "\x0aexperiment", decided: &Decided{Keep: true, Reason: "experiment", Wait: testSettle},
			root: "experiment", rootSent: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newOutcome(t, sampling.DecidePerTrace, tt.rate), nil)
			if tt.experiment {
				h.m.traces[id] = &fakeTrace{m: h.m, id: id, experiment: true, last: t0}
			}
			var wait []bool
			for _, s := range tt.spans {
				wait = append(wait, h.kept(id, s))
			}
			require.Equal(t, tt.wait, wait, "what Kept returned")
			if tt.trigger != nil {
				tt.trigger(t, h)
			}
			tr := h.m.traces[id]
			assert.Equal(t, tt.status, tr.status)
			assert.LessOrEqual(t, tr.opens+tr.shuts, 1, "opened or shut once")
			decided := h.j.ofKind(KindDecided)
			if tt.entry == "" {
				assert.Empty(t, tr.entries, "nothing journaled")
				assert.Empty(t, decided)
			} else {
				assert.Equal(t, [][]byte{[]byte(tt.entry)}, tr.entries, "one entry: the reason's length, the reason")
				require.Len(t, decided, 1, "the memory wrote the entry")
				assert.Equal(t, append(id[:], tt.entry...), decided[0].Payload)
				assert.Len(t, tr.records, 1, "the trace keeps its record")
			}
			if tt.decided == nil {
				assert.Empty(t, h.stats.Decided)
				assert.Equal(t, gate.Pending, tr.status)
			} else {
				want := *tt.decided
				want.Trace = id
				assert.Equal(t, []Decided{want}, h.stats.Decided)
				assert.Equal(t, t0.Add(want.Wait), tr.last, "the decision is remembered from its time")
			}
			reason, sent, tagged := h.sentRoot(id)
			assert.Equal(t, tt.rootSent, sent, "the root went on")
			assert.Equal(t, tt.root != "", tagged, "the root carries the reason")
			assert.Equal(t, tt.root, reason)
			for _, s := range h.m.sent {
				if !s.span.ParentSpanID().IsEmpty() {
					_, tagged := s.span.Attributes().Get(ReasonAttribute)
					assert.False(t, tagged, "only the root carries the reason")
				}
			}
			assert.Equal(t, int64(stateCost), tr.stateBytes, "its state counted once")
			h.checkStates()
		})
	}
}

// A decided trace follows its decision: later spans (even failing ones) neither wait nor decide
// again; ticks and forces change nothing.
func TestDecidedTraceFollowsItsDecision(t *testing.T) {
	id := pcommon.TraceID{0xd2, 15: 1}
	for _, rate := range []float64{0, 1} {
		h := newHarness(t, newOutcome(t, sampling.DecidePerTrace, rate), nil)
		require.True(t, h.kept(id, spanSpec{name: "agent"}))
		h.force(id, t0.Add(time.Second), gate.ForceBudget)
		tr := h.m.traces[id]
		status := tr.status
		require.NotEqual(t, gate.Pending, status)

		assert.False(t, h.kept(id, spanSpec{name: "late", child: true, err: true, at: 10 * time.Second}),
			"rate %v: a later span does not wait", rate)
		h.tick(id, t0.Add(testWait))
		h.m.op(t0.Add(testWait), func() { h.s.Tick(tr, t0.Add(testWait)) }) // also when the memory calls it
		h.force(id, t0.Add(testWait), gate.ForceShutdown)

		assert.Equal(t, status, tr.status, "rate %v", rate)
		assert.Len(t, tr.entries, 1, "rate %v: journaled once", rate)
		assert.Len(t, h.stats.Decided, 1, "rate %v: decided once", rate)
		late := false
		for _, s := range h.m.sent {
			late = late || s.span.Name() == "late"
		}
		assert.Equal(t, status == gate.Open, late, "rate %v: the later span goes on only with a kept trace", rate)
		h.checkStates()
	}
}

// Score records of an undecided trace are held (written ahead in a KindScores record) until the
// decision: kept, released to their sink and their record removed once delivered; dropped, removed
// at once.
func TestScoresHeldUntilTheDecision(t *testing.T) {
	id := pcommon.TraceID{0x5c, 15: 1}
	for _, tt := range []struct {
		name string
		rate float64
		keep bool
	}{{"kept", 1, true}, {"dropped", 0, false}} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newOutcome(t, sampling.DecidePerTrace, tt.rate), nil)
			ld := scoreLogs(score{id: "s1", name: "helpful", value: true, trace: id},
				score{id: "s2", name: "helpful", value: true, trace: id})
			records := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
			records.AppendEmpty().Body().SetStr("an ordinary log record")
			noID := records.AppendEmpty()
			noID.SetEventName(scorerecord.EventName)
			noID.SetTraceID(id)
			info := client.Info{Metadata: client.NewMetadata(map[string][]string{"tenant": {"t1"}})}

			hold, err := h.s.HoldScores(info, "logs", ld)
			require.NoError(t, err)
			require.NotNil(t, hold)
			assert.Equal(t, []int64{2 * scoreBytes}, h.m.asked, "room asked for both")
			written := h.j.ofKind(KindScores)
			require.Len(t, written, 1, "written ahead")
			assert.Equal(t, t0, written[0].HeldAt)
			assert.Equal(t, map[string][]string{"tenant": {"t1"}}, written[0].Metadata)
			copies, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(written[0].Payload)
			require.NoError(t, err)
			assert.Equal(t, []string{"s1", "s2"}, scoreIDs(copies), "the score records that follow their trace")
			assert.Empty(t, h.m.traces, "planning touches no trace")

			held, dropped := hold.Apply(ld)
			assert.Equal(t, 2, held)
			assert.Zero(t, dropped)
			assert.Empty(t, scoreIDs(ld), "held: taken from the call")
			assert.Equal(t, 2, ld.LogRecordCount(), "the rest stay")
			assert.Equal(t, 1, h.m.enforce)
			tr := h.m.traces[id]
			require.NotNil(t, tr)
			assert.True(t, h.m.Pending(id))
			assert.Equal(t, int64(2*scoreBytes), tr.held, "behind the gate, in the budget")
			st := stateOf(tr)
			require.Len(t, st.scores, 2)
			require.NoError(t, st.Check(tr.status, tr.held))
			refs := map[gate.Ref]int{}
			st.Refs(func(r gate.Ref, n int) { refs[r] += n })
			require.Len(t, refs, 1, "both under the record of their call")
			var ref *fakeRef
			for r, n := range refs {
				ref = r.(*fakeRef)
				assert.Equal(t, 2, n)
			}
			assert.Equal(t, written[0].ID, ref.id)
			assert.Equal(t, 2, ref.left, "the guard done, two held")

			h.force(id, t0.Add(time.Second), gate.ForceBudget)
			assert.Zero(t, tr.held, "nothing held once decided")
			assert.Empty(t, stateOf(tr).scores)
			h.checkStates()
			if !tt.keep {
				assert.Equal(t, gate.Shut, tr.status)
				assert.EqualValues(t, 2, h.stats.ScoresDropped)
				assert.Empty(t, h.s.TakeReadyScores("logs"))
				assert.Zero(t, ref.left)
				assert.Empty(t, h.j.ofKind(KindScores), "removed with the dropped trace")
				assert.Zero(t, h.m.ready)
				return
			}
			assert.Equal(t, gate.Open, tr.status)
			assert.Zero(t, h.stats.ScoresDropped)
			select {
			case <-h.s.ScoreWake():
			default:
				t.Error("the logs side not woken")
			}
			assert.Empty(t, h.s.TakeReadyScores("other"), "another sink's")
			ds := h.s.TakeReadyScores("logs")
			require.Len(t, ds, 1)
			d := ds[0]
			assert.Equal(t, "logs", d.Sink)
			assert.Equal(t, 2, d.Records)
			assert.Equal(t, []string{"s1", "s2"}, scoreIDs(d.Logs))
			assert.Equal(t, []string{"t1"}, d.Info.Metadata.Get("tenant"), "under their request")
			rl := d.Logs.ResourceLogs().At(0)
			svc, _ := rl.Resource().Attributes().Get("service.name")
			assert.Equal(t, "evaluator", svc.Str())
			assert.Equal(t, "scores", rl.ScopeLogs().At(0).Scope().Name())
			assert.Equal(t, int64(2*scoreBytes), h.m.ready, "released, in the budget until delivered")
			assert.Len(t, h.j.ofKind(KindScores), 1, "kept until delivered")
			assert.Equal(t, 2, ref.left)

			h.s.ScoresDelivered(d)
			assert.Zero(t, h.m.ready)
			assert.Zero(t, ref.left)
			assert.Empty(t, h.j.ofKind(KindScores), "removed once delivered")
			assert.Empty(t, h.s.TakeReadyScores("logs"))
		})
	}
}

// After the decision, score records of a kept trace pass and of a dropped trace are removed: nothing
// written ahead, nothing held.
func TestScoresAfterTheDecision(t *testing.T) {
	id := pcommon.TraceID{0x5d, 15: 1}
	for _, tt := range []struct {
		name    string
		rate    float64
		passed  []string
		dropped int
	}{{"kept: they pass", 1, []string{"late"}, 0}, {"dropped: they are removed", 0, nil, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newOutcome(t, sampling.DecidePerTrace, tt.rate), nil)
			require.False(t, h.kept(id, spanSpec{name: "agent", notHeld: true}))
			require.False(t, h.m.Pending(id))
			ld := scoreLogs(score{id: "late", name: "helpful", value: true, trace: id})
			hold, held, dropped := h.addScores("logs", ld)
			require.NotNil(t, hold, "planned: to pass or drop")
			assert.Zero(t, held)
			assert.Equal(t, tt.dropped, dropped)
			assert.Equal(t, tt.passed, scoreIDs(ld))
			assert.EqualValues(t, tt.dropped, h.stats.ScoresDropped)
			assert.Empty(t, h.m.asked, "no room needed")
			assert.Empty(t, h.j.ofKind(KindScores), "nothing written ahead")
			assert.Zero(t, h.m.traces[id].held)
			assert.Len(t, h.stats.Decided, 1, "no new decision")
			h.checkStates()
		})
	}
}

// A score rule decides the trace at once: its spans and scores go on, the root carries the rule.
func TestScoreRuleDecidesAtOnce(t *testing.T) {
	id := pcommon.TraceID{0x5e, 15: 1}
	h := newHarness(t, newOutcome(t, sampling.DecidePerTrace, 0), nil)
	require.True(t, h.kept(id, spanSpec{name: "agent"}))
	h.now = t0.Add(time.Second)
	_, held, dropped := h.addScores("logs", scoreLogs(score{id: "ok", name: "helpful", value: true, trace: id},
		score{id: "bad", name: "helpful", value: false, trace: id}))
	assert.Equal(t, 2, held)
	assert.Zero(t, dropped)
	tr := h.m.traces[id]
	assert.Equal(t, gate.Open, tr.status)
	assert.Equal(t, [][]byte{[]byte("\x07flagged")}, tr.entries)
	assert.Equal(t, []Decided{{Trace: id, Keep: true, Reason: "flagged", Wait: time.Second}}, h.stats.Decided)
	reason, _, _ := h.sentRoot(id)
	assert.Equal(t, "flagged", reason)
	ds := h.s.TakeReadyScores("logs")
	require.Len(t, ds, 1)
	assert.Equal(t, []string{"ok", "bad"}, scoreIDs(ds[0].Logs))
	h.checkStates()
}

// A score record planned to pass (its trace decided) whose trace the memory forgot before Apply:
// the trace, made again, is decided at once (doc.go, "score record").
func TestScoreOfATraceForgottenSinceThePlan(t *testing.T) {
	id := pcommon.TraceID{0x5f, 15: 1}
	for _, tt := range []struct {
		name    string
		rate    float64
		passed  []string
		dropped int
		again   Decided
	}{
		{"dropped by the rate", 0, nil, 1, Decided{Reason: sampling.ReasonDropped}},
		{"kept by the rate", 1, []string{"x"}, 0, Decided{Keep: true, Reason: sampling.ReasonSample}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newOutcome(t, sampling.DecidePerTrace, tt.rate), nil)
			require.False(t, h.kept(id, spanSpec{name: "agent", err: true}))
			ld := scoreLogs(score{id: "x", name: "helpful", value: true, trace: id})
			hold, err := h.s.HoldScores(client.Info{}, "logs", ld)
			require.NoError(t, err)
			assert.Empty(t, h.j.ofKind(KindScores), "planned to pass: not written ahead")
			h.m.forget(id)
			assert.Empty(t, h.j.ofKind(KindDecided), "its record removed with it")

			held, dropped := hold.Apply(ld)
			assert.Zero(t, held, "not written ahead: never held")
			assert.Equal(t, tt.dropped, dropped)
			assert.Equal(t, tt.passed, scoreIDs(ld))
			tt.again.Trace = id
			require.Len(t, h.stats.Decided, 2)
			assert.Equal(t, tt.again, h.stats.Decided[1], "decided again, at once")
			assert.NotEqual(t, gate.Pending, h.m.traces[id].status)
			assert.Len(t, h.j.ofKind(KindDecided), 1, "the new decision journaled")
			h.checkStates()
		})
	}
}

// HoldScores writes nothing when there is nothing to hold, no room, or the journal fails.
func TestHoldScoresRefusals(t *testing.T) {
	id := pcommon.TraceID{0x60, 15: 1}
	errRoom, errDisk := errors.New("content overloaded"), errors.New("disk full")
	for _, tt := range []struct {
		name   string
		ld     func() plog.Logs
		setup  func(h *harness)
		errIs  error
		errHas string
	}{
		{name: "no score record follows its trace", ld: func() plog.Logs {
			ld := scoreLogs(score{id: "no trace", name: "helpful"})
			ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty().Body().SetStr("a log")
			return ld
		}},
		{name: "no room", setup: func(h *harness) { h.m.roomErr = errRoom }, errIs: errRoom},
		{name: "the journal fails", setup: func(h *harness) { h.j.appendErr = errDisk }, errIs: errDisk,
			errHas: "recording held score records"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newOutcome(t, sampling.DecidePerTrace, 1), nil)
			if tt.setup != nil {
				tt.setup(h)
			}
			ld := scoreLogs(score{id: "s", name: "helpful", trace: id})
			if tt.ld != nil {
				ld = tt.ld()
			}
			hold, err := h.s.HoldScores(client.Info{}, "logs", ld)
			assert.Nil(t, hold)
			if tt.errIs == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tt.errIs)
				assert.ErrorContains(t, err, tt.errHas)
			}
			assert.Empty(t, h.j.live, "nothing written")
			assert.Empty(t, h.m.traces, "nothing held")
		})
	}
}

// Cancel gives up a hold before Apply: its record is removed, nothing was held.
func TestScoreHoldCancel(t *testing.T) {
	id := pcommon.TraceID{0x61, 15: 1}
	h := newHarness(t, newOutcome(t, sampling.DecidePerTrace, 1), nil)
	hold, err := h.s.HoldScores(client.Info{}, "logs", scoreLogs(score{id: "s", name: "helpful", trace: id}))
	require.NoError(t, err)
	require.Len(t, h.j.ofKind(KindScores), 1)
	hold.Cancel()
	assert.Empty(t, h.j.ofKind(KindScores), "the guard was its last reference")
	assert.Empty(t, h.m.traces)
	assert.Zero(t, hold.ref.(*fakeRef).left)
	(*ScoreHold)(nil).Cancel() // HoldScores's nil: nothing to give up
}

// Without storage (journal.Nop) nothing is journaled; the state table is the same.
func TestWithoutJournal(t *testing.T) {
	id := pcommon.TraceID{0x62, 15: 1}
	m := newFakeMemory(t, nil)
	var stats Stats
	s := New(Settings{Outcome: newOutcome(t, sampling.DecidePerSession, 1), Memory: m, Journal: journal.Nop,
		Now: func() time.Time { return t0 }, Logger: zap.NewNop(),
		Observe: func(st *Stats) { stats.Decided = append(stats.Decided, st.Decided...) }})
	m.gate = s
	ld := scoreLogs(score{id: "s", name: "helpful", value: true, trace: id})
	hold, err := s.HoldScores(client.Info{}, "logs", ld)
	require.NoError(t, err)
	held, _ := hold.Apply(ld)
	assert.Equal(t, 1, held)
	span, res, scope := makeSpan(id, spanSpec{name: "agent", err: true, session: "s1"})
	m.op(t0, func() { assert.False(t, s.Kept(m.traces[id], span, res, scope, true, t0)) })
	tr := m.traces[id]
	assert.Equal(t, gate.Open, tr.status)
	assert.Empty(t, tr.entries, "no Record without storage")
	assert.Equal(t, []Decided{{Trace: id, Keep: true, Reason: "errors"}}, stats.Decided)
	ds := s.TakeReadyScores("logs")
	require.Len(t, ds, 1, "released all the same")
	bytes, err := s.Check(func(gate.Ref, int) {})
	require.NoError(t, err)
	assert.Zero(t, bytes, "no kept session journaled, none kept here")
}

// sessionsOf is what Check reports: the bytes and the journal record of each reference.
func sessionsOf(t *testing.T, s *Sampler) (bytes int64, records []uint64) {
	t.Helper()
	bytes, err := s.Check(func(r gate.Ref, n int) {
		for range n {
			records = append(records, r.(*fakeRef).id)
		}
	})
	require.NoError(t, err)
	return bytes, records
}

func idsOf(recs []journal.Record) []uint64 {
	var ids []uint64
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	return ids
}

func sessionPayload(session, reason string) []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(sampling.SessionKeyOf(session))), reason...)
}

// A rule-kept trace keeps its session (journaled after the decision): its session's later traces are
// kept; beyond max_sessions the least recently kept is forgotten, after session_keep_duration too.
func TestKeptSessions(t *testing.T) {
	a, b, c, d, e := pcommon.TraceID{0x70, 15: 1}, pcommon.TraceID{0x70, 15: 2}, pcommon.TraceID{0x70, 15: 3},
		pcommon.TraceID{0x70, 15: 4}, pcommon.TraceID{0x70, 15: 5}
	h := newHarness(t, newOutcome(t, sampling.DecidePerSession, 0, func(c *sampling.OutcomeConfig) {
		c.MaxSessions, c.SessionKeepDuration = 2, time.Hour
	}), nil)
	const one = sessionCost + int64(len("errors"))

	require.False(t, h.kept(a, spanSpec{name: "agent", err: true, session: "s1"}))
	sessions := h.j.ofKind(KindSession)
	require.Len(t, sessions, 1)
	s1 := sessions[0]
	assert.Equal(t, sessionPayload("s1", "errors"), s1.Payload)
	assert.Equal(t, t0, s1.HeldAt, "kept from the decision")
	assert.Less(t, h.j.ofKind(KindDecided)[0].ID, s1.ID, "the decision journaled first")
	bytes, refs := sessionsOf(t, h.s)
	assert.Equal(t, one, bytes)
	assert.Equal(t, []uint64{s1.ID}, refs)
	assert.Equal(t, one, h.m.own, "counted in the budget")

	require.True(t, h.kept(b, spanSpec{name: "agent", session: "s1", at: time.Minute}))
	h.force(b, t0.Add(time.Minute+time.Second), gate.ForceEvicted)
	assert.Equal(t, Decided{Trace: b, Keep: true, Reason: sampling.ReasonSession, Wait: time.Second}, h.stats.Decided[1])
	assert.Len(t, h.j.ofKind(KindSession), 1, "kept by its session, not by a rule: no session record")

	require.False(t, h.kept(c, spanSpec{name: "agent", err: true, session: "s2", at: 2 * time.Minute}))
	require.False(t, h.kept(d, spanSpec{name: "agent", err: true, session: "s3", at: 3 * time.Minute}))
	sessions = h.j.ofKind(KindSession)
	require.Len(t, sessions, 2, "beyond max_sessions the oldest is forgotten, its record removed")
	assert.Equal(t, sessionPayload("s2", "errors"), sessions[0].Payload)
	assert.Equal(t, sessionPayload("s3", "errors"), sessions[1].Payload)
	bytes, refs = sessionsOf(t, h.s)
	assert.Equal(t, 2*one, bytes)
	assert.Equal(t, idsOf(sessions), refs, "least recently kept first")
	assert.Equal(t, 2*one, h.m.own)

	require.True(t, h.kept(e, spanSpec{name: "agent", session: "s1", at: 4 * time.Minute}))
	h.force(e, t0.Add(4*time.Minute), gate.ForceEvicted)
	assert.Equal(t, Decided{Trace: e, Reason: sampling.ReasonDropped}, h.stats.Decided[4], "s1 forgotten")

	h.s.Expire(t0.Add(2*time.Minute + time.Hour - time.Nanosecond))
	assert.Len(t, h.j.ofKind(KindSession), 2, "session_keep_duration not over")
	h.s.Expire(t0.Add(2*time.Minute + time.Hour))
	assert.Equal(t, idsOf(sessions[1:]), idsOf(h.j.ofKind(KindSession)), "s2 expired")
	bytes, _ = sessionsOf(t, h.s)
	assert.Equal(t, one, bytes)
	h.s.Expire(t0.Add(3*time.Minute + time.Hour))
	assert.Empty(t, h.j.ofKind(KindSession))
	bytes, refs = sessionsOf(t, h.s)
	assert.Zero(t, bytes)
	assert.Empty(t, refs)
	assert.Zero(t, h.m.own, "nothing counted")
	h.checkStates()
}

// A session kept again replaces its record; one kept before the one it has is done at once.
func TestSessionKeptAgain(t *testing.T) {
	a, b := pcommon.TraceID{0x71, 15: 1}, pcommon.TraceID{0x71, 15: 2}
	h := newHarness(t, newOutcome(t, sampling.DecidePerSession, 0), nil)
	require.False(t, h.kept(a, spanSpec{name: "agent", err: true, session: "s1"}))
	first := h.j.ofKind(KindSession)
	require.Len(t, first, 1)
	require.False(t, h.kept(b, spanSpec{name: "agent", err: true, session: "s1", at: time.Minute}))
	now := h.j.ofKind(KindSession)
	require.Len(t, now, 1, "one record a session")
	assert.NotEqual(t, first[0].ID, now[0].ID, "the latest keep")
	assert.Equal(t, t0.Add(time.Minute), now[0].HeldAt)
	bytes, refs := sessionsOf(t, h.s)
	assert.Equal(t, sessionCost+int64(len("errors")), bytes)
	assert.Equal(t, idsOf(now), refs)
	assert.Equal(t, bytes, h.m.own)

	// An older keep of it (a concurrent call, or an older record recovered) does not replace it.
	older, err := h.j.Append(t.Context(), KindSession, t0, nil, sessionPayload("s1", "errors"))
	require.NoError(t, err)
	ref := h.m.NewRef(older, 1).(*fakeRef)
	h.s.keepSession(&keptSession{key: sampling.SessionKeyOf("s1"), reason: "errors", at: t0, ref: ref})
	assert.Zero(t, ref.left, "done at once")
	assert.NotContains(t, h.j.live, older, "its record removed")
	_, refs = sessionsOf(t, h.s)
	assert.Equal(t, idsOf(now), refs)
	assert.Equal(t, bytes, h.m.own)
}

// A rule-kept trace whose session is named only by a later span (a failing call exported before the
// agent span) keeps the session then, in session mode only, once.
func TestSessionNamedAfterTheDecision(t *testing.T) {
	id := pcommon.TraceID{0x72, 15: 1}
	for _, tt := range []struct {
		name  string
		per   string
		rate  float64
		first spanSpec
		kept  bool
	}{
		{"per session, kept by a rule", sampling.DecidePerSession, 0, spanSpec{name: "llm", child: true, err: true}, true},
		{"per trace", sampling.DecidePerTrace, 0, spanSpec{name: "llm", child: true, err: true}, false},
		{"per session, kept by the rate", sampling.DecidePerSession, 1, spanSpec{name: "llm", child: true, notHeld: true}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newOutcome(t, tt.per, tt.rate), nil)
			require.False(t, h.kept(id, tt.first))
			require.Equal(t, gate.Open, h.m.traces[id].status)
			require.Empty(t, h.j.ofKind(KindSession), "no session yet")
			assert.False(t, h.kept(id, spanSpec{name: "agent", session: "s1", at: 10 * time.Second}))
			assert.False(t, h.kept(id, spanSpec{name: "other", child: true, session: "s0", at: 20 * time.Second}))
			sessions := h.j.ofKind(KindSession)
			bytes, _ := sessionsOf(t, h.s)
			if !tt.kept {
				assert.Empty(t, sessions)
				assert.Zero(t, bytes)
				return
			}
			require.Len(t, sessions, 1, "kept once, by the span that named it")
			assert.Equal(t, sessionPayload("s1", "errors"), sessions[0].Payload)
			assert.Equal(t, t0.Add(10*time.Second), sessions[0].HeldAt)
			assert.Equal(t, sessionCost+int64(len("errors")), bytes)
			reason, ok := h.s.Outcome.SessionKept(sampling.SessionKeyOf("s1"), t0.Add(time.Minute))
			assert.True(t, ok)
			assert.Equal(t, "errors", reason)
			assert.Len(t, h.m.traces[id].entries, 1, "the decision journaled once")
		})
	}
}

// A kept session the journal cannot write is not kept by the Sampler (nothing to remove later); the
// trace's decision stands.
func TestSessionJournalFails(t *testing.T) {
	id := pcommon.TraceID{0x73, 15: 1}
	h := newHarness(t, newOutcome(t, sampling.DecidePerSession, 0), nil)
	h.j.appendErr, h.j.failKind = errors.New("disk full"), KindSession
	require.False(t, h.kept(id, spanSpec{name: "agent", err: true, session: "s1"}))
	assert.Equal(t, gate.Open, h.m.traces[id].status)
	assert.Len(t, h.j.ofKind(KindDecided), 1)
	bytes, refs := sessionsOf(t, h.s)
	assert.Zero(t, bytes)
	assert.Empty(t, refs)
	assert.Zero(t, h.m.own)
}

// The entries a decision recorded, recovered after a restart, restore it: kept -> Open with its
// reason (the root then carries it), dropped -> Shut; kept sessions come back too.
func TestRecoverDecisionsRoundTrip(t *testing.T) {
	a, b, c, e := pcommon.TraceID{0x80, 15: 1}, pcommon.TraceID{0x80, 15: 2}, pcommon.TraceID{0x80, 15: 3},
		pcommon.TraceID{0x80, 15: 5}
	cfg := func() *sampling.Outcome { return newOutcome(t, sampling.DecidePerSession, 0) }
	h1 := newHarness(t, cfg(), nil)
	h1.m.op(t0, func() { // one operation: one record of two entries
		for _, id := range []pcommon.TraceID{a, b} {
			spec := spanSpec{name: "agent"} // b: no session (else kept by a's)
			if id == a {
				spec.err, spec.session = true, "s1"
			}
			span, res, scope := makeSpan(id, spec)
			tr := h1.m.touch(id, t0)
			if !h1.s.Kept(tr, span, res, scope, true, t0) {
				continue
			}
			h1.s.Force(tr, t0, gate.ForceBudget)
		}
	})
	h1.m.traces[c] = &fakeTrace{m: h1.m, id: c, experiment: true, last: t0}
	require.True(t, h1.kept(c, spanSpec{name: "agent"}))
	h1.tick(c, t0.Add(testSettle))
	require.Len(t, h1.stats.Decided, 3)
	decided := h1.j.ofKind(KindDecided)
	require.Len(t, decided, 2)
	assert.Equal(t, append(append(append(a[:], "\x06errors"...), b[:]...), 0), decided[0].Payload,
		"the trace id, the reason's length, the reason; dropped: 0")

	// The restart: a new memory and Sampler over the same journal.
	h2 := newHarness(t, cfg(), h1.j)
	h2.now = t0.Add(time.Minute)
	require.NoError(t, h2.s.RecoverDecisions(h1.j.records()))
	for _, dc := range h1.stats.Decided {
		tr := h2.m.traces[dc.Trace]
		require.NotNil(t, tr, "trace %v restored", dc.Trace)
		st := stateOf(tr)
		require.NotNil(t, st)
		assert.True(t, st.decided)
		assert.Equal(t, dc.Keep, st.keep, "trace %v", dc.Trace)
		assert.Equal(t, dc.Reason, st.reason, "trace %v: the same reason (sampling.ReasonDropped when dropped)", dc.Trace)
		want := gate.Shut
		if dc.Keep {
			want = gate.Open
		}
		assert.Equal(t, want, tr.status, "trace %v", dc.Trace)
		assert.Empty(t, tr.entries, "recovered, not journaled again")
		require.Len(t, tr.records, 1, "it keeps its record")
	}
	assert.Equal(t, sampling.ReasonDropped, stateOf(h2.m.traces[b]).reason)
	assert.Equal(t, decided[0].HeldAt, h2.m.traces[a].last, "remembered from the record's time")
	assert.Equal(t, decided[1].ID, h2.m.traces[c].records[0].id)
	assert.Equal(t, 2, h2.m.traces[a].records[0].left, "the record of two traces, held by both")
	h2.checkStates()
	bytes, refs := sessionsOf(t, h2.s)
	assert.Equal(t, sessionCost+int64(len("errors")), bytes, "the kept session")
	assert.Equal(t, idsOf(h1.j.ofKind(KindSession)), refs)
	assert.Equal(t, bytes, h2.m.own)

	// Their later spans follow the recovered decision.
	assert.False(t, h2.kept(a, spanSpec{name: "agent"}), "a kept trace's root goes on")
	reason, sent, _ := h2.sentRoot(a)
	assert.True(t, sent)
	assert.Equal(t, "errors", reason)
	assert.False(t, h2.kept(b, spanSpec{name: "late", child: true, err: true}))
	assert.Equal(t, gate.Shut, h2.m.traces[b].status, "a dropped trace stays dropped, whatever its later spans")
	for _, s := range h2.m.sent {
		assert.NotEqual(t, b, s.trace, "nothing of a dropped trace goes on")
	}
	assert.Empty(t, h2.stats.Decided, "nothing decided again")
	require.True(t, h2.kept(e, spanSpec{name: "agent", session: "s1"}))
	h2.force(e, h2.now, gate.ForceEvicted)
	assert.Equal(t, []Decided{{Trace: e, Keep: true, Reason: sampling.ReasonSession}}, h2.stats.Decided,
		"its session's later trace is kept by the recovered session")

	// A record goes once every trace of it is forgotten.
	h2.m.forget(a)
	assert.Contains(t, h2.j.live, decided[0].ID)
	h2.m.forget(b)
	assert.NotContains(t, h2.j.live, decided[0].ID)
}

// Records that cannot be read are reported by id and removed; the others are restored all the same.
func TestRecoverDecisionsErrors(t *testing.T) {
	id := pcommon.TraceID{0x81, 15: 1}
	for _, tt := range []struct {
		name    string
		kind    journal.Kind
		payload []byte
		err     string // "": none, the record left to its owner
	}{
		{"a truncated entry", KindDecided, append(id[:], 5, 'a', 'b'), "a truncated entry in its 19 bytes"},
		{"an entry without its length", KindDecided, id[:], "a truncated entry in its 16 bytes"},
		{"no entries", KindDecided, nil, "no entries"},
		{"a truncated kept session", KindSession, []byte{1, 2, 3}, "a truncated kept session"},
		{"the memory's own kinds are left to it", journal.KindSpans, []byte{1}, ""},
		{"score records are later (RecoverScores)", KindScores, []byte{1}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newOutcome(t, sampling.DecidePerSession, 0), nil)
			bad, err := h.j.Append(t.Context(), tt.kind, t0, nil, tt.payload)
			require.NoError(t, err)
			good, err := h.j.Append(t.Context(), KindDecided, t0, nil, append(id[:], "\x06errors"...))
			require.NoError(t, err)
			err = h.s.RecoverDecisions(h.j.records())
			if tt.err == "" {
				assert.NoError(t, err)
				assert.Contains(t, h.j.live, bad, "not ours")
			} else {
				assert.EqualError(t, err, fmt.Sprintf("journal record %d: %s", bad, tt.err))
				assert.NotContains(t, h.j.live, bad, "unreadable: removed")
			}
			assert.Contains(t, h.j.live, good, "kept by its trace")
			require.Len(t, h.m.traces, 1, "only the good record's trace restored")
			assert.Equal(t, gate.Open, h.m.traces[id].status)
			bytes, _ := sessionsOf(t, h.s)
			assert.Zero(t, bytes)
		})
	}
}

// A trace forgotten and decided again while its older record lived on (KindDecided deletes are
// lazy) follows its newest decision after a restart.
func TestRecoverDecisionsNewestWins(t *testing.T) {
	id := pcommon.TraceID{0x83, 15: 1}
	for _, tt := range []struct {
		name         string
		older, newer string
		status       gate.Status
		keep         bool
		reason       string
	}{
		{"kept, then dropped", "\x06errors", "\x00", gate.Shut, false, sampling.ReasonDropped},
		{"dropped, then kept", "\x00", "\x06sample", gate.Open, true, sampling.ReasonSample},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newOutcome(t, sampling.DecidePerTrace, 0), nil)
			older, err := h.j.Append(t.Context(), KindDecided, t0, nil, append(id[:], tt.older...))
			require.NoError(t, err)
			newer, err := h.j.Append(t.Context(), KindDecided, t0.Add(time.Hour), nil, append(id[:], tt.newer...))
			require.NoError(t, err)
			require.NoError(t, h.s.RecoverDecisions(h.j.records()))
			tr := h.m.traces[id]
			assert.Equal(t, tt.status, tr.status)
			st := stateOf(tr)
			assert.Equal(t, tt.keep, st.keep)
			assert.Equal(t, tt.reason, st.reason)
			assert.Equal(t, 1, tr.opens+tr.shuts, "opened or shut once")
			assert.Equal(t, t0.Add(time.Hour), tr.last)
			assert.Contains(t, h.j.live, older)
			assert.Contains(t, h.j.live, newer)
			h.checkStates()
		})
	}
}

// Score records written ahead, recovered after the decisions and the held spans: those of an
// undecided trace held again from their original time, those of a trace decided kept queued at once.
func TestRecoverScores(t *testing.T) {
	a, b := pcommon.TraceID{0x82, 15: 1}, pcommon.TraceID{0x82, 15: 2}
	h1 := newHarness(t, newOutcome(t, sampling.DecidePerTrace, 0), nil)
	_, held, _ := h1.addScores("logs", scoreLogs(score{id: "a1", name: "helpful", value: true, trace: a},
		score{id: "b1", name: "helpful", value: true, trace: b}))
	require.Equal(t, 2, held)
	require.False(t, h1.kept(b, spanSpec{name: "agent", err: true, at: 10 * time.Second}))
	require.Len(t, h1.s.TakeReadyScores("logs"), 1, "b1 released, not delivered before the kill")
	written := h1.j.ofKind(KindScores)
	require.Len(t, written, 1)

	h2 := newHarness(t, newOutcome(t, sampling.DecidePerTrace, 0), h1.j)
	h2.now = t0.Add(30 * time.Second)
	records := h1.j.records()
	require.NoError(t, h2.s.RecoverDecisions(records))
	require.NoError(t, h2.s.RecoverScores(records))

	trA := h2.m.traces[a]
	require.NotNil(t, trA)
	assert.Equal(t, gate.Pending, trA.status)
	assert.Equal(t, int64(scoreBytes), trA.held, "a1 held again")
	require.Len(t, stateOf(trA).scores, 1)
	assert.Equal(t, t0, stateOf(trA).firstAt, "from its original time")
	ds := h2.s.TakeReadyScores("any sink")
	require.Len(t, ds, 1, "b1 goes on at once")
	assert.Nil(t, ds[0].Sink, "recovered: any sink delivers it")
	assert.Equal(t, []string{"b1"}, scoreIDs(ds[0].Logs))
	assert.Equal(t, int64(scoreCost), h2.m.ready)
	h2.checkStates()

	h2.tick(a, t0.Add(testWait-time.Nanosecond))
	assert.Empty(t, h2.stats.Decided)
	h2.tick(a, t0.Add(testWait))
	assert.Equal(t, []Decided{{Trace: a, Reason: sampling.ReasonDropped, Wait: testWait}}, h2.stats.Decided,
		"decision_wait from the original time")
	assert.EqualValues(t, 1, h2.stats.ScoresDropped)
	assert.Contains(t, h2.j.live, written[0].ID, "b1 not yet delivered")
	h2.s.ScoresDelivered(ds[0])
	assert.NotContains(t, h2.j.live, written[0].ID, "removed once both are handed on")
	assert.Zero(t, h2.m.ready)

	// A record that cannot be read is reported and removed.
	bad, err := h2.j.Append(t.Context(), KindScores, t0, nil, []byte{0xff, 0xff})
	require.NoError(t, err)
	err = h2.s.RecoverScores(h2.j.records())
	assert.ErrorContains(t, err, fmt.Sprintf("journal record %d: ", bad))
	assert.NotContains(t, h2.j.live, bad)
}

// DrainScores (the logs side's shutdown) decides the undecided traces that hold score records and
// returns the sink's released ones; a trace holding only spans waits for the memory's shutdown.
func TestDrainScores(t *testing.T) {
	scored, spans := pcommon.TraceID{0x63, 15: 1}, pcommon.TraceID{0x63, 15: 2}
	h := newHarness(t, newOutcome(t, sampling.DecidePerTrace, 1), nil)
	_, held, _ := h.addScores("logs", scoreLogs(score{id: "s", name: "helpful", value: true, trace: scored}))
	require.Equal(t, 1, held)
	require.True(t, h.kept(spans, spanSpec{name: "agent"}))
	h.now = t0.Add(time.Second)
	ds := h.s.DrainScores("logs")
	require.Len(t, ds, 1)
	assert.Equal(t, []string{"s"}, scoreIDs(ds[0].Logs))
	assert.Equal(t, []Decided{{Trace: scored, Keep: true, Reason: sampling.ReasonSample, Wait: time.Second}},
		h.stats.Decided, "forced at shutdown: not early")
	assert.Equal(t, gate.Open, h.m.traces[scored].status)
	assert.Equal(t, gate.Pending, h.m.traces[spans].status, "no score record: left to the memory")
	h.checkStates()
}

// Forget removes the records of outcome sampling (kinds 6 to 8) and no other, in one call.
func TestForget(t *testing.T) {
	j := newFakeJournal(t)
	var records []journal.Record
	for _, k := range []journal.Kind{journal.KindSpans, KindDecided, journal.KindContent, KindSession,
		journal.KindDropped, KindScores, journal.KindOpenParents, journal.KindOpen, KindDecided} {
		id, err := j.Append(t.Context(), k, t0, nil, []byte{1})
		require.NoError(t, err)
		records = append(records, journal.Record{ID: id, Kind: k})
	}
	require.NoError(t, Forget(j, records))
	assert.Equal(t, [][]uint64{{2, 4, 6, 9}}, j.removes)
	assert.Len(t, j.live, 5)
	for _, rec := range j.live {
		assert.Less(t, rec.Kind, KindDecided)
	}

	j.removes = nil
	require.NoError(t, Forget(j, j.records()))
	assert.Empty(t, j.removes, "nothing of outcome sampling: no call")

	j.removeErr = errors.New("disk full")
	err := Forget(j, records[1:2])
	assert.ErrorIs(t, err, j.removeErr)
	assert.ErrorContains(t, err, "removing the journal records of outcome sampling")
}

// The per-trace invariants (doc.go 1, 2) fail on broken states.
func TestTraceStateCheck(t *testing.T) {
	scores := func(bytes ...int64) []*heldScore {
		var out []*heldScore
		for _, b := range bytes {
			out = append(out, &heldScore{bytes: b})
		}
		return out
	}
	for _, tt := range []struct {
		name     string
		st       traceState
		status   gate.Status
		gateHeld int64
		err      string
	}{
		{"undecided, holding its scores", traceState{scores: scores(10, 20)}, gate.Pending, 30, ""},
		{"decided kept", traceState{decided: true, keep: true}, gate.Open, 0, ""},
		{"decided dropped", traceState{decided: true}, gate.Shut, 0, ""},
		{"the memory counts fewer bytes", traceState{scores: scores(10, 20)}, gate.Pending, 20,
			"held score records of 30 bytes, 20 counted"},
		{"the memory counts bytes none holds", traceState{}, gate.Pending, 5, "held score records of 0 bytes, 5 counted"},
		{"decided, holding scores", traceState{decided: true, keep: true, scores: scores(10)}, gate.Open, 10,
			"score records wait for the decision of a decided trace"},
		{"decided, its gate pending", traceState{decided: true, keep: true}, gate.Pending, 0, "decided true, but the gate is 0"},
		{"undecided, its gate open", traceState{}, gate.Open, 0, "decided false, but the gate is 1"},
		{"undecided, its gate shut", traceState{}, gate.Shut, 0, "decided false, but the gate is 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.st.Check(tt.status, tt.gateHeld)
			if tt.err == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tt.err)
			}
		})
	}
}

// Refs reports each held score record's reference.
func TestTraceStateRefs(t *testing.T) {
	r1, r2 := &fakeRef{id: 1}, &fakeRef{id: 2}
	st := traceState{scores: []*heldScore{{ref: r1}, {ref: r2}, {ref: r1}}}
	got := map[gate.Ref]int{}
	st.Refs(func(r gate.Ref, n int) { got[r] += n })
	assert.Equal(t, map[gate.Ref]int{r1: 2, r2: 1}, got)
}

// The Sampler's invariant (doc.go 5) fails on broken kept sessions; it reports the references of
// kept sessions and released score records.
func TestSamplerCheck(t *testing.T) {
	k1, k2, k3 := sampling.SessionKeyOf("s1"), sampling.SessionKeyOf("s2"), sampling.SessionKeyOf("s3")
	for _, tt := range []struct {
		name    string
		corrupt func(s *Sampler)
		err     string
	}{
		{"kept in order, at most max_sessions", func(*Sampler) {}, ""},
		{"a session indexed at another's place", func(s *Sampler) { s.sessions.byKey[k1] = s.sessions.byKey[k2] },
			"a session kept twice"},
		{"out of the order they were kept", func(s *Sampler) {
			s.sessions.order.Front().Value.(*keptSession).at = t0.Add(time.Hour)
		}, "kept sessions out of the order they were kept"},
		{"more than max_sessions", func(s *Sampler) {
			s.sessions.byKey[k3] = s.sessions.order.PushBack(&keptSession{key: k3, at: t0.Add(time.Hour)})
		}, "3 kept sessions, 3 indexed, at most 2"},
		{"an index of a session not kept", func(s *Sampler) {
			s.sessions.byKey[k3] = s.sessions.byKey[k1]
		}, "2 kept sessions, 3 indexed, at most 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newOutcome(t, sampling.DecidePerSession, 0, func(c *sampling.OutcomeConfig) {
				c.MaxSessions = 2
			}), nil)
			h.s.keepSession(&keptSession{key: k1, reason: "errors", at: t0, ref: &fakeRef{m: h.m, id: 1, left: 1}})
			h.s.keepSession(&keptSession{key: k2, reason: "flagged", at: t0.Add(time.Second), ref: &fakeRef{m: h.m, id: 2, left: 1}})
			released := &fakeRef{m: h.m, id: 3, left: 4}
			h.s.queue([]*ScoreDelivery{{Sink: "logs", refs: map[gate.Ref]int{released: 4}}})
			tt.corrupt(h.s)
			bytes, err := h.s.Check(func(r gate.Ref, n int) {})
			if tt.err != "" {
				assert.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 2*sessionCost+int64(len("errors")+len("flagged")), bytes)
			assert.Equal(t, bytes, h.m.own)
			_, refs := sessionsOf(t, h.s)
			assert.Equal(t, []uint64{1, 2, 3, 3, 3, 3}, refs, "the sessions', then the released score records'")
		})
	}
}

// decidedBytes is the length of the KindDecided entry a payload starts with.
func TestDecidedBytes(t *testing.T) {
	id := make([]byte, 16)
	assert.Equal(t, 17, decidedBytes(id[:3]), "shorter than an entry: a whole empty one, found truncated")
	assert.Equal(t, 17, decidedBytes(append(id, 0)))
	assert.Equal(t, 23, decidedBytes(append(id, 6, 'e', 'r', 'r', 'o', 'r', 's', 0xff)))
}

// A restart keeps what a rule-kept trace does with a session named only after its decision: the
// reason names the rule (what it observed is not journaled), so the session is kept as without
// the restart.
func TestRuleKeptTraceKeepsALaterSessionAcrossARestart(t *testing.T) {
	id := pcommon.TraceID{0x99, 15: 1}
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprint("restart ", restart), func(t *testing.T) {
			h := newHarness(t, newOutcome(t, sampling.DecidePerSession, 0), nil)
			h.kept(id, spanSpec{name: "llm", child: true, err: true}) // rule-kept, no session yet
			if restart {
				j := h.j
				h = newHarness(t, newOutcome(t, sampling.DecidePerSession, 0), j)
				require.NoError(t, h.s.RecoverDecisions(j.records()))
			}
			h.kept(id, spanSpec{name: "agent", session: "s1", at: time.Second})
			_, kept := h.s.Outcome.SessionKept(sampling.SessionKeyOf("s1"), t0.Add(time.Minute))
			assert.True(t, kept)
			assert.Len(t, h.j.ofKind(KindSession), 1)
		})
	}
}

// Kept sessions are recovered in the order they were kept, so that the rules and the journal agree
// on which sessions are kept and until when (a session's older record can outlive its newer one:
// their deletes are lazy).
func TestRecoveredSessionsAgreeWithTheRules(t *testing.T) {
	session := func(name string, at time.Duration) journal.Record {
		key := sampling.SessionKeyOf(name)
		return journal.Record{Kind: KindSession, HeldAt: t0.Add(at),
			Payload: append(binary.BigEndian.AppendUint64(nil, uint64(key)), "errors"...)}
	}
	for _, tc := range []struct {
		name        string
		maxSessions int
		records     []journal.Record
		at          time.Duration
		kept, gone  []string
	}{
		{name: "a session kept again", maxSessions: 100, at: time.Hour + time.Minute,
			records: []journal.Record{session("s1", 0), session("s1", 30*time.Minute)}, kept: []string{"s1"}},
		{name: "beyond max_sessions", maxSessions: 2, at: 3 * time.Minute,
			records: []journal.Record{session("s1", 0), session("s2", time.Minute), session("s3", 2*time.Minute)},
			kept:    []string{"s2", "s3"}, gone: []string{"s1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOutcome(t, sampling.DecidePerSession, 0, func(c *sampling.OutcomeConfig) {
				c.MaxSessions, c.SessionKeepDuration = tc.maxSessions, time.Hour
			})
			j := newFakeJournal(t)
			for _, rec := range tc.records {
				_, err := j.Append(context.Background(), rec.Kind, rec.HeldAt, nil, rec.Payload)
				require.NoError(t, err)
			}
			h := newHarness(t, o, j)
			require.NoError(t, h.s.RecoverDecisions(j.records()))
			for _, name := range tc.kept {
				_, ok := o.SessionKept(sampling.SessionKeyOf(name), t0.Add(tc.at))
				assert.True(t, ok, "%s kept by the rules", name)
			}
			for _, name := range tc.gone {
				_, ok := o.SessionKept(sampling.SessionKeyOf(name), t0.Add(tc.at))
				assert.False(t, ok, "%s forgotten by the rules", name)
			}
			_, err := h.s.Check(func(gate.Ref, int) {})
			require.NoError(t, err)
			assert.Len(t, j.records(), len(tc.kept), "the journal keeps the sessions the rules keep")
		})
	}
}
