package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// startScoreReleaser starts the releaser of the score records the memory holds for this pipeline
// until their trace is kept. Without outcome sampling (known once the traces processor started: the
// collector starts the two in no set order, and receivers last) none runs.
func (lp *logsProcessor) startScoreReleaser(p *spanFilterProcessor) {
	lp.once.Do(func() {
		lp.stop, lp.stopped = make(chan struct{}), make(chan struct{})
		go release(lp.stop, lp.stopped, time.Second, p.outcome.ScoreWake(), func() {}, func() {
			// refused: again at the next tick
			lp.deliverScores(context.Background(), p.outcome.TakeReadyScores(lp), false)
		})
	})
}

// planScores writes ahead the score records of ld that follow their trace (follow: outcome sampling
// is on; nil: none does), applied once the rest of the call is written. A retryable error refuses it.
func (lp *logsProcessor) planScores(ctx context.Context, ld plog.Logs) (*outcome.ScoreHold, bool, error) {
	var p *spanFilterProcessor
	if lp.traces != nil {
		p = lp.traces()
	}
	if p == nil || p.outcome == nil {
		return nil, false, nil
	}
	if !p.running.Load() {
		return nil, true, errNotRunning
	}
	lp.startScoreReleaser(p)
	hold, err := p.outcome.HoldScores(client.FromContext(ctx), lp, ld)
	if err != nil && !errors.Is(err, tracememory.ErrContentOverloaded) {
		lp.logger.Warn("Could not hold score records for their trace's decision; the logs request is refused "+
			"for the client to retry", zap.Error(err))
	}
	return hold, true, err
}

// applyScores takes the score records planned: those of undecided traces are held, of dropped
// traces removed; the rest stays in ld. It hands on what the call's decisions released.
func (lp *logsProcessor) applyScores(ctx context.Context, hold *outcome.ScoreHold, ld plog.Logs) {
	if hold == nil {
		return
	}
	if held, dropped := hold.Apply(ld); held+dropped > 0 {
		lp.logger.Debug("Score records follow their trace's decision", zap.Int("held", held), zap.Int("dropped", dropped))
	}
	lp.deliverScores(ctx, lp.traces().outcome.TakeReadyScores(lp), false)
}

// deliverScores hands released score records on as the traces side hands on spans (handOn).
func (lp *logsProcessor) deliverScores(ctx context.Context, ds []*outcome.ScoreDelivery, tryAll bool) int {
	p := lp.traces()
	done, later, refused := handOn(p, ctx, ds, tryAll, lp.scores(), func(d *outcome.ScoreDelivery) attempt {
		return attempt{d.Records, &d.Panics, &d.RetryAt, func(ctx context.Context) error {
			return lp.next.ConsumeLogs(client.NewContext(ctx, d.Info), d.Logs)
		}}
	})
	p.outcome.ScoresDelivered(done...)
	if len(later) > 0 {
		p.outcome.RequeueScores(later...)
	}
	return refused
}

func (lp *logsProcessor) scores() released {
	return released{"score records", "records", false, lp.logger}
}

// shutdown stops the releaser and delivers what is released; with on_shutdown: release (or no
// journal) it first decides the traces that hold score records, as the traces side does for spans.
func (lp *logsProcessor) shutdown(ctx context.Context) error {
	p := lp.traces()
	if p == nil || p.outcome == nil {
		return nil
	}
	lp.startScoreReleaser(p) // records recovered from the journal may wait for this pipeline
	if err := stopReleaser(ctx, lp.stop, lp.stopped); err != nil {
		return err // the releaser is stuck in the next consumer; journaled records stay
	}
	final := p.outcome.DrainScores
	if p.keepOnShutdown() {
		final = p.outcome.TakeReadyScores
	}
	return p.refusedAtShutdown(ctx, lp.scores(), lp.deliverScores(ctx, final(lp), true))
}
