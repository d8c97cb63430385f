package tracememory

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/pkg/svcattr"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"
)

const (
	testDecisionWait = time.Minute
	testSettle       = 5 * time.Second
)

// withOutcome is outcome sampling "errors + rate of the rest", decided per trace.
func withOutcome(t testing.TB, rate float64) *sampling.Outcome {
	return withOutcomePer(t, sampling.DecidePerTrace, rate)
}

func withOutcomePer(t testing.TB, per string, rate float64) *sampling.Outcome {
	cfg := sampling.DefaultOutcomeConfig()
	cfg.DecidePer = per
	no := false
	cfg.Rules = []sampling.OutcomeRule{{Name: "errors", Kind: sampling.RuleError},
		{Name: "flagged", Kind: sampling.RuleScore, ScoreName: "helpful", Boolean: &no}}
	cfg.DecisionWait, cfg.SettleDuration = testDecisionWait, testSettle
	o, err := sampling.NewOutcome(cfg, sampling.NewRatio(rate))
	require.NoError(t, err)
	return o
}

// decisions are the decisions the driver observed, by trace.
func (d *driver) decisions() map[pcommon.TraceID]outcome.Decided {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[pcommon.TraceID]outcome.Decided{}
	for _, dc := range d.decided {
		out[dc.Trace] = dc
	}
	return out
}

func (d *driver) decidedEarly() (n int) {
	for _, dc := range d.decided {
		if dc.Early {
			n++
		}
	}
	return n
}

// reasonOf is the reason attribute the delivered span carries, "" for none.
func (d *driver) reasonOf(name string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.delivered {
		if s.Name() == name {
			if v, ok := s.Attributes().Get(outcome.ReasonAttribute); ok {
				return v.Str()
			}
		}
	}
	return ""
}

// Each trigger decides the trace: a rule at once, the settled root, decision_wait, shutdown.
func TestDecisionTriggers(t *testing.T) {
	t.Run("a rule matched: kept at once", func(t *testing.T) {
		d := newOutcomeDriver(t, withOutcome(t, 0))
		require.NoError(t, d.send(sp{name: "llm", parent: "agent", kept: true}))
		require.Empty(t, d.tree(), "an undecided trace's spans wait")
		require.NoError(t, d.send(sp{name: "agent", kept: true, err: true}))
		assert.Equal(t, map[string]string{"agent": "", "llm": "agent"}, d.tree(), "decided by the rule: whole, at once")
		assert.Equal(t, "errors", d.reasonOf("agent"), "the root carries the reason")
		assert.Empty(t, d.reasonOf("llm"))
		assert.Equal(t, outcome.Decided{Trace: testTrace, Keep: true, Reason: "errors"}, d.decisions()[testTrace])
		d.shutdown()
		d.checkInvariants(t, true, false)
		assert.Empty(t, d.journal.spanRecords())
	})
	t.Run("root arrived, settled: dropped by the rate, nothing delivered", func(t *testing.T) {
		d := newOutcomeDriver(t, withOutcome(t, 0))
		require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "llm", parent: "agent", kept: true}, sp{name: "http", parent: "agent"}))
		require.NotEmpty(t, d.journal.spanRecords(), "held for the decision: written ahead")
		d.advance(testSettle - time.Second)
		assert.Empty(t, d.decisions(), "not settled yet")
		d.advance(time.Second)
		assert.Equal(t, outcome.Decided{Trace: testTrace, Keep: false, Reason: "dropped", Wait: testSettle}, d.decisions()[testTrace])
		assert.Empty(t, d.tree())
		assert.EqualValues(t, 2, d.stats.Discarded)
		assert.Empty(t, d.journal.spanRecords(), "the dropped spans' record is done")
		require.NoError(t, d.send(sp{name: "late", parent: "agent", kept: true, err: true}))
		d.shutdown()
		assert.Empty(t, d.tree(), "later spans follow the decision, even one a rule would match")
		d.checkInvariants(t, true, false)
	})
	t.Run("root arrived, settled: kept by the rate", func(t *testing.T) {
		d := newOutcomeDriver(t, withOutcome(t, 1))
		require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "llm", parent: "agent", kept: true}))
		d.advance(testSettle)
		assert.Equal(t, map[string]string{"agent": "", "llm": "agent"}, d.tree())
		assert.Equal(t, "sample", d.reasonOf("agent"))
		d.shutdown()
		d.checkInvariants(t, true, false)
	})
	t.Run("no root: spans keep arriving; decision_wait decides", func(t *testing.T) {
		d := newOutcomeDriver(t, withOutcome(t, 0))
		for i := range int(testDecisionWait/testSettle) + 2 {
			require.NoError(t, d.send(sp{name: "llm" + string(rune('a'+i)), parent: "agent", kept: true}))
			if len(d.decisions()) > 0 {
				break
			}
			d.advance(testSettle)
		}
		require.Equal(t, outcome.Decided{Trace: testTrace, Keep: false, Reason: "dropped", Wait: testDecisionWait}, d.decisions()[testTrace])
		d.shutdown()
		d.checkInvariants(t, true, false)
	})
	t.Run("shutdown: decided on what arrived, kept spans delivered", func(t *testing.T) {
		d := newOutcomeDriver(t, withOutcome(t, 1))
		require.NoError(t, d.send(sp{name: "llm", parent: "agent", kept: true}))
		d.shutdown()
		assert.Equal(t, map[string]string{"llm": "<?>"}, d.tree(), "rule 1 once kept: it points at its open parent")
		assert.Equal(t, "sample", d.decisions()[testTrace].Reason)
		d.checkInvariants(t, true, false)
	})
	t.Run("experiment: kept whatever the rate", func(t *testing.T) {
		d := newOutcomeDriver(t, withOutcome(t, 0))
		require.NoError(t, d.send(sp{name: "agent", kept: true, experiment: true}))
		d.advance(testSettle)
		assert.Equal(t, "experiment", d.reasonOf("agent"))
		d.shutdown()
		d.checkInvariants(t, true, false)
	})
}

