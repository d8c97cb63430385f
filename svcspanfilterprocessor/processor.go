package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
)

// evictionLogInterval limits the warning about max_traces to one per interval under sustained overload.
const evictionLogInterval = 10 * time.Second

// spanFilterProcessor filters spans synchronously (the batch it is given goes on at once, less its
// dropped spans and the kept spans that must wait for their parent) and delivers waiting spans from
// its own releaser goroutine when their parent arrives, their wait ends, or the collector stops.
type spanFilterProcessor struct {
	logger    *zap.Logger
	next      consumer.Traces
	filter    *spanFilter
	cfg       TraceIntegrityConfig
	telemetry *metadata.TelemetryBuilder
	metricOpt metricOptions
	now       func() time.Time
	scratch   sync.Pool

	mu    sync.Mutex
	state *integrityState
	// pending are released spans the releaser has not delivered yet.
	pending []releasedSpan
	// retry are deliveries the next consumer refused with a retryable error, oldest first.
	retry []delivery
	// evictedSinceLog counts waiting traces evicted since the last warning.
	evictedSinceLog int
	lastEvictionLog time.Time

	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

// delivery is one ConsumeTraces call of released spans: spans of one request's client context.
type delivery struct {
	info   client.Info
	traces ptrace.Traces
}

// metricOptions are the precomputed `reason` attribute sets, so recording allocates nothing per reason.
type metricOptions struct {
	decision [numDecisions]metric.AddOption
	reparent [numReparentReasons]metric.AddOption
}

func newMetricOptions() metricOptions {
	var o metricOptions
	for d := range numDecisions {
		o.decision[d] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", d.reason())))
	}
	for r := range numReparentReasons {
		o.reparent[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r.String())))
	}
	return o
}

func newSpanFilterProcessor(set processor.Settings, cfg *Config, next consumer.Traces) (*spanFilterProcessor, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	p := &spanFilterProcessor{
		logger:    set.Logger,
		next:      next,
		filter:    newSpanFilter(cfg),
		cfg:       cfg.TraceIntegrity,
		telemetry: tb,
		metricOpt: newMetricOptions(),
		now:       time.Now,
		state:     newIntegrityState(cfg.TraceIntegrity),
		wake:      make(chan struct{}, 1),
	}
	p.scratch.New = func() any { return &batchScratch{} }
	err = errors.Join(
		tb.RegisterProcessorSvcspanfilterTracesWaitingCallback(p.observe(func(s *integrityState) int { return s.waiting.Len() })),
		tb.RegisterProcessorSvcspanfilterSpansWaitingCallback(p.observe(func(s *integrityState) int { return s.spansHeld })),
		tb.RegisterProcessorSvcspanfilterTracesInMemoryCallback(p.observe(func(s *integrityState) int { return len(s.traces) })),
	)
	if err != nil {
		tb.Shutdown()
		return nil, err
	}
	return p, nil
}

func (p *spanFilterProcessor) observe(read func(*integrityState) int) metric.Int64Callback {
	return func(_ context.Context, o metric.Int64Observer) error {
		p.mu.Lock()
		v := read(p.state)
		p.mu.Unlock()
		o.Observe(int64(v))
		return nil
	}
}

// releaserInterval is how often the releaser looks for expired waits: often enough that a span waits
// at most about a fifth longer than wait_duration.
func releaserInterval(wait time.Duration) time.Duration {
	return min(max(wait/5, 5*time.Millisecond), time.Second)
}

func (p *spanFilterProcessor) start(context.Context, component.Host) error {
	p.stop = make(chan struct{})
	p.stopped = make(chan struct{})
	go p.runReleaser(releaserInterval(p.cfg.WaitDuration))
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
			p.expire()
		case <-p.wake:
		}
		p.deliverPending(context.Background(), false)
	}
}

