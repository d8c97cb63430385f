package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// spanFilterProcessor decides spans (rules.go), has the memory admit them, and delivers (never under a lock).
type spanFilterProcessor struct {
	logger        *zap.Logger
	next          consumer.Traces
	filter        *spanFilter
	cfg           *Config
	telemetry     *metadata.TelemetryBuilder
	mem           *tracememory.Memory
	outcome       *outcome.Sampler // outcome sampling, the memory's gate; nil when off
	journal       journal.Journal
	scratch       sync.Pool
	now           func() time.Time          // the memory's clock; tests replace it before the first span
	evicted       atomic.Int64              // traces evicted with held spans since the last eviction warning
	warnedAt      atomic.Pointer[time.Time] // when that warning was logged last (nil: never)
	stop, stopped chan struct{}             // the releaser's
	running       atomic.Bool               // from start (recovery done) to shutdown; content is refused outside it
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
		cfg:       cfg,
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
	gauge := func(read func() int64) metric.Int64Callback {
		return func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(read())
			return nil
		}
	}
	if err := errors.Join(
		tb.RegisterProcessorSvcspanfilterSpansHeldCallback(gauge(p.mem.HeldSpans)),
		tb.RegisterProcessorSvcspanfilterHeldBytesCallback(gauge(p.mem.HeldBytes)),
		tb.RegisterProcessorSvcspanfilterMemoryBytesCallback(gauge(p.mem.Bytes)),
		tb.RegisterProcessorSvcspanfilterMemoryLimitBytesCallback(gauge(func() int64 { return int64(ti.MemoryLimitMiB) << 20 })),
		tb.RegisterProcessorSvcspanfilterTracesInMemoryCallback(gauge(p.mem.Traces)),
		tb.RegisterProcessorSvcspanfilterDecisionHeldBytesCallback(gauge(p.mem.GatedBytes)),
	); err != nil {
		tb.Shutdown()
		return nil, err
	}
	return p, nil
}

// recoverJournal re-admits what a previous process left; content first, to join it as spans return.
func (p *spanFilterProcessor) recoverJournal(records []journal.Record) error {
	out, contentErr := recoverContent(p.mem, records, p.cfg.ContentJoin.Enabled)
	if n := out[tracememory.ContentDiscarded]; n > 0 && !p.cfg.ContentJoin.Enabled {
		p.logger.Warn("content_join is off: GenAI content records journaled by a run with it on are discarded",
			zap.Int("records", n))
	}
	if p.outcome == nil { // off now: nothing is decided by trace
		return errors.Join(contentErr, outcome.Forget(p.journal, records), p.mem.Recover(records))
	}
	decisionsErr := p.outcome.RecoverDecisions(records) // held spans then follow their decision
	scores := func() error { return p.outcome.RecoverScores(records) }
	return errors.Join(contentErr, decisionsErr, p.mem.Recover(records, scores))
}

func (p *spanFilterProcessor) start(ctx context.Context, host component.Host) error {
	if p.cfg.Sampling != nil { // the sampling extension's rate, before any span
		decider, err := sampling.FromExtensions(host.GetExtensions(), *p.cfg.Sampling)
		if err != nil {
			return err
		}
		p.filter.sampler, p.filter.experiments = decider.Ratio(), decider
		if err := p.startOutcome(host); err != nil {
			return err
		}
	}
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
	// The releaser ticks often enough that a span waits at most about a fifth longer than wait_duration.
	tick := min(max(p.cfg.TraceIntegrity.WaitDuration/5, 5*time.Millisecond), time.Second)
	go release(p.stop, p.stopped, tick, p.mem.Wake(), func() {
		p.mem.Expire()
		if sj, ok := p.journal.(*storageJournal); ok {
			if s := sj.s.Load(); s != nil { // the deletes Remove left owed, when no call's write carried them
				if err := s.Flush(context.Background()); err != nil {
					p.logger.Debug("Could not remove journal records; the next write retries", zap.Error(err))
				}
			}
		}
	}, func() {
		p.deliver(context.Background(), p.mem.TakeReady(), false) // released by time, or refused before
	})
	p.running.Store(true)
	return nil
}

// release is a releaser: it hands on what the memory released at each wake and each tick (after
// onTick), until stop is closed; then it closes stopped.
func release(stop, stopped chan struct{}, tick time.Duration, wake <-chan struct{}, onTick, handOn func()) {
	defer close(stopped)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
			onTick()
		case <-wake:
		}
		handOn()
	}
}

// startOutcome applies the sampling extension's outcome section, if it has one: the trace memory
// holds the kept spans of undecided traces and decides them (docs/outcome-sampling.md), and the
// filter's sampler keeps every trace. Before any span, and before recovery re-admits held spans.
func (p *spanFilterProcessor) startOutcome(host component.Host) error {
	o, err := sampling.OutcomeFromExtensions(host.GetExtensions(), *p.cfg.Sampling)
	if err != nil || o == nil {
		return err
	}
	maxHeld, limit := o.Config().MaxHeldMiB, p.cfg.TraceIntegrity.MemoryLimitMiB
	if maxHeld > limit {
		return fmt.Errorf("svcspanfilter: the outcome section of %s holds up to max_held_mib %d MiB, more than "+
			"trace_integrity.memory_limit_mib %d: raise memory_limit_mib or lower max_held_mib", *p.cfg.Sampling, maxHeld, limit)
	}
	p.setOutcome(o, int64(maxHeld)<<20)
	return nil
}

