package tracememory

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"
)

// score is a score record of a trace: name=value (BOOLEAN), with an id.
type score struct {
	id, name string
	value    bool
	trace    pcommon.TraceID
}

func scoreLogs(scores ...score) plog.Logs {
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	for _, s := range scores {
		lr := sl.LogRecords().AppendEmpty()
		lr.SetEventName(scorerecord.EventName)
		tr := s.trace
		if tr.IsEmpty() {
			tr = testTrace
		}
		lr.SetTraceID(tr)
		lr.Attributes().PutStr(scorerecord.AttrID, s.id)
		lr.Attributes().PutStr(scorerecord.AttrName, s.name)
		lr.Attributes().PutBool(scorerecord.AttrValue, s.value)
		lr.Attributes().PutStr(scorerecord.AttrDataType, "BOOLEAN")
	}
	return ld
}

// addScores is HoldScores, then Apply, as the logs side calls them; between runs in between.
func (d *driver) addScores(sink any, ld plog.Logs, between func()) (held, dropped int, err error) {
	h, err := d.sampler.HoldScores(client.Info{}, sink, ld)
	if h == nil || err != nil {
		return 0, 0, err
	}
	if between != nil {
		between()
	}
	held, dropped = h.Apply(ld)
	return held, dropped, nil
}

// scoreSink plays the logs side: what passes at once and what the memory releases.
type scoreSink struct{ got []string }

func (s *scoreSink) add(d *driver, scores ...score) {
	d.t.Helper()
	ld := scoreLogs(scores...)
	_, _, err := d.addScores(s, ld, nil)
	require.NoError(d.t, err)
	s.collect(ld)
	s.take(d)
}

func (s *scoreSink) take(d *driver) {
	for _, sd := range d.sampler.TakeReadyScores(s) {
		s.collect(sd.Logs)
		d.sampler.ScoresDelivered(sd)
	}
}

func (s *scoreSink) collect(ld plog.Logs) {
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				id, _ := lr.Attributes().Get(scorerecord.AttrID)
				s.got = append(s.got, id.Str())
			}
		}
	}
}

// Scores follow their trace: held until the decision, released with a kept trace, dropped with a
// dropped one; after the decision they pass or drop at once; a score rule keeps the trace.
func TestScoresFollowTheirTrace(t *testing.T) {
	t.Run("dropped trace: no score, before or after the decision", func(t *testing.T) {
		d, s := newOutcomeDriver(t, withOutcome(t, 0)), &scoreSink{}
		s.add(d, score{id: "early", name: "helpful", value: true})
		require.NoError(t, d.send(sp{name: "agent", kept: true}))
		assert.Empty(t, s.got, "held for the decision")
		assert.Len(t, d.journal.spanRecords(), 2, "spans and scores written ahead")
		d.advance(testSettle)
		s.take(d)
		s.add(d, score{id: "late", name: "helpful", value: true})
		assert.Empty(t, s.got)
		assert.EqualValues(t, 2, d.scoresDropped)
		assert.Empty(t, d.journal.spanRecords())
		d.shutdown()
		d.checkInvariants(t, true, false)
	})
	t.Run("kept trace: every score, before and after the decision", func(t *testing.T) {
		d, s := newOutcomeDriver(t, withOutcome(t, 1)), &scoreSink{}
		s.add(d, score{id: "early", name: "helpful", value: true})
		require.NoError(t, d.send(sp{name: "agent", kept: true}))
		d.advance(testSettle)
		s.take(d)
		assert.Equal(t, []string{"early"}, s.got)
		s.add(d, score{id: "late", name: "helpful", value: true})
		assert.Equal(t, []string{"early", "late"}, s.got)
		assert.Empty(t, d.journal.spanRecords())
		d.shutdown()
		d.checkInvariants(t, true, false)
	})
	t.Run("a score rule keeps the trace at once", func(t *testing.T) {
		d, s := newOutcomeDriver(t, withOutcome(t, 0)), &scoreSink{}
		require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "llm", parent: "agent", kept: true}))
		s.add(d, score{id: "ok", name: "helpful", value: true})
		assert.Empty(t, d.tree())
		s.add(d, score{id: "flag", name: "helpful", value: false})
		d.deliver(d.m.TakeReady()) // the releaser runs
		assert.Equal(t, map[string]string{"agent": "", "llm": "agent"}, d.tree())
		assert.Equal(t, "flagged", d.reasonOf("agent"))
		assert.ElementsMatch(t, []string{"ok", "flag"}, s.got)
		d.shutdown()
		d.checkInvariants(t, true, false)
	})
	t.Run("scores of a trace without spans: decided at decision_wait", func(t *testing.T) {
		d, s := newOutcomeDriver(t, withOutcome(t, 1)), &scoreSink{}
		s.add(d, score{id: "alone", name: "helpful", value: true})
		d.advance(testDecisionWait - time.Second)
		s.take(d)
		assert.Empty(t, s.got)
		d.advance(time.Second)
		s.take(d)
		assert.Equal(t, []string{"alone"}, s.got)
	})
}

