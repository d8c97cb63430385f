package bench

import (
	"fmt"
	"strings"
)

// OutcomeTruth is what the workload generator says of one trace: which rules must keep it, its
// session, and how many of its GenAI spans (those every build delivers when it keeps the trace)
// the collector acknowledged.
type OutcomeTruth struct {
	TraceID, SessionID       string
	Failing, Flagged, Costly bool
	// AckedGenAISpans counts the trace's GenAI spans in requests the collector acknowledged.
	AckedGenAISpans int
}

// Named tells that an outcome rule names the trace: the gateway must deliver it whole.
func (t OutcomeTruth) Named() bool { return t.Failing || t.Flagged || t.Costly }

// OutcomeDelivery is what the platform holds of one trace: its distinct acknowledged GenAI
// spans, and its scores.
type OutcomeDelivery struct {
	Spans, Scores int
}

// OutcomeTally is what one build delivered of the outcome workload.
type OutcomeTally struct {
	Traces                                  int
	Failing, Flagged, Costly                int
	FailingWhole, FlaggedWhole, CostlyWhole int
	// Rest: traces no rule names; RestWhole those of them delivered whole (the sample_rate share).
	Rest, RestWhole int
	// Delivered: traces with at least one span on the platform; Whole: all of them; Torn: some.
	Delivered, Whole, Torn int
	// Sessions with a delivered trace and a trace not delivered whole (dropped or torn).
	Sessions, SessionsWithHoles int
	InputSpans, DeliveredSpans  int
	// ScoresOfUndelivered counts scores on the platform of traces without a delivered span.
	ScoresOfUndelivered int
	// TornIDs and MissedNamedIDs list the traces, for findings (at most outcomeListed each).
	TornIDs, MissedNamedIDs, StrayScoreIDs []string
}

const outcomeListed = 10

// TallyOutcome accounts a build's deliveries against the workload's truth; inputSpans counts
// every span sent (GenAI or not).
func TallyOutcome(truth []OutcomeTruth, got map[string]OutcomeDelivery, inputSpans int) OutcomeTally {
	t := OutcomeTally{Traces: len(truth), InputSpans: inputSpans}
	type session struct{ delivered, notWhole bool }
	sessions := map[string]*session{}
	for _, tr := range truth {
		d := got[tr.TraceID]
		spans := min(d.Spans, tr.AckedGenAISpans)
		t.DeliveredSpans += spans
		whole := tr.AckedGenAISpans > 0 && spans == tr.AckedGenAISpans
		if spans > 0 {
			t.Delivered++
		}
		switch {
		case whole:
			t.Whole++
		case spans > 0:
			t.Torn++
			t.TornIDs = appendListed(t.TornIDs, fmt.Sprintf("%s (%d of %d spans)", tr.TraceID, spans, tr.AckedGenAISpans))
		}
		if spans == 0 && d.Scores > 0 {
			t.ScoresOfUndelivered += d.Scores
			t.StrayScoreIDs = appendListed(t.StrayScoreIDs, tr.TraceID)
		}
		count := func(is bool, n, wholeN *int) {
			if is {
				*n++
				if whole {
					*wholeN++
				}
			}
		}
		count(tr.Failing, &t.Failing, &t.FailingWhole)
		count(tr.Flagged, &t.Flagged, &t.FlaggedWhole)
		count(tr.Costly, &t.Costly, &t.CostlyWhole)
		count(!tr.Named(), &t.Rest, &t.RestWhole)
		if tr.Named() && !whole {
			t.MissedNamedIDs = appendListed(t.MissedNamedIDs, fmt.Sprintf("%s (%s; %d of %d spans)", tr.TraceID, reasons(tr), spans, tr.AckedGenAISpans))
		}
		s := sessions[tr.SessionID]
		if s == nil {
			s = &session{}
			sessions[tr.SessionID] = s
		}
		s.delivered = s.delivered || spans > 0
		s.notWhole = s.notWhole || !whole
	}
	t.Sessions = len(sessions)
	for _, s := range sessions {
		if s.delivered && s.notWhole {
			t.SessionsWithHoles++
		}
	}
	return t
}

// KillLoss counts what a run with a SIGKILL lost: the acknowledged GenAI spans (and their
// traces) of the traces the build should deliver but did not deliver whole. A build should
// deliver the traces the rules name and the traces it delivered in its run without the kill
// (baseline: trace id → at least one span delivered), the same workload.
func KillLoss(truth []OutcomeTruth, baseline map[string]bool, got map[string]OutcomeDelivery) (traces, spans int) {
	for _, tr := range truth {
		if !tr.Named() && !baseline[tr.TraceID] {
			continue
		}
		if missing := tr.AckedGenAISpans - min(got[tr.TraceID].Spans, tr.AckedGenAISpans); missing > 0 {
			traces++
			spans += missing
		}
	}
	return traces, spans
}

func reasons(tr OutcomeTruth) string {
	var r []string
	for _, x := range []struct {
		is   bool
		name string
	}{{tr.Failing, "failing"}, {tr.Flagged, "flagged"}, {tr.Costly, "costly"}} {
		if x.is {
			r = append(r, x.name)
		}
	}
	return strings.Join(r, "+")
}

func appendListed(list []string, s string) []string {
	if len(list) < outcomeListed {
		list = append(list, s)
	}
	return list
}

// shareOf formats n of total as a percentage with the counts.
func shareOf(n, total int) string {
	if total == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f%% (%d/%d)", 100*float64(n)/float64(total), n, total)
}
