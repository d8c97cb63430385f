package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// Released spans (the traces side) and score records (the logs side, scores.go) go to the next
// consumer the same way: refusals, panics of a later component and losses are handled here, once.

// attempt is one delivery as handOn sees it: one call of the next consumer.
type attempt struct {
	items   int        // spans or score records
	panics  *int       // the attempts the next consumer panicked on
	retryAt *time.Time // after a panic, no attempt before it
	consume func(context.Context) error
}

// released names what a side hands on, in its logs; spans lost are also counted (spans_undeliverable).
type released struct {
	noun, field string
	counted     bool
	logger      *zap.Logger
}

func (p *spanFilterProcessor) spans() released { return released{"spans", "spans", true, p.logger} }

// handOn hands ds on in order. done: taken, or refused for good (lost); later: refused retryably
// (back pressure: it and all after it), panicked on (about that data: the others go on) or backing
// off; refused: with tryAll (shutdown), the items refused, which are neither done nor later.
func handOn[D any](p *spanFilterProcessor, ctx context.Context, ds []D, tryAll bool, what released,
	view func(D) attempt) (done, later []D, refused int) {
	done = ds[:0] // reuses ds: it never passes the one read
	for i, d := range ds {
		a := view(d)
		if *a.panics > 0 && !tryAll && p.now().Before(*a.retryAt) {
			later = append(later, d)
			continue
		}
		err := p.consumeRecovering(ctx, a, what)
		switch {
		case err == nil:
			done = append(done, d)
		case consumererror.IsPermanent(err):
			p.giveUp(ctx, what, a.items, undeliverableRefused, "the next consumer refused them permanently: "+err.Error())
			done = append(done, d)
		case tryAll:
			refused += a.items
		case errors.Is(err, errPanicked):
			later = append(later, d)
		default:
			what.logger.Warn("The next consumer refused released "+what.noun+"; they will be retried",
				zap.Int(what.field, a.items), zap.Error(err))
			return done, append(later, ds[i:]...), 0
		}
	}
	return done, later, refused
}

// maxPanics bounds the attempts at a delivery the next consumer panics on (a bug in a later
// component): retried after 1 s, 2 s, 4 s, then given up, so that it cannot block what follows.
const maxPanics = 4

var errPanicked = errors.New("svcspanfilter: the next consumer panicked")

// consumeRecovering turns a panic of the next consumer into errPanicked, a retried after a backoff,
// or, at the last attempt, into nil with a given up (counted and logged).
func (p *spanFilterProcessor) consumeRecovering(ctx context.Context, a attempt, what released) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if *a.panics++; *a.panics >= maxPanics {
			p.giveUp(ctx, what, a.items, undeliverablePanicked, fmt.Sprintf("the next consumer panicked on them at "+
				"each of %d attempts (a bug in a later component): %v", *a.panics, v))
			return
		}
		*a.retryAt = p.now().Add(time.Second << (*a.panics - 1))
		what.logger.Error("The next consumer panicked on released "+what.noun+"; they will be retried",
			zap.Int(what.field, a.items), zap.Int("attempt", *a.panics), zap.Int("attempts", maxPanics),
			zap.Any("panic", v), zap.Stack("stack"))
		err = errPanicked
	}()
	return a.consume(ctx)
}

// Why released spans were given up: the `reason` of spans_undeliverable.
const (
	undeliverableRefused  = "refused"
	undeliverableShutdown = "shutdown"
	undeliverablePanicked = "panicked"
)

// giveUp is the only place where accepted spans or score records are lost, and it says so.
func (p *spanFilterProcessor) giveUp(ctx context.Context, what released, n int, reason, why string) {
	if what.counted {
		p.telemetry.ProcessorSvcspanfilterSpansUndeliverable.Add(ctx, int64(n), reasonOpt(reason))
	}
	what.logger.Error("Released "+what.noun+" were lost: "+why, zap.Int(what.field, n), zap.String("reason", reason))
}

// stopReleaser stops a releaser (release) and waits for it, or for ctx.
func stopReleaser(ctx context.Context, stop, stopped chan struct{}) error {
	close(stop)
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// keepOnShutdown: what is held stays journaled at shutdown (on_shutdown: keep), for a restart to
// hold it again; only what is released goes on.
func (p *spanFilterProcessor) keepOnShutdown() bool {
	return p.journal != journal.Nop && p.cfg.TraceIntegrity.OnShutdown == onShutdownKeep
}

// refusedAtShutdown reports n items the next consumer still refused at shutdown: journaled, they are
// delivered after the next start; without a journal they are lost.
func (p *spanFilterProcessor) refusedAtShutdown(ctx context.Context, what released, n int) error {
	switch {
	case n == 0:
		return nil
	case p.journal != journal.Nop:
		what.logger.Warn("The next consumer still refused released "+what.noun+" at shutdown; they stay in the "+
			"journal and are delivered after the next start", zap.Int(what.field, n))
		return nil
	}
	p.giveUp(ctx, what, n, undeliverableShutdown, "the next consumer still refused them at shutdown")
	return fmt.Errorf("svcspanfilter: %d %s released at shutdown could not be delivered", n, what.noun)
}
