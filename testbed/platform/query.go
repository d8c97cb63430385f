package platform

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// ObservationFilter selects observations; empty fields match everything.
type ObservationFilter struct {
	TraceID   string // hex
	ID        string // span id, hex
	SessionID string
	Name      string
	Type      string
}

func (f ObservationFilter) matches(o *Observation) bool {
	return (f.TraceID == "" || o.TraceID == f.TraceID) &&
		(f.ID == "" || o.ID == f.ID) &&
		(f.SessionID == "" || o.SessionID == f.SessionID) &&
		(f.Name == "" || o.Name == f.Name) &&
		(f.Type == "" || o.Type == f.Type)
}

// Observations returns copies of the stored observations that match f, in order of first
// arrival. Empty in StatsOnly mode.
func (p *Platform) Observations(f ObservationFilter) []Observation {
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Observation
	consider := func(pos int) {
		if f.matches(&s.observations[pos]) {
			out = append(out, s.observationAt(pos))
		}
	}
	if f.TraceID != "" {
		for _, pos := range s.byTrace[f.TraceID] {
			consider(pos)
		}
		return out
	}
	for pos := range s.observations {
		consider(pos)
	}
	return out
}

// ObservationsByTrace returns the observations of one trace (hex id), in order of first arrival.
func (p *Platform) ObservationsByTrace(traceID string) []Observation {
	return p.Observations(ObservationFilter{TraceID: traceID})
}

// Observation returns the observation of one span (hex ids).
func (p *Platform) Observation(traceID, spanID string) (Observation, bool) {
	obs := p.Observations(ObservationFilter{TraceID: traceID, ID: spanID})
	if len(obs) == 0 {
		return Observation{}, false
	}
	return obs[0], true
}

// TraceIDs returns the hex ids of the stored traces, sorted.
func (p *Platform) TraceIDs() []string {
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.byTrace))
	for id := range s.byTrace {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// SpanDeliveries is how many times the span (hex ids) arrived: 0 never, 1 once, more when it
// was delivered again (a retry after a lost answer, for instance). Works in StatsOnly mode.
func (p *Platform) SpanDeliveries(traceID, spanID string) int {
	key := spanKey{traceID, spanID}
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if pos, ok := s.spanIndex[key]; ok {
		return s.spanDeliveries[pos]
	}
	return 0
}

// SpanArrival is how many times the span (hex ids) arrived and when it first did (the time the
// platform had read the request that brought it); zero and the zero time when it never did.
// Works in StatsOnly mode: load runs measure latency with it.
func (p *Platform) SpanArrival(traceID, spanID string) (deliveries int, first time.Time) {
	key := spanKey{traceID, spanID}
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if pos, ok := s.spanIndex[key]; ok {
		return s.spanDeliveries[pos], time.Unix(0, s.spanArrivals[pos])
	}
	return 0, time.Time{}
}

// ScoreFilter selects scores; empty fields match everything.
type ScoreFilter struct {
	ID            string
	TraceID       string
	ObservationID string
	Name          string
}

func (f ScoreFilter) matches(sc *Score) bool {
	return (f.ID == "" || sc.ID == f.ID) &&
		(f.TraceID == "" || sc.TraceID == f.TraceID) &&
		(f.ObservationID == "" || sc.ObservationID == f.ObservationID) &&
		(f.Name == "" || sc.Name == f.Name)
}

// Scores returns copies of the stored scores that match f, in order of first arrival. In
// StatsOnly mode only their ids and delivery counts are kept.
func (p *Platform) Scores(f ScoreFilter) []Score {
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Score
	if f.ID != "" {
		if pos, ok := s.scoreIndex[f.ID]; ok && f.matches(&s.scores[pos]) {
			out = append(out, s.scoreAt(pos))
		}
		return out
	}
	for pos := range s.scores {
		if f.matches(&s.scores[pos]) {
			out = append(out, s.scoreAt(pos))
		}
	}
	return out
}

// Score returns the stored score with this id.
func (p *Platform) Score(id string) (Score, bool) {
	scores := p.Scores(ScoreFilter{ID: id})
	if len(scores) == 0 {
		return Score{}, false
	}
	return scores[0], true
}

// RequestRecord is what the platform saw of one request to its public API.
type RequestRecord struct {
	Endpoint        Endpoint      `json:"endpoint"`
	Method          string        `json:"method"`
	Status          int           `json:"status"` // 0 when the connection was dropped
	Dropped         bool          `json:"dropped,omitempty"`
	Fault           string        `json:"fault,omitempty"` // which injected fault answered, if any
	Error           string        `json:"error,omitempty"` // why the platform rejected it
	ContentType     string        `json:"contentType,omitempty"`
	ContentEncoding string        `json:"contentEncoding,omitempty"`
	Gzip            bool          `json:"gzip"`
	BodyBytes       int64         `json:"bodyBytes"`    // as sent
	DecodedBytes    int64         `json:"decodedBytes"` // after decompression
	Spans           int           `json:"spans,omitempty"`
	Scores          int           `json:"scores,omitempty"`
	SDKName         string        `json:"sdkName,omitempty"` // X-Svc-Sdk-Name, or x_svc_sdk_name
	SDKVersion      string        `json:"sdkVersion,omitempty"`
	Time            time.Time     `json:"time"`
	Duration        time.Duration `json:"duration"`
	// WritePath and WritePathRule: how the platform wrote an accepted span request and which
	// write-path rule (1–5, README.md) decided; VisibleAt: when its spans become visible. Empty for
	// other requests and for span requests without resourceSpans.
	WritePath     WritePath `json:"writePath,omitempty"`
	WritePathRule int       `json:"writePathRule,omitempty"`
	VisibleAt     time.Time `json:"visibleAt,omitzero"`
}

// Requests returns the log of requests to the endpoint (every endpoint when empty), oldest
// first.
func (p *Platform) Requests(endpoint Endpoint) []RequestRecord {
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []RequestRecord
	for _, rec := range s.requests {
		if endpoint == "" || rec.Endpoint == endpoint {
			out = append(out, rec)
		}
	}
	return out
}

// Stats is a snapshot of what the platform saw.
type Stats struct {
	// Requests counts requests by endpoint and HTTP status; status 0 counts dropped connections.
	Requests map[Endpoint]map[int]int `json:"requests"`
	// GzipRequests counts requests whose body was gzip-compressed.
	GzipRequests int `json:"gzipRequests"`
	// SpansReceived counts every accepted span of every delivery, duplicates included;
	// UniqueSpans counts distinct (traceId, spanId); the difference is DuplicateSpanDeliveries.
	SpansReceived           int `json:"spansReceived"`
	UniqueSpans             int `json:"uniqueSpans"`
	DuplicateSpanDeliveries int `json:"duplicateSpanDeliveries"`
	// SpansRejected counts spans the platform answered 200 for and then dropped alone: an empty
	// trace or span id, or an observation its schema refuses (docs/contract.md §3; see Dropped).
	SpansRejected int `json:"spansRejected"`
	// DuplicatedSpans maps "traceId/spanId" of every span delivered more than once to its
	// delivery count.
	DuplicatedSpans map[string]int `json:"duplicatedSpans"`
	// ScoresReceived counts accepted scores of every delivery; UniqueScores distinct ids;
	// ScoresRejected the scores refused by validation.
	ScoresReceived int `json:"scoresReceived"`
	UniqueScores   int `json:"uniqueScores"`
	ScoresRejected int `json:"scoresRejected"`
	// ScoreDeliveries maps every stored score id to how many times it was accepted.
	ScoreDeliveries map[string]int `json:"scoreDeliveries"`
	// SpanRequestsByWritePath counts accepted span requests by write path (direct, dual).
	SpanRequestsByWritePath map[WritePath]int `json:"spanRequestsByWritePath"`
}

// Stats returns a snapshot of the statistics.
func (p *Platform) Stats() Stats {
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		Requests:                make(map[Endpoint]map[int]int, len(s.statuses)),
		GzipRequests:            s.gzipped,
		SpansReceived:           s.spansReceived,
		UniqueSpans:             len(s.spanDeliveries),
		DuplicateSpanDeliveries: s.spansReceived - len(s.spanDeliveries),
		SpansRejected:           s.spansRejected,
		DuplicatedSpans:         make(map[string]int),
		ScoresReceived:          s.scoresReceived,
		UniqueScores:            len(s.scores),
		ScoresRejected:          s.scoresRejected,
		ScoreDeliveries:         make(map[string]int, len(s.scores)),
		SpanRequestsByWritePath: make(map[WritePath]int, len(s.writePaths)),
	}
	for path, n := range s.writePaths {
		st.SpanRequestsByWritePath[path] = n
	}
	for ep, byStatus := range s.statuses {
		c := make(map[int]int, len(byStatus))
		for status, n := range byStatus {
			c[status] = n
		}
		st.Requests[ep] = c
	}
	if st.DuplicateSpanDeliveries > 0 {
		for key, pos := range s.spanIndex {
			if n := s.spanDeliveries[pos]; n > 1 {
				st.DuplicatedSpans[key.traceID+"/"+key.spanID] = n
			}
		}
	}
	for pos, sc := range s.scores {
		st.ScoreDeliveries[sc.ID] = s.scoreDeliveries[pos]
	}
	return st
}

