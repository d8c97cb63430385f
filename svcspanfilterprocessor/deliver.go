package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// deliverReady sends the deliveries the memory queued (released by time, or refused before).
func (p *spanFilterProcessor) deliverReady(ctx context.Context, tryAll bool) {
	p.deliver(ctx, p.mem.TakeReady(), tryAll)
}

// deliver hands released spans to the next consumer, each delivery with its own request's client
// metadata. A retryable refusal puts the delivery back for the releaser; unless tryAll, the rest
// goes back with it (the next consumer is under back-pressure). A permanent refusal is the only
// loss, counted and logged. It returns the spans still refused (with tryAll, at shutdown: left in
// the journal, if any, for the next start).
func (p *spanFilterProcessor) deliver(ctx context.Context, ds []*tracememory.Delivery, tryAll bool) int {
	refused := 0
	for i, d := range ds {
		err := p.deliverOne(ctx, d)
		switch {
		case err == nil:
		case tryAll:
			refused += d.Spans
		default:
			p.logger.Warn("The next consumer refused released spans; they will be retried",
				zap.Int("spans", d.Spans), zap.Error(err))
			p.mem.Requeue(ds[i:]...)
			return 0
		}
	}
	return refused
}

// deliverOne returns the next consumer's error when it refused d retryably (d is still the
// caller's); a permanent refusal is given up.
func (p *spanFilterProcessor) deliverOne(ctx context.Context, d *tracememory.Delivery) error {
	err := p.consumeRecovering(ctx, d)
	switch {
	case err == nil:
		p.mem.Delivered(d)
	case consumererror.IsPermanent(err):
		p.giveUp(ctx, d.Spans, "the next consumer refused them permanently: "+err.Error())
		p.mem.Discard(d)
	default:
		return err
	}
	return nil
}

// consumeRecovering hands d to the next consumer and turns its panic (a bug in a later component)
// into a retryable refusal of d: the deliveries before d went on and are done, d and the rest are
// the caller's to keep. Were the panic to go on, d and the deliveries after it would be neither
// handed on nor put back.
func (p *spanFilterProcessor) consumeRecovering(ctx context.Context, d *tracememory.Delivery) (err error) {
	defer func() {
		if v := recover(); v != nil {
			p.logger.Error("The next consumer panicked on released spans; they will be retried",
				zap.Int("spans", d.Spans), zap.Any("panic", v), zap.Stack("stack"))
			err = fmt.Errorf("svcspanfilter: the next consumer panicked: %v", v)
		}
	}()
	return p.next.ConsumeTraces(client.NewContext(ctx, d.Info), d.Traces)
}

// giveUp is the only place where accepted spans are lost, and it says so.
func (p *spanFilterProcessor) giveUp(ctx context.Context, spans int, why string) {
	p.telemetry.ProcessorSvcspanfilterSpansUndeliverable.Add(ctx, int64(spans))
	p.logger.Error("Released spans were lost: "+why, zap.Int("spans", spans))
}
