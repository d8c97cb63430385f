package loadgen

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// RunOptions pace and bound a run.
type RunOptions struct {
	// Rate is the input rate in spans per second. 0 sends as fast as the collector takes it:
	// each of the Concurrency senders sends its next request as soon as the last is answered.
	Rate float64
	// Duration bounds the run (no request starts later); required.
	Duration time.Duration
	// MaxTraces bounds the traces sent; 0: only Duration bounds the run.
	MaxTraces int
	// FirstSeq is the sequence number of the run's first trace. Runs that deliver to the same
	// platform must use disjoint ranges (Result.NextSeq is where the next run may start).
	FirstSeq uint64
	// RequestSpans is the number of spans per request, in whole traces; default 512 (the
	// SDK's batch size). MaxRequestBytes caps a request's size; default 3 MiB, under the
	// 4 MiB message limit of gRPC servers.
	RequestSpans, MaxRequestBytes int
	// Concurrency is the most requests in flight; default 4.
	Concurrency int
}

// Tally counts requests and what they held.
type Tally struct {
	Requests, Traces, Spans, GenAISpans, Scores, InvalidScores, Bytes int64
}

func (t *Tally) add(r *Request) {
	t.Requests++
	t.Traces += int64(r.Traces)
	t.Spans += int64(r.Spans)
	t.GenAISpans += int64(r.GenAISpans)
	t.Scores += int64(r.Scores)
	t.InvalidScores += int64(r.InvalidScores)
	t.Bytes += int64(len(r.Body))
}

// SeqRange is the traces First .. First+Count-1, sent in one request at Sent (when the sender
// started it: load runs measure the latency to the platform from there).
type SeqRange struct {
	First uint64
	Count int
	Sent  time.Time
}

// Result is what a run sent and what became of it.
type Result struct {
	// Sent counts everything sent; the others split it by Verdict.
	Sent, Accepted, Refused, Rejected, Failed Tally
	// PartialRejectedSpans sums the partial-success rejections of accepted requests.
	PartialRejectedSpans int64
	// Statuses counts answers by HTTP status or gRPC code (or error text).
	Statuses map[string]int64
	// RetryAfter is the longest Retry-After the collector asked for.
	RetryAfter time.Duration
	// Sending is how long requests went out: the run's Duration, or longer when the sender
	// fell behind (or shorter when MaxTraces ended the run first). Elapsed runs from the first
	// request to the last answer.
	Sending, Elapsed time.Duration
	// MaxLag is how far behind its schedule a paced request went out at worst: the collector
	// answering too slowly for the rate (or the sender lacking CPU) shows here.
	MaxLag time.Duration
	// NextSeq is the first sequence number the run did not use.
	NextSeq uint64
	// AcceptedSeqs are the traces of the accepted requests, in order.
	AcceptedSeqs []SeqRange
}

// OfferedRate is the spans per second sent while sending.
func (r Result) OfferedRate() float64 { return perSecond(r.Sent.Spans, r.Sending) }

// AcceptedRate is the spans per second accepted while sending.
func (r Result) AcceptedRate() float64 { return perSecond(r.Accepted.Spans, r.Sending) }

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// EachAccepted calls f with the sequence number of every accepted trace.
func (r Result) EachAccepted(f func(seq uint64)) {
	r.EachAcceptedSent(func(seq uint64, _ time.Time) { f(seq) })
}

// EachAcceptedSent calls f with the sequence number of every accepted trace and when the
// request that carried it was sent.
func (r Result) EachAcceptedSent(f func(seq uint64, sent time.Time)) {
	for _, sr := range r.AcceptedSeqs {
		for i := range sr.Count {
			f(sr.First+uint64(i), sr.Sent)
		}
	}
}

// Run sends the workload through s until opts.Duration has passed or opts.MaxTraces traces
// were sent, then waits for the answers to the requests in flight (each bounded by the
// sender's timeout). It returns an error only when opts are invalid.
func Run(ctx context.Context, w *Workload, s Sender, opts RunOptions) (Result, error) {
	if opts.Duration <= 0 {
		return Result{}, errors.New("loadgen: RunOptions.Duration must be set")
	}
	if opts.Rate < 0 {
		return Result{}, errors.New("loadgen: RunOptions.Rate must not be negative")
	}
	if opts.RequestSpans <= 0 {
		opts.RequestSpans = 512
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 3 << 20
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}

	res := Result{Statuses: map[string]int64{}}
	var mu sync.Mutex
	jobs := make(chan *Request)
	var workers sync.WaitGroup
	for range opts.Concurrency {
		workers.Go(func() {
			for req := range jobs {
				sent := time.Now()
				out := s.Send(ctx, req.Body)
				mu.Lock()
				res.record(req, out, sent)
				mu.Unlock()
			}
		})
	}

	start := time.Now()
	deadline := start.Add(opts.Duration)
	seq := opts.FirstSeq
	var sentSpans, sentTraces int64
	var maxLag time.Duration
produce:
	for {
		if opts.MaxTraces > 0 && sentTraces >= int64(opts.MaxTraces) {
			break
		}
		if !time.Now().Before(deadline) {
			break // a sender that fell behind its schedule stops at the deadline all the same
		}
		var due time.Time
		if opts.Rate > 0 {
			due = start.Add(time.Duration(float64(sentSpans) / opts.Rate * float64(time.Second)))
			if !due.Before(deadline) {
				break
			}
			if wait := time.Until(due); wait > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					break produce
				}
			}
		}
		maxTraces := 0
		if opts.MaxTraces > 0 {
			maxTraces = opts.MaxTraces - int(sentTraces)
		}
		req := w.NewRequest(seq, maxTraces, opts.RequestSpans, opts.MaxRequestBytes)
		select {
		case jobs <- req:
		case <-ctx.Done():
			break produce
		}
		if opts.Rate > 0 {
			maxLag = max(maxLag, time.Since(due))
		}
		seq += uint64(req.Traces)
		sentSpans += int64(req.Spans)
		sentTraces += int64(req.Traces)
	}
	// A paced run that kept up lasts its Duration: the rate is spans over that time.
	if wait := time.Until(deadline); opts.Rate > 0 && wait > 0 && (opts.MaxTraces == 0 || sentTraces < int64(opts.MaxTraces)) {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
	res.Sending = time.Since(start)
	close(jobs)
	workers.Wait()

	res.Elapsed = time.Since(start)
	res.MaxLag = maxLag
	res.NextSeq = seq
	slices.SortFunc(res.AcceptedSeqs, func(a, b SeqRange) int { return cmp.Compare(a.First, b.First) })
	return res, nil
}

func (r *Result) record(req *Request, out Outcome, sent time.Time) {
	r.Sent.add(req)
	r.Statuses[statusKey(out.Status)]++
	r.RetryAfter = max(r.RetryAfter, out.RetryAfter)
	switch out.Verdict {
	case Accepted:
		r.Accepted.add(req)
		r.PartialRejectedSpans += out.RejectedSpans
		r.AcceptedSeqs = append(r.AcceptedSeqs, SeqRange{First: req.FirstSeq, Count: req.Traces, Sent: sent})
	case Refused:
		r.Refused.add(req)
	case Rejected:
		r.Rejected.add(req)
	default:
		r.Failed.add(req)
	}
}

// statusKey keeps error texts short enough to count and print.
func statusKey(s string) string {
	const limit = 80
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}
