package platform

import (
	"context"
	"fmt"
	"time"
)

// SpanWrite is how the platform wrote one span and when users first saw it: what the demo and
// the e2e comparison read per span. It is kept in StatsOnly mode too.
type SpanWrite struct {
	TraceID string
	SpanID  string
	// WritePath and WritePathRule: the path and the write-path rule (1–5) of the delivery
	// that made the span visible first.
	WritePath     WritePath
	WritePathRule int
	// EndTime is the span's end time (of its last delivery; a missing end copies the start).
	EndTime time.Time
	// FirstArrival is when the first delivery's body had been read.
	FirstArrival time.Time
	// VisibleAt is when the observations API first shows the span: the earliest of its
	// deliveries' arrival (direct) or arrival + staging delay (dual).
	VisibleAt  time.Time
	Deliveries int
}

// EndToVisible is the time from the span's end to the moment the platform first showed it.
func (w SpanWrite) EndToVisible() time.Duration { return w.VisibleAt.Sub(w.EndTime) }

// Visible says whether the observations API shows the span at time now.
func (w SpanWrite) Visible(now time.Time) bool { return !w.VisibleAt.After(now) }

func (s *store) spanWriteAt(pos int) SpanWrite {
	k, w := s.spanKeys[pos], s.spanWrites[pos]
	return SpanWrite{
		TraceID: k.traceID, SpanID: k.spanID, WritePath: w.path, WritePathRule: w.rule,
		EndTime: w.end, FirstArrival: time.Unix(0, s.spanArrivals[pos]), VisibleAt: w.visibleAt,
		Deliveries: s.spanDeliveries[pos],
	}
}

// positions are the store positions of a trace's spans (every span when traceID is empty), in
// order of first arrival. Callers hold mu.
func (s *store) positions(traceID string) []int {
	if traceID != "" && !s.statsOnly {
		return s.byTrace[traceID]
	}
	var out []int
	for pos, k := range s.spanKeys {
		if traceID == "" || k.traceID == traceID {
			out = append(out, pos)
		}
	}
	return out
}

// SpanWrite returns how the span (hex ids) was written; false when it never arrived.
func (p *Platform) SpanWrite(traceID, spanID string) (SpanWrite, bool) {
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	pos, ok := s.spanIndex[spanKey{traceID, spanID}]
	if !ok {
		return SpanWrite{}, false
	}
	return s.spanWriteAt(pos), true
}

// SpanWrites returns how every span of a trace (hex id; every stored span when empty) was
// written, in order of first arrival.
func (p *Platform) SpanWrites(traceID string) []SpanWrite {
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	pos := s.positions(traceID)
	out := make([]SpanWrite, 0, len(pos))
	for _, i := range pos {
		out = append(out, s.spanWriteAt(i))
	}
	return out
}

// WaitVisible waits until at least n spans of the trace (hex id; of any trace when empty) are
// visible to the observations API, or ctx ends. Staged spans become visible as time passes, so
// it also wakes when the next one's delay ends.
func (p *Platform) WaitVisible(ctx context.Context, traceID string, n int) error {
	visible := 0
	for {
		changed := p.store.changes()
		var next time.Time
		now := time.Now()
		visible = 0
		p.store.mu.Lock()
		for _, pos := range p.store.positions(traceID) {
			at := p.store.spanWrites[pos].visibleAt
			if !at.After(now) {
				visible++
			} else if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		p.store.mu.Unlock()
		if visible >= n {
			return nil
		}
		var timer *time.Timer
		var due <-chan time.Time
		if !next.IsZero() {
			timer = time.NewTimer(next.Sub(now))
			due = timer.C
		}
		select {
		case <-changed:
		case <-due:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return fmt.Errorf("platform: %d of %d spans of trace %q visible: %w", visible, n, traceID, ctx.Err())
		}
	}
}