// shutdown stops the releaser and delivers everything still held, as roots, so that nothing is lost
// when the collector stops. Spans the next consumer still refuses are reported in the error.
func (p *spanFilterProcessor) shutdown(ctx context.Context) error {
	defer p.telemetry.Shutdown()
	if p.stop != nil {
		close(p.stop)
		select {
		case <-p.stopped:
		case <-ctx.Done():
			// The releaser is stuck in the next consumer; what it has not delivered is lost.
			p.mu.Lock()
			left := p.state.spansHeld + len(p.pending)
			for _, d := range p.retry {
				left += d.traces.SpanCount()
			}
			p.mu.Unlock()
			if left > 0 {
				p.giveUp(ctx, left, "shutdown timed out while the next consumer was still busy")
			}
			return ctx.Err()
		}
		p.stop = nil
	}
	p.mu.Lock()
	drained := p.state.drain(nil, p.now())
	p.pending = append(p.pending, drained...)
	p.mu.Unlock()
	p.recordReleased(ctx, drained)
	p.deliverPending(ctx, true)

	p.mu.Lock()
	left := p.retry
	p.retry = nil
	p.mu.Unlock()
	lost := 0
	for _, d := range left {
		lost += d.traces.SpanCount()
	}
	if lost > 0 {
		p.giveUp(ctx, lost, "the next consumer still refused them at shutdown")
		return fmt.Errorf("svcspanfilter: %d spans released at shutdown could not be delivered", lost)
	}
	return nil
}

// processTraces is the synchronous part: filter every span, resolve the parents of kept spans,
// and return the batch less its dropped and waiting spans.
func (p *spanFilterProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	sc := p.scratch.Get().(*batchScratch)
	defer func() {
		sc.reset() // drop the references to this batch before pooling
		p.scratch.Put(sc)
	}()

	p.decideAll(td, sc)
	released, evicted := p.resolveAll(ctx, td, sc)
	p.recordBatch(ctx, sc)
	if len(released) > 0 {
		p.recordReleased(ctx, released)
		p.mu.Lock()
		p.pending = append(p.pending, released...)
		p.mu.Unlock()
		select {
		case p.wake <- struct{}{}:
		default: // the releaser is already woken
		}
	}
	if evicted > 0 {
		p.warnEvicted(ctx, evicted)
	}
	if !sc.removeDroppedAndHeld(td) {
		return td, processorhelper.ErrSkipProcessingData
	}
	return td, nil
}

// decideAll runs the filter on every span of td.
func (p *spanFilterProcessor) decideAll(td ptrace.Traces, sc *batchScratch) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			p.filter.forScope(ss.Scope(), &sc.verdict)
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				d := p.filter.decide(&sc.verdict, span)
				sc.counts[d]++
				sc.spans = append(sc.spans, spanRef{span: span, decision: d, resource: int32(i), scope: int32(j)})
			}
		}
	}
}

