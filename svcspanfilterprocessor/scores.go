package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// scoreSide is the logs side's part in outcome sampling: score records follow their trace's
// decision. The memory holds those of undecided traces (written ahead), and queues them for this
// logs pipeline once their trace is kept; a releaser delivers them to the pipeline's next consumer.
// Without outcome sampling (known once the traces processor started: the collector starts the two
// in no set order, and receivers last) score records pass untouched and no releaser runs.
type scoreSide struct {
	logger *zap.Logger
	next   consumer.Logs
	sink   any                         // this logs pipeline's processor: released records go on here
	traces func() *spanFilterProcessor // the traces processor of the component ID, nil without one

	once          sync.Once
	p             *spanFilterProcessor // set with the releaser, when score records first follow
	stop, stopped chan struct{}
}

// startReleaser starts the releaser of the score records released for this pipeline.
func (s *scoreSide) startReleaser(p *spanFilterProcessor) {
	s.once.Do(func() {
		s.p = p
		s.stop, s.stopped = make(chan struct{}), make(chan struct{})
		ticker := time.NewTicker(time.Second) // refused deliveries are retried at the next tick
		go func() {
			defer close(s.stopped)
			defer ticker.Stop()
			for {
				select {
				case <-s.stop:
					return
				case <-ticker.C:
				case <-p.mem.ScoreWake():
				}
				s.deliver(context.Background(), p.mem.TakeReadyScores(s.sink), false)
			}
		}()
	})
}

// hold takes the score records of ld that follow their trace (false: none do, outcome sampling
// is off): those of undecided traces are held, of dropped traces removed; the rest stays in ld.
// A retryable error refuses the call.
func (s *scoreSide) hold(ctx context.Context, ld plog.Logs) (bool, error) {
	p := s.traces()
	if p == nil || !p.mem.ScoresFollow() {
		return false, nil
	}
	if !p.running.Load() {
		return true, errNotRunning
	}
	s.startReleaser(p)
	held, dropped, err := p.mem.AddScores(client.FromContext(ctx), s.sink, ld)
	if err != nil {
		if !errors.Is(err, tracememory.ErrContentOverloaded) {
			s.logger.Warn("Could not hold score records for their trace's decision; the logs request is refused "+
				"for the client to retry", zap.Error(err))
		}
		return true, err
	}
	if held+dropped > 0 {
		s.logger.Debug("Score records follow their trace's decision", zap.Int("held", held), zap.Int("dropped", dropped))
	}
	s.deliver(ctx, p.mem.TakeReadyScores(s.sink), false) // released by this call's decisions
	return true, nil
}

// deliver hands released score records on; a retryable refusal puts the rest back for the releaser,
// or with tryAll counts the records refused.
func (s *scoreSide) deliver(ctx context.Context, ds []*tracememory.ScoreDelivery, tryAll bool) int {
	refused := 0
	mem := s.p.mem
	for i, d := range ds {
		err := s.next.ConsumeLogs(client.NewContext(ctx, d.Info), d.Logs)
		switch {
		case err == nil:
			mem.ScoresDelivered(d)
		case consumererror.IsPermanent(err):
			s.logger.Error("Score records were lost: the next consumer refused them permanently",
				zap.Int("records", d.Records), zap.Error(err))
			mem.ScoresDelivered(d)
		case tryAll:
			refused += d.Records
		default:
			s.logger.Warn("The next consumer refused released score records; they will be retried",
				zap.Int("records", d.Records), zap.Error(err))
			mem.RequeueScores(ds[i:]...)
			return 0
		}
	}
	return refused
}

// shutdown stops the releaser and delivers what is released; with on_shutdown: release (or no
// journal) it first decides the traces that hold score records, as the traces side does for spans.
func (s *scoreSide) shutdown(ctx context.Context) error {
	p := s.traces()
	if p == nil || !p.mem.ScoresFollow() {
		return nil
	}
	s.startReleaser(p) // records recovered from the journal may wait for this pipeline
	close(s.stop)
	select {
	case <-s.stopped:
	case <-ctx.Done(): // the releaser is stuck in the next consumer; journaled records stay
		return ctx.Err()
	}
	journaled := p.journal != journal.Nop
	final := p.mem.DrainScores
	if journaled && p.cfg.TraceIntegrity.OnShutdown == onShutdownKeep {
		final = p.mem.TakeReadyScores
	}
	if lost := s.deliver(ctx, final(s.sink), true); lost > 0 {
		if journaled {
			s.logger.Warn("The next consumer still refused released score records at shutdown; they stay in the "+
				"journal and are delivered after the next start", zap.Int("records", lost))
			return nil
		}
		s.logger.Error("Score records were lost: the next consumer still refused them at shutdown", zap.Int("records", lost))
		return fmt.Errorf("svcspanfilter: %d score records released at shutdown could not be delivered", lost)
	}
	return nil
}
