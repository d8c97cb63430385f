package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// processTraces is the synchronous part: decide every span, let the memory admit the batch (it
// writes ahead what it may hold), deliver the spans of earlier calls it released, and return the
// batch less its dropped and held spans. A retryable error (push back, a failed write) refuses the
// whole batch; the client sends it again.
func (p *spanFilterProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	sc := p.scratch.Get().(*batchScratch)
	defer func() {
		sc.reset()
		p.scratch.Put(sc)
	}()
	p.decideAll(td, sc)
	adm, err := p.mem.Admit(client.FromContext(ctx), td, sc.decisions)
	if err != nil {
		p.telemetry.ProcessorSvcspanfilterSpansRefused.Add(ctx, int64(len(sc.decisions)))
		if !errors.Is(err, tracememory.ErrOverloaded) {
			p.logger.Warn("Could not record the spans of a call in the journal; the call is refused for the client to retry", zap.Error(err))
		}
		return td, err
	}
	p.recordDecisions(ctx, sc, adm.Kept)
	// Spans this batch released go on now, with their own requests' client metadata.
	p.deliver(ctx, adm.Deliveries, false)
	if !adm.Pass {
		return td, processorhelper.ErrSkipProcessingData
	}
	return td, nil
}

// decideAll runs the filter on every span of td.
func (p *spanFilterProcessor) decideAll(td ptrace.Traces, sc *batchScratch) {
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
					if e != nil && e.Keep(span.TraceID(), v.experiment, now) {
						d.MarksExperiment = true
					}
				default:
					d.Verdict = tracememory.Keep
				}
				sc.verdicts = append(sc.verdicts, v.decision)
				sc.decisions = append(sc.decisions, d)
			}
		}
	}
}

// recordDecisions counts kept and dropped spans by reason; a sampled-out span is kept when its trace
// is an experiment.
func (p *spanFilterProcessor) recordDecisions(ctx context.Context, sc *batchScratch, kept []bool) {
	var counts [numDecisions]int64
	for i, d := range sc.verdicts {
		if d.kept() && !kept[i] {
			d = droppedSampledOut
		}
		counts[d]++
	}
	// The kept decisions come first (decision.kept).
	tb, opts := p.telemetry, p.metricOpt.decision
	addByReason(ctx, tb.ProcessorSvcspanfilterSpansKept, counts[:droppedNotGenAI], opts)
	addByReason(ctx, tb.ProcessorSvcspanfilterSpansDropped, counts[droppedNotGenAI:], opts[droppedNotGenAI:])
}

// batchScratch is the per-call working memory, pooled so the steady state does not allocate it.
type batchScratch struct {
	verdict   scopeVerdict
	verdicts  []decision
	decisions []tracememory.Decision
}

func (sc *batchScratch) reset() {
	*sc = batchScratch{
		verdicts:  sc.verdicts[:0],
		decisions: sc.decisions[:0],
		verdict:   scopeVerdict{dropSpanNames: sc.verdict.dropSpanNames[:0]},
	}
}
