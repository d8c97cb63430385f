package sampling

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

type testProvider struct {
	decider *Decider
	outcome *Outcome
}

func (p testProvider) Decider() *Decider { return p.decider }
func (p testProvider) Outcome() *Outcome { return p.outcome }

// The score connectors drop scores by the rate unless the extension has an outcome section: then
// the scores follow their trace's decision (the span filter's), and the connectors keep them all.
func TestScoreDeciderFollowsTheOutcome(t *testing.T) {
	out := pcommon.TraceID{8: 0xff, 15: 1} // sampled out at 1%
	shared := NewDecider(NewRatio(0.01), NewExperimentTraces(10, 0))
	cfg := DefaultOutcomeConfig()
	cfg.Rules = []OutcomeRule{{Name: "errors", Kind: RuleError}}
	o, err := NewOutcome(cfg, NewRatio(0.01))
	require.NoError(t, err)
	id, own := "svcsampling", NewDecider(NewRatio(1), nil)
	for _, tc := range []struct {
		name     string
		ext      testProvider
		id       *string
		wantKeep bool
	}{
		{name: "own rate, no extension", id: nil, wantKeep: true},
		{name: "the extension's rate", ext: testProvider{decider: shared}, id: &id, wantKeep: false},
		{name: "outcome section: scores follow their trace", ext: testProvider{decider: shared, outcome: o}, id: &id, wantKeep: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ScoreDecider(map[string]testProvider{id: tc.ext}, tc.id, own)
			require.NoError(t, err)
			assert.Equal(t, tc.wantKeep, d.Keep(out, false, time.Unix(0, 0)))
		})
	}
}