// An agent run longer than decision_wait is decided on its beginning; its later spans follow, and
// the delivered trace is one tree.
func TestLongAgentRunFollowsItsDecision(t *testing.T) {
	for _, rate := range []float64{0, 1} {
		d := newOutcomeDriver(t, withOutcome(t, rate))
		require.NoError(t, d.send(sp{name: "step 1", parent: "agent", kept: true}, sp{name: "tool 1", parent: "step 1", kept: true}))
		d.advance(testDecisionWait)
		require.Len(t, d.decisions(), 1, "decided on its beginning")
		require.NoError(t, d.send(sp{name: "step 2", parent: "agent", kept: true, err: true},
			sp{name: "http", parent: "step 2"}, sp{name: "tool 2", parent: "http", kept: true}))
		d.advance(2 * time.Second)
		require.NoError(t, d.send(sp{name: "agent", kept: true}))
		d.shutdown()
		if rate == 1 {
			assert.Equal(t, map[string]string{"agent": "", "step 1": "agent", "tool 1": "step 1",
				"step 2": "agent", "tool 2": "step 2"}, d.tree(), "kept: every span below its nearest kept ancestor")
			assert.Equal(t, "sample", d.reasonOf("agent"), "the root, arriving last, carries the reason")
		} else {
			assert.Empty(t, d.tree(), "dropped: no later span goes on, not even the failing one")
		}
		d.checkInvariants(t, true, false)
		assert.Empty(t, d.journal.spanRecords())
	}
}

// Over max_held bytes, the oldest undecided trace is decided on what arrived, never dropped undecided.
func TestDecisionBudgetDecidesTheOldest(t *testing.T) {
	old, young := pcommon.TraceID{0xb1, 15: 1}, pcommon.TraceID{0xb1, 15: 2}
	d := newOutcomeDriver(t, withOutcome(t, 1), func(c *Config) { c.MaxGatedBytes = 3000 })
	require.NoError(t, d.send(sp{name: "old", kept: true, trace: old, big: 2000}))
	d.advance(time.Second)
	assert.Empty(t, d.decisions())
	require.NoError(t, d.send(sp{name: "young", kept: true, trace: young, big: 2000}))
	d.deliver(d.m.TakeReady()) // the releaser runs
	assert.Equal(t, map[string]string{"old": ""}, d.tree(), "the oldest decided early, kept by the rate")
	assert.EqualValues(t, 1, d.decidedEarly())
	assert.LessOrEqual(t, d.m.GatedBytes(), int64(3000))
	d.shutdown()
	d.checkInvariants(t, true, false)
}