// setOutcome makes outcome sampling by o the memory's gate; the filter's sampler keeps every trace.
func (p *spanFilterProcessor) setOutcome(o *sampling.Outcome, maxHeldBytes int64) {
	p.outcome = outcome.New(outcome.Settings{Outcome: o, Memory: p.mem, Journal: p.journal,
		Now: func() time.Time { return p.now() }, Logger: p.logger, Telemetry: p.telemetry})
	p.mem.SetGate(p.outcome, maxHeldBytes)
	p.filter.sampler, p.filter.outcome = sampling.NewRatio(1), true
}

// shutdown stops the releaser and releases what is held by rule 1, or with on_shutdown: keep leaves it
// journaled, so a restart keeps open agent trees; refused spans stay journaled, or without one are lost.
func (p *spanFilterProcessor) shutdown(ctx context.Context) error {
	p.running.Store(false)
	defer p.telemetry.Shutdown()
	if sj, ok := p.journal.(*storageJournal); ok {
		defer func() { // last, after the final delivery removed what it handed on
			if s := sj.s.Swap(nil); s != nil {
				if err := s.Close(context.WithoutCancel(ctx)); err != nil {
					p.logger.Warn("Closing the journal of held spans failed", zap.Error(err))
				}
			}
		}()
	}
	if p.stop != nil {
		if err := stopReleaser(ctx, p.stop, p.stopped); err != nil {
			// The releaser is stuck in the next consumer; without a journal its spans are lost.
			if left := p.mem.HeldSpans(); left > 0 && p.journal == journal.Nop {
				p.giveUp(ctx, p.spans(), int(left), undeliverableShutdown, "shutdown timed out while the next consumer was still busy")
			}
			return err
		}
		p.stop = nil
	}
	keep := p.keepOnShutdown()
	final := p.mem.Drain
	if keep {
		final = p.mem.TakeReady
	}
	if err := p.refusedAtShutdown(ctx, p.spans(), p.deliver(ctx, final(), true)); err != nil {
		return err
	}
	if held := p.mem.HeldSpans(); keep && held > 0 {
		p.logger.Info("Held spans stay in the journal and wait for their parents again after the next start",
			zap.Int64("spans", held))
	}
	return nil
}

// processTraces returns the batch less its dropped and held spans, after the memory admitted it. A
// retryable error (push back, a failed write ahead) refuses it all.
func (p *spanFilterProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	sc := p.scratch.Get().(*batchScratch) // sc.verdict is reset by forScope, before each scope
	defer p.scratch.Put(sc)
	sc.verdicts, sc.decisions = sc.verdicts[:0], sc.decisions[:0]
	now := p.now()
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			p.filter.forScope(ss.Scope(), &sc.verdict)
			for _, span := range ss.Spans().All() {
				reason, d := p.filter.judge(&sc.verdict, span, now)
				sc.verdicts = append(sc.verdicts, reason)
				sc.decisions = append(sc.decisions, d)
			}
		}
	}
	adm, err := p.mem.Admit(client.FromContext(ctx), td, sc.decisions)
	if err != nil {
		p.telemetry.ProcessorSvcspanfilterSpansRefused.Add(ctx, int64(len(sc.decisions)))
		if !errors.Is(err, tracememory.ErrOverloaded) {
			p.logger.Warn("Could not record the spans of a call in the journal; the call is refused for the "+
				"client to retry", zap.Error(err))
		}
		return td, err
	}
	var counts [numDecisions]int64 // a sampled-out span is kept when its trace is an experiment
	for i, d := range sc.verdicts {
		if d.kept() && !adm.Kept[i] {
			d = droppedSampledOut
		}
		counts[d]++
	}
	tb, opts := p.telemetry, reasons.decision // the kept decisions come first
	addByReason(ctx, tb.ProcessorSvcspanfilterSpansKept, counts[:droppedNotGenAI], opts)
	addByReason(ctx, tb.ProcessorSvcspanfilterSpansDropped, counts[droppedNotGenAI:], opts[droppedNotGenAI:])
	p.deliver(ctx, adm.Deliveries, false)
	if !adm.Pass {
		return td, processorhelper.ErrSkipProcessingData
	}
	return td, nil
}

// batchScratch is the per-call working memory, pooled so the steady state does not allocate it.
type batchScratch struct {
	verdict   scopeVerdict
	verdicts  []decision
	decisions []tracememory.Decision
}