// WaitForSpans waits until at least n distinct spans have arrived, or ctx ends.
func (p *Platform) WaitForSpans(ctx context.Context, n int) error {
	return p.waitForCount(ctx, n, "spans", func(s *store) int { return len(s.spanDeliveries) })
}

// WaitForScores waits until at least n distinct scores have been accepted, or ctx ends.
func (p *Platform) WaitForScores(ctx context.Context, n int) error {
	return p.waitForCount(ctx, n, "scores", func(s *store) int { return len(s.scores) })
}

func (p *Platform) waitForCount(ctx context.Context, n int, what string, count func(*store) int) error {
	have := 0
	err := p.WaitUntil(ctx, func() bool {
		p.store.mu.Lock()
		have = count(p.store)
		p.store.mu.Unlock()
		return have >= n
	})
	if err != nil {
		return fmt.Errorf("platform: %d of %d %s arrived: %w", have, n, what, err)
	}
	return nil
}

// WaitUntil calls cond now and after every change to the platform's data or statistics until
// it returns true, or ctx ends (ctx's error). cond runs outside the platform's lock, so it may
// call any method; keep it cheap, it runs once per request.
func (p *Platform) WaitUntil(ctx context.Context, cond func() bool) error {
	for {
		changed := p.store.changes()
		if cond() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Trace returns the trace record of a trace id, merged from its spans' trace events (docs/contract.md
// §14.2); false when no span of the trace is stored.
func (p *Platform) Trace(traceID string) (Trace, bool) {
	s := p.store
	s.mu.Lock()
	events := make([]traceEvent, 0, len(s.traceEvents[traceID]))
	for _, ev := range s.traceEvents[traceID] {
		events = append(events, ev)
	}
	s.mu.Unlock()
	if len(events) == 0 {
		return Trace{}, false
	}
	return mergeTrace(traceID, events), true
}

// Dropped returns the spans the platform answered 200 for and then dropped alone, with the reason.
func (p *Platform) Dropped() []DroppedSpan {
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]DroppedSpan(nil), s.dropped...)
}
