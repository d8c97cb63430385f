package outcome // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"

import (
	"errors"
	"fmt"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
)

// The invariants of doc.go, for the randomised tests of the trace memory with this gate, which run
// them after every step: a trace's state reached through gate.Trace.State, the sampler's own state.

// Check: score records are held only while the trace is undecided, and gateHeld (what the memory
// counts for them) is their size.
func (st *traceState) Check(status gate.Status, gateHeld int64) error {
	var held int64
	for _, hs := range st.scores {
		held += hs.bytes
	}
	switch {
	case held != gateHeld:
		return fmt.Errorf("held score records of %d bytes, %d counted", held, gateHeld)
	case len(st.scores) > 0 && st.decided:
		return errors.New("score records wait for the decision of a decided trace")
	case st.decided != (status != gate.Pending):
		return fmt.Errorf("decided %v, but the gate is %d", st.decided, status)
	}
	return nil
}

// Refs calls f with every journal record reference the trace's state holds, and how often.
func (st *traceState) Refs(f func(gate.Ref, int)) {
	for _, hs := range st.scores {
		f(hs.ref, 1)
	}
}

// Check: kept sessions are one per session, in the order they were kept, at most max_sessions, and
// counted as bytes; f gets the record references of sessions and of released score records.
func (s *Sampler) Check(f func(gate.Ref, int)) (bytes int64, err error) {
	k := &s.sessions
	k.mu.Lock()
	defer k.mu.Unlock()
	for e := k.order.Front(); e != nil; e = e.Next() {
		ks := e.Value.(*keptSession)
		bytes += sessionCost + int64(len(ks.reason))
		f(ks.ref, 1)
		if k.byKey[ks.key] != e {
			return 0, errors.New("a session kept twice")
		}
		if next := e.Next(); next != nil && next.Value.(*keptSession).at.Before(ks.at) {
			return 0, errors.New("kept sessions out of the order they were kept")
		}
	}
	if len(k.byKey) != k.order.Len() || k.order.Len() > s.Outcome.Config().MaxSessions {
		return 0, fmt.Errorf("%d kept sessions, %d indexed, at most %d", k.order.Len(), len(k.byKey), s.Outcome.Config().MaxSessions)
	}
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	for _, d := range s.ready {
		for r, n := range d.refs {
			f(r, n)
		}
	}
	return bytes, nil
}