// A SIGKILL while traces wait for their decision: recovery re-observes the held spans and decides
// as the run without the kill does, with the original times.
func TestRestartMidWaitDecidesTheSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 2))
	var traces [][]sp
	for i := range 40 {
		var id pcommon.TraceID
		for j := range id {
			id[j] = byte(rng.IntN(256))
		}
		n := "t" + string(rune('A'+i%26)) + string(rune('a'+i/26))
		spans := []sp{{name: n + " llm", parent: n + " agent", kept: true, trace: id, err: i%7 == 0}}
		if i%3 != 0 { // a third have no root yet: decided by decision_wait
			spans = append(spans, sp{name: n + " agent", kept: true, trace: id}, sp{name: n + " http", parent: n + " agent", trace: id})
		}
		traces = append(traces, spans)
	}
	run := func(kill bool) (map[pcommon.TraceID]outcome.Decided, map[string]string) {
		d := newOutcomeDriver(t, withOutcome(t, 0.5))
		d.everyStep(t)
		for _, spans := range traces {
			require.NoError(t, d.send(spans...))
		}
		d.advance(2 * time.Second)
		if kill {
			d.kill()
		}
		d.advance(testDecisionWait)
		d.shutdown()
		d.checkInvariants(t, true, false)
		assert.Empty(t, d.journal.spanRecords())
		return d.decisions(), d.tree()
	}
	wantDecided, wantTree := run(false)
	gotDecided, gotTree := run(true)
	require.Len(t, wantDecided, len(traces))
	kept := 0
	for id, want := range wantDecided {
		got := gotDecided[id]
		assert.Equal(t, want.Keep, got.Keep)
		assert.Equal(t, want.Reason, got.Reason)
		if want.Keep {
			kept++
		}
	}
	assert.Equal(t, wantTree, gotTree, "the same spans delivered, in the same trees")
	assert.Greater(t, kept, 5)
	assert.Less(t, kept, len(traces)-5)
}

// Without an outcome section nothing waits for a decision (the existing tests show the rest).
func TestWithoutOutcomeNothingWaitsForADecision(t *testing.T) {
	d := newDriver(t, nil)
	require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "llm", parent: "agent", kept: true}))
	assert.Equal(t, map[string]string{"agent": "", "llm": "agent"}, d.tree())
	assert.Empty(t, d.journal.spanRecords())
	assert.Empty(t, d.decisions())
}

// A trace decided kept whose spans went on is journaled (KindDecided): after a SIGKILL its later
// spans follow the decision, though the rate alone would drop them; the record goes with the trace.
func TestKeptDecisionSurvivesRestart(t *testing.T) {
	d := newOutcomeDriver(t, withOutcome(t, 0))
	require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "step 1", parent: "agent", kept: true, err: true}))
	require.Equal(t, map[string]string{"agent": "", "step 1": "agent"}, d.tree())
	require.Equal(t, 1, d.journal.kinds()[outcome.KindDecided])
	d.kill()
	require.NoError(t, d.send(sp{name: "step 2", parent: "agent", kept: true}))
	d.advance(testDecisionWait)
	assert.Equal(t, map[string]string{"agent": "", "step 1": "agent", "step 2": "agent"}, d.tree(), "the later span follows the kept decision")
	d.shutdown()
	d.checkInvariants(t, true, false)
	d.advance(testConfig(d.clock).LateParentWindow + time.Second) // "agent" is an open parent of step 2
	assert.Zero(t, d.journal.kinds()[outcome.KindDecided], "forgotten with its trace")
}

