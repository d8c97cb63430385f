package sampling

import (
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/svcattr"
)

// Defaults for ExperimentTraces shared by the components, so that the span filter and the score
// connectors remember experiment traces alike.
const (
	// DefaultExperimentTracesMax bounds the set at about 10 MB (~100 bytes per trace id).
	DefaultExperimentTracesMax = 100_000
	// DefaultExperimentTracesTTL is the one lifetime of an experiment trace: how long it stays
	// marked after the last span or score of it that a Decider saw (agents run for minutes, and
	// scores of a trace can come long after its spans).
	DefaultExperimentTracesTTL = time.Hour
)

// ExperimentTraces remembers which traces are experiment runs (docs/contract.md §9: experiments are
// never sampled), so that once any span of a trace marks it, the trace's later spans and scores
// escape sampling too, even when they carry no experiment attribute themselves.
//
// It only knows what it has seen: what was sampled out of a trace before its marking span
// arrived is not brought back. Memory is bounded by a count: beyond maxTraces ids, the id
// marked least recently is forgotten first (about 100 bytes per id). An id is also forgotten ttl
// after it was last marked. It is safe for concurrent use.
type ExperimentTraces struct {
	mu     sync.Mutex
	traces recentKeys[pcommon.TraceID, struct{}]
}

// NewExperimentTraces returns an empty set of at most maxTraces ids (at least 1), each kept ttl
// after its last Mark (a ttl of 0 or less: until pushed out by newer ids).
func NewExperimentTraces(maxTraces int, ttl time.Duration) *ExperimentTraces {
	return &ExperimentTraces{traces: newRecentKeys[pcommon.TraceID, struct{}](maxTraces, ttl)}
}

// Mark records that the trace is an experiment, as of now.
func (s *ExperimentTraces) Mark(id pcommon.TraceID, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.traces.mark(id, struct{}{}, now)
}

// Contains reports whether the trace was marked and is not yet forgotten at now.
func (s *ExperimentTraces) Contains(id pcommon.TraceID, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.traces.lookup(id, now) != nil
}

// Seen reports whether the trace is marked and not yet forgotten at now, and if so keeps it
// marked ttl from now: the lifetime of a trace in use runs from its last span or score, not its
// first marking span.
func (s *ExperimentTraces) Seen(id pcommon.TraceID, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.traces.lookup(id, now) == nil {
		return false
	}
	s.traces.touch(id, now)
	return true
}

// Len is the number of ids held, expired ones not yet dropped included.
func (s *ExperimentTraces) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.traces.len()
}

// Decider is the sampling decision of the svc components on one span or score: the trace's
// TraceIdRatioBased decision, except that experiment traces are always kept.
type Decider struct {
	ratio       Ratio
	experiments *ExperimentTraces
}

// NewDecider decides with ratio and remembers experiment traces in experiments, which several
// deciders (the components of one pipeline) may share.
func NewDecider(ratio Ratio, experiments *ExperimentTraces) *Decider {
	return &Decider{ratio: ratio, experiments: experiments}
}

// Keep reports whether a span (or score) of the trace is kept at now. marksExperiment tells that
// the span itself marks its trace as an experiment (svcattr.IsExperiment on its attributes); the
// trace is then remembered, so later spans of it are kept too, and each span or score of it kept
// so extends its lifetime (ExperimentTraces.Seen). A trace the ratio keeps needs no memory: all
// of it is kept anyway. An empty trace id (a run-level score) is always kept.
func (d *Decider) Keep(traceID pcommon.TraceID, marksExperiment bool, now time.Time) bool {
	if !d.SamplesOut(traceID) {
		return true
	}
	if marksExperiment {
		d.experiments.Mark(traceID, now)
		return true
	}
	return d.experiments.Seen(traceID, now)
}

// Mark remembers the trace as an experiment when the ratio would sample it out, without
// deciding anything yet: for callers that first walk a whole batch for marking spans, so that a
// marking span late in a batch also keeps the spans before it.
func (d *Decider) Mark(traceID pcommon.TraceID, now time.Time) {
	if d.SamplesOut(traceID) {
		d.experiments.Mark(traceID, now)
	}
}

// MarkExperiments remembers the sampled-out traces that a span of td marks as an experiment
// (svcattr.IsExperiment), before anything of td is decided: the spans and scores of a trace follow
// its experiment marking wherever in the batch the marking span is.
func (d *Decider) MarkExperiments(td ptrace.Traces, now time.Time) {
	if d.ratio.KeepAll() {
		return
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				if d.SamplesOut(span.TraceID()) && svcattr.IsExperiment(span.Attributes()) {
					d.experiments.Mark(span.TraceID(), now)
				}
			}
		}
	}
}

// Ratio is the decider's TraceIdRatioBased sampler.
func (d *Decider) Ratio() Ratio { return d.ratio }

// SamplesOut reports whether the ratio alone samples the trace out; only then is a span's
// experiment marking worth reading.
func (d *Decider) SamplesOut(traceID pcommon.TraceID) bool {
	return !d.ratio.KeepAll() && !traceID.IsEmpty() && !d.ratio.Keep(traceID)
}
