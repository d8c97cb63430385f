package bench

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/svc/svc-collector/testbed/loadgen"
	"github.com/svc/svc-collector/testbed/platform"
)

// Count is the fate of one kind of item, spans or scores, from the sender to the platform.
type Count struct {
	// Sent counts the items of every request sent; Accepted those of the requests the
	// collector accepted.
	Sent, Accepted int64
	// Expected are the accepted items the build must deliver: the spans its filter keeps, the
	// scores the platform takes (see Rejected).
	Expected int64
	// Delivered counts the expected items that arrived at least once; Lost those that never did.
	Delivered, Lost int64
	// Duplicated counts the deliveries of expected items beyond their first (the platform
	// upserts them: at-least-once delivery shows here, not as loss).
	Duplicated int64
	// Unexpected counts the distinct items that arrived but were not expected: items of
	// requests the collector refused or never answered, or items a filter should have dropped.
	Unexpected int64
	// RawDuplicates counts every delivery beyond the first of any item, unexpected ones included.
	RawDuplicates int64
	// Rejected counts the accepted items made for the platform to refuse (the workload's
	// invalid scores, answered with a 207); they are not expected.
	Rejected int64
	// ByCount is set when the platform kept no ids to match (scores of a stats-only platform):
	// Delivered and Lost then come from counts, not from matching each item.
	ByCount bool
}

// Account is what became of a run's spans and scores.
type Account struct {
	Spans, Scores Count
}

func (c Count) String() string {
	return fmt.Sprintf("sent=%d accepted=%d delivered=%d lost=%d duplicated=%d", c.Sent, c.Accepted, c.Delivered, c.Lost, c.Duplicated)
}

// Line is the one-line summary of the account under a label (the fault tests print
// "fault <name>: sent=N accepted=N delivered=N lost=N duplicated=N | ...").
func (a Account) Line(label string) string {
	s := fmt.Sprintf("%s: sent=%d accepted=%d delivered=%d lost=%d duplicated=%d",
		label, a.Spans.Sent, a.Spans.Accepted, a.Spans.Delivered, a.Spans.Lost, a.Spans.Duplicated)
	s += fmt.Sprintf(" | spans expected=%d unexpected=%d raw-duplicates=%d", a.Spans.Expected, a.Spans.Unexpected, a.Spans.RawDuplicates)
	s += fmt.Sprintf(" | scores sent=%d accepted=%d expected=%d delivered=%d lost=%d duplicated=%d unexpected=%d rejected-by-platform=%d",
		a.Scores.Sent, a.Scores.Accepted, a.Scores.Expected, a.Scores.Delivered, a.Scores.Lost, a.Scores.Duplicated,
		a.Scores.Unexpected, a.Scores.Rejected)
	return s
}

// expected returns how many spans and scores of the runs the build must deliver.
func expected(b Build, results []loadgen.Result) (spans, scores int64) {
	for _, r := range results {
		switch b.Delivers {
		case AllSpans:
			spans += r.Accepted.Spans
		default:
			spans += r.Accepted.GenAISpans
		}
		if b.Delivers == GenAISpansAndScores {
			scores += r.Accepted.Scores - r.Accepted.InvalidScores
		}
	}
	return spans, scores
}