// Session mode: a rule keeps its session's later traces, also after a SIGKILL (KindSession).
func TestKeptSessionSurvivesRestart(t *testing.T) {
	first, second, other := pcommon.TraceID{0xc1, 15: 1}, pcommon.TraceID{0xc1, 15: 2}, pcommon.TraceID{0xc1, 15: 3}
	d := newOutcomeDriver(t, withOutcomePer(t, sampling.DecidePerSession, 0))
	require.NoError(t, d.send(sp{name: "turn 1", kept: true, err: true, session: "conv-1", trace: first}))
	require.Equal(t, 1, d.journal.kinds()[outcome.KindSession])
	d.kill()
	require.NoError(t, d.send(sp{name: "turn 2", kept: true, session: "conv-1", trace: second},
		sp{name: "elsewhere", kept: true, session: "conv-2", trace: other}))
	d.advance(testSettle)
	assert.Equal(t, map[string]string{"turn 1": "", "turn 2": ""}, d.tree(), "the flagged session's later turn is kept, another session is not")
	assert.Equal(t, "session", d.decisions()[second].Reason)
	d.advance(time.Hour + time.Second) // session_keep_duration
	assert.Zero(t, d.journal.kinds()[outcome.KindSession], "the session's record goes when its keep ends")
	d.shutdown()
	d.checkInvariants(t, true, false)
}

// The reason on the root of a kept trace is read as the platform reads that span's metadata: on a
// span of the new svc SDKs every value is JSON text, so the reason is a JSON string there.
func TestReasonEncodedForNewSDKSpans(t *testing.T) {
	for _, tc := range []struct {
		name, scope, version, want string
	}{
		{name: "svc-sdk python 5", scope: svcattr.SDKScopeName, version: "5.1.0", want: `"errors"`},
		{name: "svc-sdk python 4", scope: svcattr.SDKScopeName, version: "4.2.0", want: "errors"},
		{name: "other instrumentation", scope: "openinference.instrumentation.openai", version: "0.1.30", want: "errors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newOutcomeDriver(t, withOutcome(t, 0))
			td, decisions := buildBatch([]sp{{name: "agent", kept: true, err: true}})
			rs := td.ResourceSpans().At(0)
			rs.Resource().Attributes().PutStr(svcattr.TelemetrySDKLanguage, "python")
			rs.ScopeSpans().At(0).Scope().SetName(tc.scope)
			rs.ScopeSpans().At(0).Scope().SetVersion(tc.version)
			adm, err := d.m.Admit(client.Info{}, td, decisions)
			require.NoError(t, err)
			require.True(t, adm.Pass)
			v, ok := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().Get(outcome.ReasonAttribute)
			require.True(t, ok)
			assert.Equal(t, tc.want, v.Str())
		})
	}
}

// A root whose dropped parent arrives after it (it waited for that parent) is the trace's root
// too: the trace settles without waiting for decision_wait.
func TestRootSettledByItsDroppedParentSettlesTheTrace(t *testing.T) {
	d := newOutcomeDriver(t, withOutcome(t, 1))
	require.NoError(t, d.send(sp{name: "llm", parent: "agent", kept: true}, sp{name: "agent", parent: "POST /chat", kept: true}))
	require.NoError(t, d.send(sp{name: "POST /chat"}))
	d.advance(testSettle)
	assert.Equal(t, map[string]string{"agent": "", "llm": "agent"}, d.tree())
	assert.Equal(t, "sample", d.reasonOf("agent"))
	assert.Equal(t, testSettle, d.decisions()[testTrace].Wait)
	d.shutdown()
	d.checkInvariants(t, true, false)
}

// Session mode: a failing call decides its trace before the agent span that names the session
// arrives; the session is kept once it does, and its other turns follow.
func TestSessionLearnedAfterTheRuleMatched(t *testing.T) {
	turn1, turn2 := pcommon.TraceID{0xc2, 15: 1}, pcommon.TraceID{0xc2, 15: 2}
	d := newOutcomeDriver(t, withOutcomePer(t, sampling.DecidePerSession, 0))
	require.NoError(t, d.send(sp{name: "llm 1", parent: "agent 1", kept: true, err: true, trace: turn1}))
	require.NoError(t, d.send(sp{name: "agent 1", kept: true, session: "conv", trace: turn1},
		sp{name: "agent 2", kept: true, session: "conv", trace: turn2}))
	d.advance(testSettle)
	assert.Equal(t, map[string]string{"agent 1": "", "llm 1": "agent 1", "agent 2": ""}, d.tree())
	assert.Equal(t, "session", d.decisions()[turn2].Reason)
	assert.Equal(t, 1, d.journal.kinds()[outcome.KindSession])
	d.shutdown()
	d.checkInvariants(t, true, false)
}