// deliver hands released spans on (handOn), then reports those taken (or given up) to the memory
// at once: the journal records they finish go in one write.
func (p *spanFilterProcessor) deliver(ctx context.Context, ds []*tracememory.Delivery, tryAll bool) int {
	done, later, refused := handOn(p, ctx, ds, tryAll, p.spans(), func(d *tracememory.Delivery) attempt {
		return attempt{d.Spans, &d.Panics, &d.RetryAt, func(ctx context.Context) error {
			return p.next.ConsumeTraces(client.NewContext(ctx, d.Info), d.Traces)
		}}
	})
	p.mem.Delivered(done...)
	if len(later) > 0 {
		p.mem.Requeue(later...)
	}
	return refused
}

// reasons are the precomputed `reason` attribute sets, by reason, so recording allocates nothing.
var reasons = struct{ decision, reparent, release, evict, unmatch []metric.AddOption }{
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

func addByReason(ctx context.Context, c metric.Int64Counter, counts []int64, opts []metric.AddOption) {
	for r, n := range counts {
		if n > 0 {
			c.Add(ctx, n, opts[r])
		}
	}
}

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
	if s.Discarded > 0 { // kept spans of traces outcome sampling dropped
		tb.ProcessorSvcspanfilterSpansDropped.Add(ctx, s.Discarded, reasons.decision[droppedSampledOut])
	}
	if s.EvictedWaiting == 0 {
		return
	}
	// Idle traces forgotten are the life of a full memory; held spans going on early are not.
	p.evicted.Add(s.EvictedWaiting)
	now, last := p.now(), p.warnedAt.Load() // now.Sub: monotonic, unlike wall-clock numbers
	if last != nil && now.Sub(*last) < 10*time.Second || !p.warnedAt.CompareAndSwap(last, &now) {
		return // at most one warning per 10 s, with the count since the last one
	}
	evicted := p.evicted.Swap(0)
	p.logger.Warn("trace_integrity memory_limit_mib or max_traces reached: idle traces were forgotten and the "+
		"spans still waiting for their parent in the traces idle the longest went on with their parent id "+
		"unchanged. Raise memory_limit_mib or max_traces, lower wait_duration, or add gateway instances with "+
		"trace-id-affine routing in front of them.",
		zap.Int("memory_limit_mib", p.cfg.TraceIntegrity.MemoryLimitMiB),
		zap.Int("max_traces", p.cfg.TraceIntegrity.MaxTraces),
		zap.Int64("traces_evicted", evicted))
}

// errNotRunning refuses content and score records before start recovered the journal, or after
// shutdown: the client sends them again.
var errNotRunning = errors.New("svcspanfilter: the traces pipeline of this component is not running; retry later")

var errJournalNotStarted = errors.New("storage: the journal of held spans is not open yet")

func newProcessorJournal(cfg *Config, owner component.ID, logger *zap.Logger) journal.Journal {
	if cfg.Storage == nil {
		return journal.Nop
	}
	return &storageJournal{storageID: *cfg.Storage, owner: owner, logger: logger}
}

// storageJournal is the journal in the storage extension named by `storage`. The memory is built
// before start opens it: until then, and after shutdown, it refuses (retryably).
type storageJournal struct {
	storageID, owner component.ID
	logger           *zap.Logger
	s                atomic.Pointer[journal.Storage]
}

// start opens the processor's storage client, as exporterhelper's persistent queue does, and returns
// what a previous process left. Its errors say what to fix.
func (j *storageJournal) start(ctx context.Context, host component.Host) ([]journal.Record, error) {
	ext, found := host.GetExtensions()[j.storageID]
	if !found {
		return nil, fmt.Errorf("storage: extension %q is not running: configure it under `extensions:` "+
			"and list it in `service::extensions`", j.storageID)
	}
	storageExt, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("storage: extension %q is not a storage extension (use svc_file_storage or file_storage)", j.storageID)
	}
	// "held" names the processor's client (its file) beside the exporters' in the extension.
	client, err := storageExt.GetClient(ctx, component.KindProcessor, j.owner, "held")
	if err != nil {
		return nil, fmt.Errorf("storage: extension %q cannot open the processor's storage (is its directory "+
			"writable, with free space?): %w", j.storageID, err)
	}
	s, recovered, err := journal.Open(ctx, client, j.logger, outcome.LazyKinds...)
	if err != nil {
		_ = client.Close(ctx)
		return nil, fmt.Errorf("storage: extension %q: recover the held state: %w", j.storageID, err)
	}
	j.s.Store(s)
	return recovered, nil
}

func (j *storageJournal) Append(ctx context.Context, kind journal.Kind, heldAt time.Time, metadata map[string][]string, payload []byte) (uint64, error) {
	if s := j.s.Load(); s != nil {
		return s.Append(ctx, kind, heldAt, metadata, payload)
	}
	return 0, errJournalNotStarted
}

func (j *storageJournal) Remove(ctx context.Context, ids ...uint64) error {
	if s := j.s.Load(); s != nil {
		return s.Remove(ctx, ids...)
	}
	return errJournalNotStarted
}
