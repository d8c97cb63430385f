package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// processTraces returns the batch less its dropped and held spans, after the memory admitted it
// (writing ahead what it may hold). A retryable error (push back, a failed write) refuses it all.
func (p *spanFilterProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	sc := p.scratch.Get().(*batchScratch) // sc.verdict is reset by forScope, before each scope
	defer p.scratch.Put(sc)
	sc.verdicts, sc.decisions = sc.verdicts[:0], sc.decisions[:0]
	now := p.now()
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			p.filter.forScope(ss.Scope(), &sc.verdict)
			for _, span := range ss.Spans().All() {
				v := p.filter.judge(&sc.verdict, span)
				d := tracememory.Decision{MarksExperiment: v.experiment}
				e := p.filter.experiments // the shared memory, as long-lived as the score connectors'
				if e != nil && v.experiment {
					e.Mark(span.TraceID(), now) // a dropped marking span marks its trace too
				}
				switch {
				case !v.decision.kept():
				case v.sampledOut:
					d.Verdict = tracememory.KeepIfExperiment
					d.MarksExperiment = e != nil && e.Keep(span.TraceID(), v.experiment, now) || v.experiment
				default:
					d.Verdict = tracememory.Keep
				}
				sc.verdicts = append(sc.verdicts, v.decision)
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
	// The kept decisions come first (decision.kept).
	tb, opts := p.telemetry, reasons.decision
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

// deliver hands released spans on, each with its request's client metadata. A retryable refusal puts
// the rest back for the releaser, or with tryAll counts the spans refused.
func (p *spanFilterProcessor) deliver(ctx context.Context, ds []*tracememory.Delivery, tryAll bool) int {
	refused := 0
	for i, d := range ds {
		err := p.consumeRecovering(ctx, d)
		switch {
		case err == nil:
			p.mem.Delivered(d)
		case consumererror.IsPermanent(err):
			p.giveUp(ctx, d.Spans, "the next consumer refused them permanently: "+err.Error())
			p.mem.Discard(d)
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

// consumeRecovering turns a panic of the next consumer (a bug in a later component) into a
// retryable refusal of d: were it to go on, d and the deliveries after it would be lost.
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
	if s.EvictedWaiting == 0 {
		return
	}
	// Idle traces forgotten are the life of a full memory; held spans going on early are not.
	l, now := &p.evictions, p.now()
	l.Lock()
	l.evicted += s.EvictedWaiting
	if !l.last.IsZero() && now.Sub(l.last) < 10*time.Second {
		l.Unlock()
		return
	}
	evicted := l.evicted
	l.evicted, l.last = 0, now
	l.Unlock()
	p.logger.Warn("trace_integrity memory_limit_mib or max_traces reached: idle traces were forgotten and the "+
		"spans still waiting for their parent in the traces idle the longest went on with their parent id "+
		"unchanged. Raise memory_limit_mib or max_traces, lower wait_duration, or add gateway instances with "+
		"trace-id-affine routing in front of them.",
		zap.Int("memory_limit_mib", p.cfg.TraceIntegrity.MemoryLimitMiB),
		zap.Int("max_traces", p.cfg.TraceIntegrity.MaxTraces),
		zap.Int64("traces_evicted", evicted))
}
