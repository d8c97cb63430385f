package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// evictionLogInterval limits the warning about evictions to one per interval under sustained overload.
const evictionLogInterval = 10 * time.Second

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
	// Forgetting idle traces is the normal life of a full memory; spans going on early is not.
	if s.EvictedWaiting > 0 {
		p.evictions.warn(p, s.EvictedWaiting)
	}
}

// evictionLog rate-limits the eviction warning.
type evictionLog struct {
	mu        sync.Mutex
	sinceLast int64
	last      time.Time
}

func (l *evictionLog) warn(p *spanFilterProcessor, n int64) {
	l.mu.Lock()
	l.sinceLast += n
	now := p.now()
	if !l.last.IsZero() && now.Sub(l.last) < evictionLogInterval {
		l.mu.Unlock()
		return
	}
	evicted := l.sinceLast
	l.sinceLast, l.last = 0, now
	l.mu.Unlock()
	p.logger.Warn("trace_integrity memory_limit_mib or max_traces reached: idle traces were forgotten and the "+
		"spans still waiting for their parent in the traces idle the longest went on with their parent id "+
		"unchanged. Raise memory_limit_mib or max_traces, lower wait_duration, or add gateway instances with "+
		"trace-id-affine routing in front of them.",
		zap.Int("memory_limit_mib", p.cfg.MemoryLimitMiB),
		zap.Int("max_traces", p.cfg.MaxTraces),
		zap.Int64("traces_evicted", evicted))
}
