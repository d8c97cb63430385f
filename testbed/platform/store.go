package platform

import (
	"sync"
	"time"
)

// store holds what the platform accepted and what it saw. One lock guards it all; every change
// wakes the waiters.
type store struct {
	statsOnly bool

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change

	// Observations in order of first arrival; a redelivery replaces in place.
	observations   []Observation
	spanIndex      map[spanKey]int // position in spanDeliveries (and observations)
	spanDeliveries []int
	spanArrivals   []int64          // unix nanos of each span's first arrival, by position
	spanKeys       []spanKey        // by position
	spanWrites     []spanWrite      // how each span was written, by position
	byTrace        map[string][]int // hex trace id → positions in observations
	spansReceived  int              // every delivery of every span
	spansRejected  int
	dropped        []DroppedSpan
	// traceEvents are the trace events of each trace's spans, by span id (a redelivery replaces).
	traceEvents map[string]map[string]traceEvent

	scores          []Score // in order of first arrival; a resent id replaces in place
	scoreIndex      map[string]int
	scoreDeliveries []int
	scoresReceived  int // every accepted delivery of every score
	scoresRejected  int

	requests   []RequestRecord
	statuses   map[Endpoint]map[int]int
	gzipped    int
	writePaths map[WritePath]int // accepted span requests by write path
}

// spanWrite is how a span was written and when users first see it (kept in StatsOnly mode too).
type spanWrite struct {
	path      WritePath
	rule      int
	visibleAt time.Time
	end       time.Time // the span's end time, from its last delivery
}

func newStore(statsOnly bool) *store {
	s := &store{statsOnly: statsOnly, changed: make(chan struct{})}
	s.clear()
	return s
}

func (s *store) clear() {
	s.observations, s.spanDeliveries, s.spanArrivals, s.scores, s.scoreDeliveries, s.requests = nil, nil, nil, nil, nil, nil
	s.spanKeys, s.spanWrites = nil, nil
	s.writePaths = make(map[WritePath]int)
	s.dropped = nil
	s.traceEvents = make(map[string]map[string]traceEvent)
	s.spanIndex = make(map[spanKey]int)
	s.byTrace = make(map[string][]int)
	s.scoreIndex = make(map[string]int)
	s.statuses = make(map[Endpoint]map[int]int)
	s.spansReceived, s.spansRejected, s.scoresReceived, s.scoresRejected, s.gzipped = 0, 0, 0, 0, 0
}

func (s *store) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clear()
	s.wakeLocked()
}

// wake releases every waiter to re-check its condition.
func (s *store) wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wakeLocked()
}

func (s *store) wakeLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// changes returns the channel that closes on the next change.
func (s *store) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// addSpans stores one request's spans: a known (traceId, spanId) replaces the stored
// observation at its place and counts one more delivery.
func (s *store) addSpans(d delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spansReceived += len(d.keys)
	s.spansRejected += len(d.dropped)
	s.dropped = append(s.dropped, d.dropped...)
	for i, key := range d.keys {
		if !s.statsOnly {
			byspan := s.traceEvents[key.traceID]
			if byspan == nil {
				byspan = make(map[string]traceEvent)
				s.traceEvents[key.traceID] = byspan
			}
			byspan[key.spanID] = d.traceEvents[i]
		}
		w := spanWrite{path: d.path, rule: d.rule, visibleAt: d.visibleAt, end: d.ends[i]}
		if pos, ok := s.spanIndex[key]; ok {
			s.spanDeliveries[pos]++
			if !s.statsOnly {
				s.observations[pos] = d.observations[i]
			}
			// Users see the span from the first moment any delivery made it visible.
			if prev := s.spanWrites[pos]; !w.visibleAt.Before(prev.visibleAt) {
				w.path, w.rule, w.visibleAt = prev.path, prev.rule, prev.visibleAt
			}
			s.spanWrites[pos] = w
			continue
		}
		pos := len(s.spanDeliveries)
		s.spanIndex[key] = pos
		s.spanDeliveries = append(s.spanDeliveries, 1)
		s.spanArrivals = append(s.spanArrivals, d.arrived.UnixNano())
		s.spanKeys = append(s.spanKeys, key)
		s.spanWrites = append(s.spanWrites, w)
		if !s.statsOnly {
			o := d.observations[i]
			s.observations = append(s.observations, o)
			s.byTrace[o.TraceID] = append(s.byTrace[o.TraceID], pos)
		}
	}
	s.wakeLocked()
}

// addScores stores accepted scores by id: a known id replaces the stored score at its place
// and counts one more delivery.
func (s *store) addScores(scores []Score, rejected int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scoresReceived += len(scores)
	s.scoresRejected += rejected
	for _, sc := range scores {
		if s.statsOnly {
			sc = Score{ID: sc.ID}
		}
		if pos, ok := s.scoreIndex[sc.ID]; ok {
			s.scoreDeliveries[pos]++
			s.scores[pos] = sc
			continue
		}
		s.scoreIndex[sc.ID] = len(s.scores)
		s.scores = append(s.scores, sc)
		s.scoreDeliveries = append(s.scoreDeliveries, 1)
	}
	s.wakeLocked()
}

func (s *store) addRequest(rec RequestRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, rec)
	byStatus := s.statuses[rec.Endpoint]
	if byStatus == nil {
		byStatus = make(map[int]int)
		s.statuses[rec.Endpoint] = byStatus
	}
	byStatus[rec.Status]++
	if rec.Gzip {
		s.gzipped++
	}
	if rec.WritePath != "" {
		s.writePaths[rec.WritePath]++
	}
	s.wakeLocked()
}

// observation returns a copy of the observation at pos with its delivery count. Callers hold mu.
func (s *store) observationAt(pos int) Observation {
	o := s.observations[pos]
	o.Deliveries = s.spanDeliveries[pos]
	w := s.spanWrites[pos]
	o.WritePath, o.WritePathRule, o.VisibleAt = w.path, w.rule, w.visibleAt
	return o
}

func (s *store) scoreAt(pos int) Score {
	sc := s.scores[pos]
	sc.Deliveries = s.scoreDeliveries[pos]
	return sc
}
