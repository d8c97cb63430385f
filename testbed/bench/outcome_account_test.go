package bench

import (
	"reflect"
	"testing"
)

func TestTallyOutcome(t *testing.T) {
	// Two sessions: s1 has a failing trace and a costly one, s2 a flagged trace and a plain one.
	truth := []OutcomeTruth{
		{TraceID: "f", SessionID: "s1", Failing: true, AckedGenAISpans: 3},
		{TraceID: "c", SessionID: "s1", Costly: true, AckedGenAISpans: 4},
		{TraceID: "g", SessionID: "s2", Flagged: true, AckedGenAISpans: 2},
		{TraceID: "p", SessionID: "s2", AckedGenAISpans: 5},
	}
	tests := []struct {
		name string
		got  map[string]OutcomeDelivery
		want OutcomeTally
	}{
		{
			name: "everything whole",
			got:  map[string]OutcomeDelivery{"f": {Spans: 3}, "c": {Spans: 4}, "g": {Spans: 2, Scores: 1}, "p": {Spans: 5}},
			want: OutcomeTally{Traces: 4, Failing: 1, Flagged: 1, Costly: 1, FailingWhole: 1, FlaggedWhole: 1, CostlyWhole: 1,
				Rest: 1, RestWhole: 1, Delivered: 4, Whole: 4, Sessions: 2, InputSpans: 20, DeliveredSpans: 14},
		},
		{
			name: "named traces whole, the rest dropped: s2 has a hole",
			got:  map[string]OutcomeDelivery{"f": {Spans: 3}, "c": {Spans: 4}, "g": {Spans: 2}},
			want: OutcomeTally{Traces: 4, Failing: 1, Flagged: 1, Costly: 1, FailingWhole: 1, FlaggedWhole: 1, CostlyWhole: 1,
				Rest: 1, Delivered: 3, Whole: 3, Sessions: 2, SessionsWithHoles: 1, InputSpans: 20, DeliveredSpans: 9},
		},
		{
			name: "a torn costly trace, a dropped flagged trace whose score came, duplicates not counted twice",
			got:  map[string]OutcomeDelivery{"f": {Spans: 3}, "c": {Spans: 2}, "g": {Scores: 1}, "p": {Spans: 7}},
			want: OutcomeTally{Traces: 4, Failing: 1, Flagged: 1, Costly: 1, FailingWhole: 1,
				Rest: 1, RestWhole: 1, Delivered: 3, Whole: 2, Torn: 1, Sessions: 2, SessionsWithHoles: 2, InputSpans: 20, DeliveredSpans: 10,
				ScoresOfUndelivered: 1},
		},
		{
			name: "nothing delivered: no session has a hole",
			got:  map[string]OutcomeDelivery{},
			want: OutcomeTally{Traces: 4, Failing: 1, Flagged: 1, Costly: 1, Rest: 1, Sessions: 2, InputSpans: 20},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TallyOutcome(truth, tt.got, 20)
			got.TornIDs, got.MissedNamedIDs, got.StrayScoreIDs = nil, nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TallyOutcome:\n got  %+v\n want %+v", got, tt.want)
			}
		})
	}
}

func TestTallyOutcomeNamesTheTraces(t *testing.T) {
	truth := []OutcomeTruth{
		{TraceID: "f", SessionID: "s", Failing: true, Costly: true, AckedGenAISpans: 3},
		{TraceID: "p", SessionID: "s", AckedGenAISpans: 2},
	}
	got := TallyOutcome(truth, map[string]OutcomeDelivery{"f": {Spans: 1}, "p": {Scores: 2}}, 5)
	if len(got.MissedNamedIDs) != 1 || got.MissedNamedIDs[0] != "f (failing+costly; 1 of 3 spans)" {
		t.Errorf("MissedNamedIDs = %q", got.MissedNamedIDs)
	}
	if len(got.TornIDs) != 1 || got.TornIDs[0] != "f (1 of 3 spans)" {
		t.Errorf("TornIDs = %q", got.TornIDs)
	}
	if len(got.StrayScoreIDs) != 1 || got.StrayScoreIDs[0] != "p" {
		t.Errorf("StrayScoreIDs = %q", got.StrayScoreIDs)
	}
}

func TestKillLoss(t *testing.T) {
	truth := []OutcomeTruth{
		{TraceID: "f", Failing: true, AckedGenAISpans: 3}, // named: must be delivered
		{TraceID: "k", AckedGenAISpans: 4},                // delivered without the kill
		{TraceID: "d", AckedGenAISpans: 5},                // dropped without the kill
	}
	baseline := map[string]bool{"k": true}
	tests := []struct {
		name                string
		got                 map[string]OutcomeDelivery
		wantTraces, wantSps int
	}{
		{"nothing lost", map[string]OutcomeDelivery{"f": {Spans: 3}, "k": {Spans: 4}}, 0, 0},
		{"a dropped trace is no loss", map[string]OutcomeDelivery{"f": {Spans: 3}, "k": {Spans: 4}, "d": {Spans: 1}}, 0, 0},
		{"the named trace lost, the baseline's torn", map[string]OutcomeDelivery{"k": {Spans: 1}}, 2, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			traces, spans := KillLoss(truth, baseline, tt.got)
			if traces != tt.wantTraces || spans != tt.wantSps {
				t.Errorf("KillLoss = %d traces, %d spans; want %d, %d", traces, spans, tt.wantTraces, tt.wantSps)
			}
		})
	}
}