// resolveAll records every span in its trace's memory, then settles each kept span: it keeps its
// parent, is re-parented, or is moved out of td to wait. Spans held by earlier batches that this
// batch resolves are returned for the releaser, with the number of waiting traces evicted.
func (p *spanFilterProcessor) resolveAll(ctx context.Context, td ptrace.Traces, sc *batchScratch) ([]releasedSpan, int) {
	if len(sc.spans) == 0 {
		return nil, 0
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.state
	st.gen++

	// Record first, resolve second: a parent later in the same batch is then already known.
	var ts *traceState
	for i := range sc.spans {
		r := &sc.spans[i]
		id := r.span.TraceID()
		if ts == nil || ts.id != id {
			ts = st.trace(id, now)
			if ts.gen != st.gen {
				ts.gen = st.gen
				sc.touched = append(sc.touched, ts)
			}
		}
		r.trace = ts
		ts.record(r.span.SpanID(), r.span.ParentSpanID(), r.decision.kept())
	}

	for i := range sc.spans {
		r := &sc.spans[i]
		if !r.decision.kept() {
			continue
		}
		res, ancestor := r.trace.resolve(r.span.SpanID(), r.span.ParentSpanID())
		if res != unresolved && len(r.trace.held) > 0 {
			// The span was sent again and now goes on: its earlier copy must not follow it.
			st.discardHeld(r.trace, r.span.SpanID(), now)
		}
		switch res {
		case resolvedAncestor:
			reparent(r.span, ancestor)
			sc.reparented[reparentDroppedParent]++
		case resolvedRoot:
			makeRoot(r.span)
			sc.reparented[reparentNoKeptAncestor]++
		case unresolved:
			st.hold(r.trace, r.span, sc.origin(ctx, td, r), now)
			r.held = true
		}
	}

	var released []releasedSpan
	for _, ts := range sc.touched {
		if len(ts.held) > 0 {
			released = st.resolveHeld(ts, released, now)
		}
	}
	released, evicted := st.evict(released, now)
	if evicted > 0 {
		p.evictedSinceLog += evicted
	}
	return released, evicted
}

func (p *spanFilterProcessor) recordBatch(ctx context.Context, sc *batchScratch) {
	for d, n := range sc.counts {
		if n == 0 {
			continue
		}
		if decision(d).kept() {
			p.telemetry.ProcessorSvcspanfilterSpansKept.Add(ctx, n, p.metricOpt.decision[d])
		} else {
			p.telemetry.ProcessorSvcspanfilterSpansDropped.Add(ctx, n, p.metricOpt.decision[d])
		}
	}
	for r, n := range sc.reparented {
		if n > 0 {
			p.telemetry.ProcessorSvcspanfilterSpansReparented.Add(ctx, n, p.metricOpt.reparent[r])
		}
	}
}

func (p *spanFilterProcessor) recordReleased(ctx context.Context, released []releasedSpan) {
	var counts [numReparentReasons]int64
	for _, r := range released {
		if r.reparented {
			counts[r.reason]++
		}
	}
	for r, n := range counts {
		if n > 0 {
			p.telemetry.ProcessorSvcspanfilterSpansReparented.Add(ctx, n, p.metricOpt.reparent[r])
		}
	}
	if counts[reparentWaitExpired] > 0 {
		p.logger.Debug("Spans waited the whole trace_integrity wait for their parent and were made roots",
			zap.Int64("spans", counts[reparentWaitExpired]))
	}
}

// warnEvicted logs that max_traces was reached, at most once per evictionLogInterval.
func (p *spanFilterProcessor) warnEvicted(ctx context.Context, evicted int) {
	p.telemetry.ProcessorSvcspanfilterTracesEvicted.Add(ctx, int64(evicted))
	p.mu.Lock()
	now := p.now()
	if !p.lastEvictionLog.IsZero() && now.Sub(p.lastEvictionLog) < evictionLogInterval {
		p.mu.Unlock()
		return
	}
	n := p.evictedSinceLog
	p.evictedSinceLog = 0
	p.lastEvictionLog = now
	p.mu.Unlock()
	p.logger.Warn("trace_integrity.max_traces reached: the spans still waiting for their parent in the "+
		"traces idle the longest were released as roots of their traces. Raise max_traces, lower "+
		"wait_duration, or add gateway instances with trace-id-affine routing in front of them.",
		zap.Int("max_traces", p.cfg.MaxTraces),
		zap.Int("traces_evicted", n))
}

// expire moves the spans whose wait ended to pending.
func (p *spanFilterProcessor) expire() {
	p.mu.Lock()
	start := len(p.pending)
	p.pending = p.state.expire(p.now(), p.pending)
	expired := p.pending[start:]
	p.mu.Unlock()
	if len(expired) > 0 {
		p.recordReleased(context.Background(), expired)
	}
}

// deliverPending retries earlier refused deliveries, oldest first, then sends the pending spans.
// Unless tryAll, it stops at the first retryable refusal: the next consumer is then under
// back-pressure and the rest waits for the next round.
func (p *spanFilterProcessor) deliverPending(ctx context.Context, tryAll bool) {
	p.mu.Lock()
	pending := p.pending
	p.pending = nil
	retry := p.retry
	p.retry = nil
	p.mu.Unlock()

	var failed []delivery
	refused := false
	for _, d := range append(retry, groupReleased(pending)...) {
		if refused {
			failed = append(failed, d)
			continue
		}
		err := p.next.ConsumeTraces(client.NewContext(ctx, d.info), d.traces)
		switch {
		case err == nil:
		case consumererror.IsPermanent(err):
			p.giveUp(ctx, d.traces.SpanCount(), "the next consumer refused them permanently: "+err.Error())
		default:
			refused = !tryAll
			failed = append(failed, d)
			p.logger.Warn("The next consumer refused released spans; they will be retried",
				zap.Int("spans", d.traces.SpanCount()), zap.Error(err))
		}
	}
	if len(failed) == 0 {
		return
	}
	p.mu.Lock()
	p.retry = append(failed, p.retry...)
	// The retry buffer is bounded like the traces in memory; beyond it the oldest are given up.
	var lost int
	for len(p.retry) > p.cfg.MaxTraces {
		lost += p.retry[0].traces.SpanCount()
		p.retry = p.retry[1:]
	}
	p.mu.Unlock()
	if lost > 0 {
		p.giveUp(ctx, lost, "the retry buffer of refused deliveries is full (trace_integrity.max_traces)")
	}
}

// giveUp is the only place where spans are lost, and it says so.
func (p *spanFilterProcessor) giveUp(ctx context.Context, spans int, why string) {
	p.telemetry.ProcessorSvcspanfilterSpansUndeliverable.Add(ctx, int64(spans))
	p.logger.Error("Released spans were lost: "+why, zap.Int("spans", spans))
}

// groupReleased builds one delivery per request client context, with the spans grouped under copies
// of their original resource and scope.
func groupReleased(released []releasedSpan) []delivery {
	if len(released) == 0 {
		return nil
	}
	var out []delivery
	byRequest := map[*requestOrigin]int{}
	resources := map[*resourceOrigin]ptrace.ResourceSpans{}
	scopes := map[*scopeOrigin]ptrace.ScopeSpans{}
	for _, r := range released {
		origin := r.origin
		req := origin.resource.request
		idx, ok := byRequest[req]
		if !ok {
			idx = len(out)
			byRequest[req] = idx
			out = append(out, delivery{info: req.info, traces: ptrace.NewTraces()})
		}
		ss, ok := scopes[origin]
		if !ok {
			rs, ok := resources[origin.resource]
			if !ok {
				rs = out[idx].traces.ResourceSpans().AppendEmpty()
				origin.resource.resource.CopyTo(rs.Resource())
				rs.SetSchemaUrl(origin.resource.schemaURL)
				resources[origin.resource] = rs
			}
			ss = rs.ScopeSpans().AppendEmpty()
			origin.scope.CopyTo(ss.Scope())
			ss.SetSchemaUrl(origin.schemaURL)
			scopes[origin] = ss
		}
		r.span.MoveTo(ss.Spans().AppendEmpty())
	}
	return out
}

// batchScratch is the per-call working memory, pooled so the steady state does not allocate it.
type batchScratch struct {
	verdict    scopeVerdict
	spans      []spanRef
	touched    []*traceState
	counts     [numDecisions]int64
	reparented [numReparentReasons]int64

	// origins of held spans, created once per request, ResourceSpans and ScopeSpans.
	request     *requestOrigin
	resourceIdx int32
	resource    *resourceOrigin
	scopeIdx    int32
	scope       *scopeOrigin
}

type spanRef struct {
	span     ptrace.Span
	trace    *traceState
	decision decision
	held     bool
	resource int32
	scope    int32
}

func (sc *batchScratch) reset() {
	clear(sc.spans)
	clear(sc.touched)
	*sc = batchScratch{
		spans:   sc.spans[:0],
		touched: sc.touched[:0],
		verdict: scopeVerdict{dropSpanNames: sc.verdict.dropSpanNames[:0]},
	}
}

// origin returns the shared resource and scope copies for a span about to be held.
func (sc *batchScratch) origin(ctx context.Context, td ptrace.Traces, r *spanRef) *scopeOrigin {
	if sc.request == nil {
		sc.request = &requestOrigin{info: client.FromContext(ctx)}
	}
	if sc.resource == nil || sc.resourceIdx != r.resource {
		rs := td.ResourceSpans().At(int(r.resource))
		res := pcommon.NewResource()
		rs.Resource().CopyTo(res)
		sc.resource = &resourceOrigin{request: sc.request, resource: res, schemaURL: rs.SchemaUrl()}
		sc.resourceIdx = r.resource
		sc.scope = nil
	}
	if sc.scope == nil || sc.scopeIdx != r.scope {
		ss := td.ResourceSpans().At(int(r.resource)).ScopeSpans().At(int(r.scope))
		scope := pcommon.NewInstrumentationScope()
		ss.Scope().CopyTo(scope)
		sc.scope = &scopeOrigin{resource: sc.resource, scope: scope, schemaURL: ss.SchemaUrl()}
		sc.scopeIdx = r.scope
	}
	return sc.scope
}

// removeDroppedAndHeld removes from td the spans that were dropped or moved out to wait, and the
// resources and scopes left empty. It reports whether any span is left.
func (sc *batchScratch) removeDroppedAndHeld(td ptrace.Traces) bool {
	i := 0
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(ptrace.Span) bool {
				r := sc.spans[i]
				i++
				return r.held || !r.decision.kept()
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	return td.ResourceSpans().Len() > 0
}
