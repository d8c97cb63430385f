package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
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

// deliverScores hands released score records on; a retryable refusal puts the rest back for the
// releaser, or with tryAll counts the records refused.
func (lp *logsProcessor) deliverScores(ctx context.Context, ds []*outcome.ScoreDelivery, tryAll bool) int {
	refused := 0
	scores := lp.traces().outcome
	for i, d := range ds {
		err := lp.next.ConsumeLogs(client.NewContext(ctx, d.Info), d.Logs)
		switch {
		case err == nil:
			scores.ScoresDelivered(d)
		case consumererror.IsPermanent(err):
			lp.logger.Error("Score records were lost: the next consumer refused them permanently",
				zap.Int("records", d.Records), zap.Error(err))
			scores.ScoresDelivered(d)
		case tryAll:
			refused += d.Records
		default:
			lp.logger.Warn("The next consumer refused released score records; they will be retried",
				zap.Int("records", d.Records), zap.Error(err))
			scores.RequeueScores(ds[i:]...)
			return 0
		}
	}
	return refused
}

// shutdown stops the releaser and delivers what is released; with on_shutdown: release (or no
// journal) it first decides the traces that hold score records, as the traces side does for spans.
func (lp *logsProcessor) shutdown(ctx context.Context) error {
	p := lp.traces()
	if p == nil || p.outcome == nil {
		return nil
	}
	lp.startScoreReleaser(p) // records recovered from the journal may wait for this pipeline
	close(lp.stop)
	select {
	case <-lp.stopped:
	case <-ctx.Done(): // the releaser is stuck in the next consumer; journaled records stay
		return ctx.Err()
	}
	journaled := p.journal != journal.Nop
	final := p.outcome.DrainScores
	if journaled && p.cfg.TraceIntegrity.OnShutdown == onShutdownKeep {
		final = p.outcome.TakeReadyScores
	}
	switch lost := lp.deliverScores(ctx, final(lp), true); {
	case lost > 0 && journaled:
		lp.logger.Warn("The next consumer still refused released score records at shutdown; they stay in the "+
			"journal and are delivered after the next start", zap.Int("records", lost))
	case lost > 0:
		lp.logger.Error("Score records were lost: the next consumer still refused them at shutdown", zap.Int("records", lost))
		return fmt.Errorf("svcspanfilter: %d score records released at shutdown could not be delivered", lost)
	}
	return nil
}
