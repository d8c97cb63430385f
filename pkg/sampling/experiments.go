package sampling

import (
	"container/list"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Defaults for ExperimentTraces shared by the components, so that the span filter and the score
// connector remember experiment traces alike.
const (
	// DefaultExperimentTracesMax bounds the set at about 10 MB (~100 bytes per trace id).
	DefaultExperimentTracesMax = 100_000
	// DefaultExperimentTracesTTL is how long a trace stays marked after its last marking span.
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
	maxTraces int
	ttl       time.Duration

	mu sync.Mutex
	// order holds the ids, least recently marked at the front; byID points into it.
	order *list.List
	byID  map[pcommon.TraceID]*list.Element
}

type markedTrace struct {
	id       pcommon.TraceID
	markedAt time.Time
}

// NewExperimentTraces returns an empty set of at most maxTraces ids (at least 1), each kept ttl
// after its last Mark (a ttl of 0 or less: until pushed out by newer ids).
func NewExperimentTraces(maxTraces int, ttl time.Duration) *ExperimentTraces {
	return &ExperimentTraces{
		maxTraces: max(maxTraces, 1),
		ttl:       ttl,
		order:     list.New(),
		byID:      make(map[pcommon.TraceID]*list.Element),
	}
}

// Mark records that the trace is an experiment, as of now.
func (s *ExperimentTraces) Mark(id pcommon.TraceID, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		e.Value.(*markedTrace).markedAt = now
		s.order.MoveToBack(e)
		return
	}
	s.expire(now)
	for s.order.Len() >= s.maxTraces {
		s.remove(s.order.Front())
	}
	s.byID[id] = s.order.PushBack(&markedTrace{id: id, markedAt: now})
}

// Contains reports whether the trace was marked and is not yet forgotten at now.
func (s *ExperimentTraces) Contains(id pcommon.TraceID, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return false
	}
	if s.expired(e.Value.(*markedTrace), now) {
		s.remove(e)
		return false
	}
	return true
}

// Len is the number of ids held, expired ones not yet dropped included.
func (s *ExperimentTraces) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}

func (s *ExperimentTraces) expired(m *markedTrace, now time.Time) bool {
	return s.ttl > 0 && now.Sub(m.markedAt) >= s.ttl
}

// expire drops the expired ids from the front: they are the least recently marked.
func (s *ExperimentTraces) expire(now time.Time) {
	for e := s.order.Front(); e != nil && s.expired(e.Value.(*markedTrace), now); e = s.order.Front() {
		s.remove(e)
	}
}

func (s *ExperimentTraces) remove(e *list.Element) {
	delete(s.byID, e.Value.(*markedTrace).id)
	s.order.Remove(e)
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
// trace is then remembered, so later spans of it are kept too. A trace the ratio keeps needs no
// memory: all of it is kept anyway. An empty trace id (a run-level score) is always kept.
func (d *Decider) Keep(traceID pcommon.TraceID, marksExperiment bool, now time.Time) bool {
	if !d.SamplesOut(traceID) {
		return true
	}
	if marksExperiment {
		d.experiments.Mark(traceID, now)
		return true
	}
	return d.experiments.Contains(traceID, now)
}

// Mark remembers the trace as an experiment when the ratio would sample it out, without
// deciding anything yet: for callers that first walk a whole batch for marking spans, so that a
// marking span late in a batch also keeps the spans before it.
func (d *Decider) Mark(traceID pcommon.TraceID, now time.Time) {
	if d.SamplesOut(traceID) {
		d.experiments.Mark(traceID, now)
	}
}

// SamplesOut reports whether the ratio alone samples the trace out; only then is a span's
// experiment marking worth reading.
func (d *Decider) SamplesOut(traceID pcommon.TraceID) bool {
	return !d.ratio.KeepAll() && !traceID.IsEmpty() && !d.ratio.Keep(traceID)
}
