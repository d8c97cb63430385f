package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// spanFilterProcessor filters spans synchronously and drives the trace memory: decide (rules.go) ->
// admit (the memory settles each kept span's parent or holds it) -> deliver (the batch less its
// dropped and held spans, and the spans it released). Spans released by time (waits, eviction) are
// delivered by its releaser goroutine. It never holds a lock while calling the next consumer.
type spanFilterProcessor struct {
	logger    *zap.Logger
	next      consumer.Traces
	filter    *spanFilter
	cfg       TraceIntegrityConfig
	sampling  *component.ID // the svcsampling extension whose rate the filter takes at start
	telemetry *metadata.TelemetryBuilder
	mem       *tracememory.Memory
	journal   journal.Journal
	scratch   sync.Pool
	now       func() time.Time // the memory's clock; tests replace it before the first span
	evictions evictionLog

	stop, stopped chan struct{} // the releaser's
	// running: between the end of start (recovery done) and the beginning of shutdown; the logs
	// side's content is refused, retryably, outside it.
	running atomic.Bool
}

func newSpanFilterProcessor(set processor.Settings, cfg *Config, next consumer.Traces, j journal.Journal) (*spanFilterProcessor, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	ti := cfg.TraceIntegrity
	p := &spanFilterProcessor{
		logger:    set.Logger,
		next:      next,
		filter:    newSpanFilter(cfg),
		cfg:       ti,
		sampling:  cfg.Sampling,
		telemetry: tb,
		journal:   j,
		scratch:   sync.Pool{New: func() any { return &batchScratch{} }},
		now:       time.Now,
	}
	p.mem = tracememory.New(tracememory.Config{
		WaitDuration:     ti.WaitDuration,
		MaxWaitDuration:  ti.MaxWaitDuration,
		RememberDuration: ti.RememberDuration,
		LateParentWindow: ti.LateParentWindow,
		MaxTraces:        ti.MaxTraces,
		MemoryLimitBytes: int64(ti.MemoryLimitMiB) << 20,
		ConnectorSpans:   ti.ConnectorSpans,
		ContentWait:      cfg.ContentJoin.Wait,
		Journaled:        j != journal.Nop,
		Now:              func() time.Time { return p.now() },
		Logger:           set.Logger,
	}, j, newContentJoin(cfg.ContentJoin), p.recordStats)
	if err := p.registerGauges(); err != nil {
		tb.Shutdown()
		return nil, err
	}
	return p, nil
}

// recoverJournal re-admits what a previous process left in the journal; content first, so that
// recovered spans that wait for it are joined as they are re-admitted.
func (p *spanFilterProcessor) recoverJournal(records []journal.Record) error {
	_, contentErr := recoverContent(p.mem, records)
	return errors.Join(contentErr, p.mem.Recover(records))
}

func (p *spanFilterProcessor) start(ctx context.Context, host component.Host) error {
	if p.sampling != nil { // the sampling extension's rate, before any span
		decider, err := sampling.FromExtensions(host.GetExtensions(), *p.sampling)
		if err != nil {
			return err
		}
		p.filter.sampler = decider.Ratio()
		p.filter.experiments = decider
	}
	// With the storage option, what a killed process held is re-admitted before the first span.
	if sj, ok := p.journal.(*storageJournal); ok {
		records, err := sj.start(ctx, host)
		if err != nil {
			return fmt.Errorf("svcspanfilter: %w", err)
		}
		if err := p.recoverJournal(records); err != nil {
			p.logger.Warn("Some held spans or content records of the previous run could not be recovered", zap.Error(err))
		}
	}
	p.stop, p.stopped = make(chan struct{}), make(chan struct{})
	// Often enough that a span waits at most about a fifth longer than wait_duration.
	go p.runReleaser(min(max(p.cfg.WaitDuration/5, 5*time.Millisecond), time.Second))
	p.running.Store(true)
	return nil
}

func (p *spanFilterProcessor) runReleaser(interval time.Duration) {
	defer close(p.stopped)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-ticker.C:
			p.mem.Expire()
		case <-p.mem.Wake():
		}
		// Released by time, or refused before.
		p.deliver(context.Background(), p.mem.TakeReady(), false)
	}
}

// shutdown stops the releaser and, with on_shutdown: release, delivers everything still held by
// rule 1. With keep, held spans stay journaled to wait again after the next start (a graceful restart
// does not cut agent trees whose parents are still open). Spans the next consumer still refuses stay
// in the journal, or without one are lost and reported in the error.
func (p *spanFilterProcessor) shutdown(ctx context.Context) error {
	p.running.Store(false)
	defer p.telemetry.Shutdown()
	journaled := p.journal != journal.Nop
	if sj, ok := p.journal.(*storageJournal); ok {
		// Closed last, after the final delivery has removed what it handed on.
		defer func() {
			if err := sj.shutdown(context.WithoutCancel(ctx)); err != nil {
				p.logger.Warn("Closing the journal of held spans failed", zap.Error(err))
			}
		}()
	}
	if p.stop != nil {
		close(p.stop)
		select {
		case <-p.stopped:
		case <-ctx.Done():
			// The releaser is stuck in the next consumer; what it has not delivered is lost (or, with
			// a journal, delivered after the restart).
			if left := p.mem.HeldSpans(); left > 0 && !journaled {
				p.giveUp(ctx, int(left), "shutdown timed out while the next consumer was still busy")
			}
			return ctx.Err()
		}
		p.stop = nil
	}
	keep := journaled && p.cfg.OnShutdown == onShutdownKeep
	final := p.mem.Drain
	if keep {
		final = p.mem.TakeReady
	}
	lost := p.deliver(ctx, final(), true)
	switch {
	case lost > 0 && journaled:
		p.logger.Warn("The next consumer still refused released spans at shutdown; they stay in the journal "+
			"and are delivered after the next start", zap.Int("spans", lost))
	case lost > 0:
		p.giveUp(ctx, lost, "the next consumer still refused them at shutdown")
		return fmt.Errorf("svcspanfilter: %d spans released at shutdown could not be delivered", lost)
	}
	if held := p.mem.HeldSpans(); keep && held > 0 {
		p.logger.Info("Held spans stay in the journal and wait for their parents again after the next start",
			zap.Int64("spans", held))
	}
	return nil
}

