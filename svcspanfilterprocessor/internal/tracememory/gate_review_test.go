package tracememory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"
)

// The review of the extraction of outcome sampling (issue 39) found five paths where the gate
// changed behaviour; each case stages one and fails without its fix.

// A score record of a decided trace does not make the trace active: a kept span held for its
// parent still goes on at wait_duration, pointing at the parent that never came.
func TestScoreOfADecidedTraceLeavesItsWaits(t *testing.T) {
	d, s := newOutcomeDriver(t, withOutcome(t, 0)), &scoreSink{}
	require.NoError(t, d.send(sp{name: "llm", parent: "agent", kept: true, err: true}))
	require.True(t, d.decisions()[testTrace].Keep, "kept by its rule at once, held for its parent")
	d.advance(4 * time.Second)
	s.add(d, score{id: "late", name: "helpful", value: true})
	d.advance(2 * time.Second) // wait_duration (5 s) since the span, not since the score
	assert.Equal(t, map[string]string{"llm": "<?>"}, d.tree())
	assert.Equal(t, []string{"late"}, s.got, "the score of a kept trace passes")
	d.shutdown()
	d.checkInvariants(t, true, false)
}

// The logs side's shutdown decides only the traces that hold score records: a trace whose spans
// alone wait is still decided on what comes, here a failing span after it.
func TestDrainScoresLeavesTracesWithoutScores(t *testing.T) {
	d := newOutcomeDriver(t, withOutcome(t, 0))
	require.NoError(t, d.send(sp{name: "agent", kept: true}))
	assert.Empty(t, d.sampler.DrainScores(&scoreSink{}))
	require.NoError(t, d.send(sp{name: "llm", parent: "agent", kept: true, err: true}))
	assert.Equal(t, map[string]string{"agent": "", "llm": "agent"}, d.tree(), "kept by the error, whole")
	assert.Equal(t, "errors", d.decisions()[testTrace].Reason)
	d.shutdown()
	d.checkInvariants(t, true, false)
}

// Recovery observes the score records written ahead before the budget forces decisions: a flagging
// score that arrived before the kill keeps its trace though max_held_mib is now smaller.
func TestRecoveredScoresDecideBeforeTheBudget(t *testing.T) {
	d := newOutcomeDriver(t, withOutcome(t, 0))
	require.NoError(t, d.send(sp{name: "agent", kept: true}))
	_, err := d.sampler.HoldScores(client.Info{}, &scoreSink{}, scoreLogs(score{id: "flag", name: "helpful", value: false}))
	require.NoError(t, err) // written ahead, killed before its apply
	d.mutate = func(c *Config) { c.MaxGatedBytes = 1 }
	d.kill()
	dc := d.decisions()[testTrace]
	assert.True(t, dc.Keep, "decided by its recovered score, not forced by the budget")
	assert.Equal(t, "flagged", dc.Reason)
	d.shutdown()
	d.checkInvariants(t, true, false)
}

// A record of outcome sampling that cannot be read is removed at recovery, as the memory's are.
func TestUnreadableOutcomeRecordsAreRemoved(t *testing.T) {
	d := newOutcomeDriver(t, withOutcome(t, 0))
	ctx, now := context.Background(), d.clock.Now()
	_, err := d.journal.Append(ctx, outcome.KindScores, now, nil, []byte{0xff, 0xff, 0xff})
	require.NoError(t, err)
	_, err = d.journal.Append(ctx, outcome.KindSession, now, nil, []byte{1, 2, 3})
	require.NoError(t, err)
	d.restarted = true
	d.m = d.newMemory(testConfigJournaled(d), d.journal, nil)
	require.Error(t, d.recover(d.m, d.journal.records()))
	assert.Empty(t, d.journal.records(), "unreadable: removed, not read again at every start")
}

// Two decisions of one trace live in the journal (the trace was forgotten and decided again while
// its first record lived on for another trace): the newest is followed after a restart.
func TestNewestDecisionOfATraceIsRecovered(t *testing.T) {
	entry := func(reason string) []byte {
		return append(append(testTrace[:], byte(len(reason))), reason...)
	}
	for _, tc := range []struct {
		name          string
		older, newer  string
		laterNotDrops bool
	}{
		{name: "kept, then dropped", older: "errors", newer: "", laterNotDrops: false},
		{name: "dropped, then kept", older: "", newer: "errors", laterNotDrops: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newOutcomeDriver(t, withOutcome(t, 0))
			ctx, now := context.Background(), d.clock.Now()
			for _, e := range [][]byte{entry(tc.older), entry(tc.newer)} {
				_, err := d.journal.Append(ctx, outcome.KindDecided, now, nil, e)
				require.NoError(t, err)
			}
			d.kill()
			require.NoError(t, d.send(sp{name: "step", parent: "agent", kept: true}))
			d.shutdown()
			_, delivered := d.tree()["step"]
			assert.Equal(t, tc.laterNotDrops, delivered)
			checkCounts(t, d.m) // (the trees' oracle knows only decisions made in the run)
		})
	}
}

func testConfigJournaled(d *driver) Config {
	cfg := testConfig(d.clock)
	cfg.Journaled = true
	d.mutate(&cfg)
	return cfg
}