// A call planned while its trace was undecided (its span written ahead to wait for the decision)
// applies after another call decided the trace: kept, the span goes on at once; dropped, it is
// dropped; either way its record of the call is done and nothing is delivered twice after a kill.
func TestTraceDecidedBetweenAPlanAndItsApply(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(map[bool]string{true: "kept", false: "dropped"}[keep], func(t *testing.T) {
			d := newOutcomeDriver(t, withOutcome(t, 0))
			require.NoError(t, d.send(sp{name: "agent", kept: true}))
			betweenPlanAndApply(t, func() {
				if keep {
					require.NoError(t, d.send(sp{name: "failed call", parent: "agent", kept: true, err: true}))
					return
				}
				d.advance(testSettle) // the root settled: dropped by the rate
			})
			require.NoError(t, d.send(sp{name: "late call", parent: "agent", kept: true}))
			assert.Zero(t, d.m.HeldSpans())
			assert.Empty(t, d.journal.spanRecords(), "the call's record is done: nothing of it is held")
			d.kill()
			d.advance(time.Minute)
			d.shutdown()
			if keep {
				assert.Equal(t, map[string]string{"agent": "", "failed call": "agent", "late call": "agent"}, d.tree())
			} else {
				assert.Empty(t, d.tree())
			}
			d.checkInvariants(t, true, false)
		})
	}
}

// Session mode: kept sessions are one per session (one journal record each: its latest keep), at
// most max_sessions (the least recently kept forgotten first, with its record), counted in the
// memory's bytes until session_keep_duration ends.
func TestKeptSessionsAreBounded(t *testing.T) {
	cfg := sampling.DefaultOutcomeConfig()
	cfg.DecidePer, cfg.MaxSessions = sampling.DecidePerSession, 2
	cfg.Rules = []sampling.OutcomeRule{{Name: "errors", Kind: sampling.RuleError}}
	cfg.DecisionWait, cfg.SettleDuration = testDecisionWait, testSettle
	o, err := sampling.NewOutcome(cfg, sampling.NewRatio(0))
	require.NoError(t, err)
	d := newOutcomeDriver(t, o)
	failing := func(i int, session string) sp {
		return sp{name: fmt.Sprint("turn ", i), kept: true, err: true, session: session,
			trace: pcommon.TraceID{0xc3, 15: byte(i)}}
	}
	for i := range 3 {
		require.NoError(t, d.send(failing(i, "conv-1")))
		d.advance(time.Second)
	}
	assert.Equal(t, 1, d.journal.kinds()[outcome.KindSession], "three kept traces of one session: one record")
	require.NoError(t, d.send(failing(3, "conv-2")))
	d.advance(time.Second)
	require.NoError(t, d.send(failing(4, "conv-3")))
	assert.Equal(t, 2, d.journal.kinds()[outcome.KindSession], "max_sessions: the least recently kept goes")
	d.advance(time.Minute) // remember_duration: the traces are forgotten, the sessions stay
	assert.Zero(t, d.m.Traces())
	assert.Positive(t, d.m.Bytes(), "the kept sessions count in the memory's bytes")
	checkCounts(t, d.m)
	d.advance(time.Hour) // session_keep_duration
	assert.Zero(t, d.journal.kinds()[outcome.KindSession])
	assert.Zero(t, d.m.Bytes())
	d.shutdown()
	d.checkInvariants(t, true, false)
}

// A trace decided dropped is journaled as long as it is remembered, as a kept one is: after a
// SIGKILL its late failing span follows the decision (a span alone would be a torn trace).
func TestDroppedDecisionSurvivesRestart(t *testing.T) {
	d := newOutcomeDriver(t, withOutcome(t, 0))
	require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "step 1", parent: "agent", kept: true}))
	d.advance(testSettle)
	require.False(t, d.decisions()[testTrace].Keep, "dropped by the rate")
	require.Equal(t, 1, d.journal.kinds()[outcome.KindDecided])
	d.kill()
	require.NoError(t, d.send(sp{name: "step 2", parent: "agent", kept: true, err: true}))
	d.advance(testDecisionWait)
	d.shutdown()
	assert.Empty(t, d.tree(), "the late failing span follows the dropped decision")
	d.checkInvariants(t, true, false)
	d.advance(testConfig(d.clock).RememberDuration)
	assert.Zero(t, d.journal.kinds()[outcome.KindDecided], "forgotten with its trace")
}