// reasons are the precomputed `reason` attribute sets, by reason, so recording allocates nothing.
var reasons = struct {
	decision, reparent, release, evict, unmatch []metric.AddOption
}{
	decision: reasonOpts(numDecisions, decision.reason),
	reparent: reasonOpts(tracememory.NumReparentReasons, tracememory.ReparentReason.String),
	release:  reasonOpts(tracememory.NumReleaseReasons, tracememory.ReleaseReason.String),
	evict:    reasonOpts(tracememory.NumEvictReasons, tracememory.EvictReason.String),
	unmatch:  reasonOpts(tracememory.NumUnmatchedReasons, tracememory.UnmatchedReason.String),
}

func reasonOpt(reason string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason)))
}

func reasonOpts[R ~uint8](n R, name func(R) string) []metric.AddOption {
	opts := make([]metric.AddOption, n)
	for r := range n {
		opts[r] = reasonOpt(name(r))
	}
	return opts
}

// addByReason adds each non-zero count with the option of its reason.
func addByReason(ctx context.Context, c metric.Int64Counter, counts []int64, opts []metric.AddOption) {
	for r, n := range counts {
		if n > 0 {
			c.Add(ctx, n, opts[r])
		}
	}
}

func (p *spanFilterProcessor) registerGauges() error {
	gauge := func(read func() int64) metric.Int64Callback {
		return func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(read())
			return nil
		}
	}
	tb := p.telemetry
	return errors.Join(
		tb.RegisterProcessorSvcspanfilterSpansHeldCallback(gauge(p.mem.HeldSpans)),
		tb.RegisterProcessorSvcspanfilterHeldBytesCallback(gauge(p.mem.HeldBytes)),
		tb.RegisterProcessorSvcspanfilterMemoryBytesCallback(gauge(p.mem.Bytes)),
		tb.RegisterProcessorSvcspanfilterTracesInMemoryCallback(gauge(p.mem.Traces)),
	)
}

// recordStats is the memory's observer: it turns its events into metrics.
func (p *spanFilterProcessor) recordStats(s *tracememory.Stats) {
	ctx, tb := context.Background(), p.telemetry
	addByReason(ctx, tb.ProcessorSvcspanfilterSpansReparented, s.Reparented[:], reasons.reparent)
	addByReason(ctx, tb.ProcessorSvcspanfilterSpansReleased, s.Released[:], reasons.release)
	addByReason(ctx, tb.ProcessorSvcspanfilterTracesEvicted, s.Evicted[:], reasons.evict)
	addByReason(ctx, tb.ProcessorSvcspanfilterContentUnmatched, s.ContentUnmatched[:], reasons.unmatch)
	if s.Connectors > 0 {
		tb.ProcessorSvcspanfilterConnectorSpans.Add(ctx, s.Connectors)
	}
	if s.ContentJoined > 0 {
		tb.ProcessorSvcspanfilterContentJoined.Add(ctx, s.ContentJoined)
	}
	for _, d := range s.ContentWaits {
		tb.ProcessorSvcspanfilterContentWait.Record(ctx, d.Seconds())
	}
	if s.EvictedWaiting > 0 {
		p.warnEvicted(s.EvictedWaiting)
	}
}

// evictionLog rate-limits the eviction warning to one per 10 s under sustained overload.
type evictionLog struct {
	mu      sync.Mutex
	evicted int64 // since the last warning
	last    time.Time
}

// warnEvicted: forgetting idle traces is the normal life of a full memory; spans going on early
// (the traces evicted held some) is not.
func (p *spanFilterProcessor) warnEvicted(n int64) {
	l, now := &p.evictions, p.now()
	l.mu.Lock()
	l.evicted += n
	if !l.last.IsZero() && now.Sub(l.last) < 10*time.Second {
		l.mu.Unlock()
		return
	}
	evicted := l.evicted
	l.evicted, l.last = 0, now
	l.mu.Unlock()
	p.logger.Warn("trace_integrity memory_limit_mib or max_traces reached: idle traces were forgotten and the "+
		"spans still waiting for their parent in the traces idle the longest went on with their parent id "+
		"unchanged. Raise memory_limit_mib or max_traces, lower wait_duration, or add gateway instances with "+
		"trace-id-affine routing in front of them.",
		zap.Int("memory_limit_mib", p.cfg.MemoryLimitMiB),
		zap.Int("max_traces", p.cfg.MaxTraces),
		zap.Int64("traces_evicted", evicted))
}