// Reckon matches what the runs' accepted requests carried with what the platform holds.
func Reckon(p *platform.Platform, w *loadgen.Workload, b Build, results ...loadgen.Result) Account {
	var a Account
	for _, r := range results {
		a.Spans.Sent += r.Sent.Spans
		a.Spans.Accepted += r.Accepted.Spans
		a.Scores.Sent += r.Sent.Scores
		a.Scores.Accepted += r.Accepted.Scores
	}
	a.Spans.Expected, a.Scores.Expected = expected(b, results)
	if b.Delivers == GenAISpansAndScores {
		for _, r := range results {
			a.Scores.Rejected += r.Accepted.InvalidScores
		}
	}

	// Scores carry their trace id (unless the platform keeps ids only): count them per trace.
	scores := map[string][2]int64{} // trace id → distinct scores, deliveries beyond the first
	byTrace := false
	if b.Delivers == GenAISpansAndScores {
		for _, sc := range p.Scores(platform.ScoreFilter{}) {
			if sc.TraceID != "" {
				byTrace = true
			}
			n := scores[sc.TraceID]
			n[0]++
			n[1] += int64(sc.Deliveries - 1)
			scores[sc.TraceID] = n
		}
	}

	var key [2 * 16]byte
	var span [2 * 8]byte
	for _, r := range results {
		r.EachAccepted(func(seq uint64) {
			ids := w.Trace(seq)
			hex.Encode(key[:], ids.TraceID[:])
			traceHex := string(key[:])
			check := func(i int) {
				hex.Encode(span[:], ids.SpanIDs[i][:])
				switch n := p.SpanDeliveries(traceHex, string(span[:])); {
				case n == 0:
					a.Spans.Lost++
				default:
					a.Spans.Delivered++
					a.Spans.Duplicated += int64(n - 1)
				}
			}
			if b.Delivers == AllSpans {
				for i := range ids.SpanIDs {
					check(i)
				}
			} else {
				for _, i := range ids.GenAI {
					check(i)
				}
			}
			if byTrace {
				want := int64(ids.Scores - ids.InvalidScores)
				got := scores[traceHex]
				a.Scores.Delivered += min(got[0], want)
				a.Scores.Lost += max(0, want-got[0])
				a.Scores.Duplicated += got[1]
			}
		})
	}

	st := p.Stats()
	a.Spans.Unexpected = int64(st.UniqueSpans) - a.Spans.Delivered
	a.Spans.RawDuplicates = int64(st.DuplicateSpanDeliveries)
	if b.Delivers == GenAISpansAndScores {
		a.Scores.RawDuplicates = int64(st.ScoresReceived - st.UniqueScores)
		if byTrace {
			a.Scores.Unexpected = int64(st.UniqueScores) - a.Scores.Delivered
		} else {
			a.Scores.ByCount = true
			a.Scores.Delivered = min(int64(st.UniqueScores), a.Scores.Expected)
			a.Scores.Lost = a.Scores.Expected - a.Scores.Delivered
			a.Scores.Duplicated = a.Scores.RawDuplicates
			a.Scores.Unexpected = int64(st.UniqueScores) - a.Scores.Delivered
		}
	}
	return a
}

// Settle waits until the platform holds every span and score the runs' accepted requests
// must bring, or ctx ends, and returns the account (with what is missing as Lost).
func Settle(ctx context.Context, p *platform.Platform, w *loadgen.Workload, b Build, results ...loadgen.Result) Account {
	spans, scores := expected(b, results)
	_ = p.WaitForSpans(ctx, int(spans))
	_ = p.WaitForScores(ctx, int(scores))
	// Counts may be reached by unexpected items while expected ones are still on their way.
	for {
		a := Reckon(p, w, b, results...)
		if a.Spans.Lost == 0 && a.Scores.Lost == 0 {
			return a
		}
		select {
		case <-ctx.Done():
			return a
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Latency is how long the spans of a run took from the client to the platform: from the moment
// the sender started the request that carried a span until the platform had read the first
// request that brought it back out of the collector.
type Latency struct {
	// Spans is how many spans were measured.
	Spans    int64
	P50, P99 time.Duration
}

// MeasureLatency measures the latency of every expected span of the runs that reached the
// platform. The load runs send whole traces per request, so no span waits in the collector
// for its parent: every span measured was delivered directly.
func MeasureLatency(p *platform.Platform, w *loadgen.Workload, b Build, results ...loadgen.Result) Latency {
	var samples []time.Duration
	var key [2 * 16]byte
	var span [2 * 8]byte
	for _, r := range results {
		r.EachAcceptedSent(func(seq uint64, sent time.Time) {
			ids := w.Trace(seq)
			hex.Encode(key[:], ids.TraceID[:])
			traceHex := string(key[:])
			measure := func(i int) {
				hex.Encode(span[:], ids.SpanIDs[i][:])
				if n, first := p.SpanArrival(traceHex, string(span[:])); n > 0 {
					samples = append(samples, first.Sub(sent))
				}
			}
			if b.Delivers == AllSpans {
				for i := range ids.SpanIDs {
					measure(i)
				}
			} else {
				for _, i := range ids.GenAI {
					measure(i)
				}
			}
		})
	}
	return latencyOf(samples)
}

// latencyOf takes the nearest-rank percentiles of the samples.
func latencyOf(samples []time.Duration) Latency {
	l := Latency{Spans: int64(len(samples))}
	if len(samples) == 0 {
		return l
	}
	slices.Sort(samples)
	rank := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(samples)))) - 1
		return samples[max(0, min(i, len(samples)-1))]
	}
	l.P50, l.P99 = rank(0.50), rank(0.99)
	return l
}
