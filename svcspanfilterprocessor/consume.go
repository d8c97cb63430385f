package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// processTraces is the synchronous part: decide every span, let the memory admit the batch, make
// what it holds durable, deliver what it released, and return the batch less its dropped and held
// spans. A retryable error (push back, journal failure) refuses the whole batch before anything of
// it is delivered; the client sends it again.
func (p *spanFilterProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	sc := p.scratch.Get().(*batchScratch)
	defer func() {
		sc.reset()
		p.scratch.Put(sc)
	}()
	p.decideAll(td, sc)
	info := client.FromContext(ctx)
	adm, err := p.mem.Admit(info, td, sc.decisions)
	if err != nil {
		p.telemetry.ProcessorSvcspanfilterSpansRefused.Add(ctx, int64(len(sc.decisions)))
		return td, err
	}
	if err := p.commit(ctx, info, adm); err != nil {
		p.telemetry.ProcessorSvcspanfilterSpansRefused.Add(ctx, int64(len(sc.decisions)))
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

// commit writes the spans held from the batch to the journal (one record) before the batch is
// acknowledged. A failed write holds nothing, delivers nothing of the batch (Abort) and refuses it
// with a retryable error. When the batch holds nothing, the spans it hands on (connectors, spans
// carrying joined content) go first, and are journaled only if the next consumer refuses some of
// them: the journal keeps only what the processor still holds when it answers. Those it refused
// stay with the admission until the write: Abort must not deliver them.
func (p *spanFilterProcessor) commit(ctx context.Context, info client.Info, adm *tracememory.Admission) error {
	ended := false // Commit or Abort was called
	defer func() {
		if !ended {
			// A panic before either (marshalling, the journal; deliverOne turns the next
			// consumer's into a refusal, for Abort cannot take back deliveries it took): the batch is
			// refused as if its append failed. Otherwise its spans would stay held for a Commit that
			// never comes and its hold on eviction would block every later call at the next
			// eviction (the HTTP server survives a handler's panic). The panic goes on.
			adm.Abort()
		}
	}()
	if adm.Journaled == 0 || p.journal == journal.Nop {
		ended = true
		adm.Commit(0)
		return nil
	}
	handedOnFirst := adm.Held == 0
	if handedOnFirst {
		adm.HandsOnFirst()
		adm.Deliveries = p.handOn(ctx, adm.Deliveries)
		if adm.HandedOn() {
			ended = true
			adm.Commit(0)
			p.requeue(adm)
			return nil
		}
	}
	payload, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(adm.HeldCopy)
	var id uint64
	if err == nil {
		id, err = p.journal.Append(ctx, journal.KindSpans, adm.HeldAt, metadataOf(info), payload)
	}
	ended = true
	if err != nil {
		adm.Abort()
		p.logger.Warn("Could not record held spans in the journal; the batch is refused for the client to retry", zap.Error(err))
		return fmt.Errorf("svcspanfilter: recording held spans: %w", err)
	}
	adm.Commit(id)
	if handedOnFirst {
		p.requeue(adm)
	}
	return nil
}

// requeue puts the deliveries the next consumer refused back for the releaser.
func (p *spanFilterProcessor) requeue(adm *tracememory.Admission) {
	p.mem.Requeue(adm.Deliveries...)
	adm.Deliveries = nil
}

func metadataOf(info client.Info) map[string][]string {
	var md map[string][]string
	for k := range info.Metadata.Keys() {
		if md == nil {
			md = map[string][]string{}
		}
		md[k] = info.Metadata.Get(k)
	}
	return md
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
				v := p.filter.judge(&sc.verdict, spans.At(k))
				d := tracememory.Decision{MarksExperiment: v.experiment}
				switch {
				case !v.decision.kept():
				case v.sampledOut:
					d.Verdict = tracememory.KeepIfExperiment
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
	for d, n := range counts {
		if n == 0 {
			continue
		}
		if decision(d).kept() {
			p.telemetry.ProcessorSvcspanfilterSpansKept.Add(ctx, n, p.metricOpt.decision[d])
		} else {
			p.telemetry.ProcessorSvcspanfilterSpansDropped.Add(ctx, n, p.metricOpt.decision[d])
		}
	}
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