// A SIGKILL while scores wait: recovery holds them again (observed again) and they follow the
// decision the run without the kill makes.
func TestHeldScoresSurviveRestart(t *testing.T) {
	kept, dropped := pcommon.TraceID{0xd2, 15: 1}, pcommon.TraceID{0xd2, 8: 0xff, 15: 2}
	d, s := newOutcomeDriver(t, withOutcome(t, 0.5)), &scoreSink{}
	require.NoError(t, d.send(sp{name: "a", kept: true, trace: kept}, sp{name: "b", kept: true, trace: dropped}))
	s.add(d, score{id: "k", name: "helpful", value: true, trace: kept}, score{id: "d", name: "helpful", value: true, trace: dropped},
		score{id: "flag", name: "helpful", value: false, trace: pcommon.TraceID{0xd2, 8: 0xff, 15: 3}})
	flagged := s.got
	assert.Equal(t, []string{"flag"}, flagged, "a score rule decided its trace (no span yet) at once")
	require.Equal(t, 1, d.journal.kinds()[outcome.KindScores])
	d.kill()
	s.take(d)
	d.advance(testSettle)
	s.take(d)
	// The record of the call holds all three until each is handed on: "flag" goes again (at least
	// once; its id makes it one score on the platform).
	assert.Equal(t, []string{"flag", "flag", "k"}, s.got, "the kept trace's score, the dropped one's not")
	d.shutdown()
	d.checkInvariants(t, true, false)
	assert.Empty(t, d.journal.spanRecords())
}

// A score record of a decided trace is planned to pass (no copy written ahead); when its trace is
// forgotten before the apply (by the releaser, or evicted by the room the call's own copies need),
// the record is not held under a journal record that does not contain it: its trace is decided
// again at once and the record goes on with the call, so a SIGKILL after the call loses nothing.
func TestScoreOfATraceForgottenBetweenAPlanAndItsApply(t *testing.T) {
	decided, other := pcommon.TraceID{0xd3, 15: 1}, pcommon.TraceID{0xd3, 15: 2}
	for _, tc := range []struct {
		name   string
		forget func(d *driver) (between func()) // staged before the plan, or between it and the apply
	}{
		{name: "forgotten by the releaser", forget: func(d *driver) func() {
			return func() { d.advance(testConfig(d.clock).RememberDuration) }
		}},
		{name: "evicted for the room of the call's copies", forget: func(d *driver) func() {
			d.advance(testConfig(d.clock).RememberDuration - time.Second) // the oldest idle trace
			d.m.cfg.MemoryLimitBytes = d.m.Bytes() - 1                    // the call's Enforce evicts it
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, s := newOutcomeDriver(t, withOutcome(t, 1)), &scoreSink{}
			spans := []sp{{name: "agent", kept: true, err: true, trace: decided}}
			for i := range 60 { // records of dropped spans: the trace is worth evicting for the room
				spans = append(spans, sp{name: fmt.Sprint("http ", i), parent: "agent", trace: decided})
			}
			require.NoError(t, d.send(spans...))
			require.Equal(t, map[string]string{"agent": ""}, d.tree(), "kept by its rule at once")
			late := scoreLogs(score{id: "late", name: "helpful", value: true, trace: decided},
				score{id: "undecided", name: "helpful", value: true, trace: other})
			_, _, err := d.addScores(s, late, tc.forget(d))
			require.NoError(t, err)
			s.collect(late)
			s.take(d)
			d.kill()
			d.advance(testDecisionWait)
			s.take(d)
			assert.Contains(t, s.got, "late", "acknowledged: delivered, not lost with the process")
			assert.Contains(t, s.got, "undecided")
			d.shutdown()
			d.checkInvariants(t, true, false)
		})
	}
}
