package outcome // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// keptSession is a session a rule kept, journaled (KindSession) until session_keep_duration ends.
type keptSession struct {
	key    sampling.SessionKey
	reason string
	at     time.Time
	ref    gate.Ref
}

const sessionCost = 128 // what a kept session counts in the budget, beside its reason

// keptSessions are the journaled kept sessions: one each (its latest keep and record), at most
// max_sessions (the least recently kept forgotten first, as Outcome forgets them), in the budget,
// ordered by keep time: expiry takes them from the front.
type keptSessions struct {
	mu    sync.Mutex
	order list.List // of *keptSession, least recently kept first
	byKey map[sampling.SessionKey]*list.Element
}

// journalSession writes ks (after the decisions of its operation) and keeps it.
func (s *Sampler) journalSession(ks *keptSession) {
	payload := append(binary.BigEndian.AppendUint64(nil, uint64(ks.key)), ks.reason...)
	id, err := s.Journal.Append(context.Background(), KindSession, ks.at, nil, payload)
	if err != nil {
		s.Logger.Warn("Could not journal a kept session; after a restart its later traces are decided "+
			"again", zap.Error(err))
		return
	}
	ks.ref = s.Memory.NewRef(id, 1)
	s.keepSession(ks)
}

// keepSession makes ks its session's kept session; the records it replaces or forgets are done.
func (s *Sampler) keepSession(ks *keptSession) {
	k := &s.sessions
	var done []gate.Ref
	k.mu.Lock()
	if e := k.byKey[ks.key]; e != nil && ks.at.Before(e.Value.(*keptSession).at) {
		done = append(done, ks.ref) // kept again since (a concurrent call, or an older record recovered)
	} else {
		if e != nil {
			done = append(done, s.forgetSession(e))
		}
		e = k.order.Back()
		for e != nil && e.Value.(*keptSession).at.After(ks.at) {
			e = e.Prev()
		}
		if e == nil {
			e = k.order.PushFront(ks)
		} else {
			e = k.order.InsertAfter(ks, e)
		}
		if k.byKey == nil {
			k.byKey = map[sampling.SessionKey]*list.Element{}
		}
		k.byKey[ks.key] = e
		s.Memory.Count(sessionCost + int64(len(ks.reason)))
		for k.order.Len() > s.Outcome.Config().MaxSessions {
			done = append(done, s.forgetSession(k.order.Front()))
		}
	}
	k.mu.Unlock()
	for _, ref := range done { // the journal's lock is not taken under the sessions' lock
		ref.Done(1)
	}
}

// forgetSession removes a kept session (under the sessions' lock) and returns its record.
func (s *Sampler) forgetSession(e *list.Element) gate.Ref {
	ks := s.sessions.order.Remove(e).(*keptSession)
	delete(s.sessions.byKey, ks.key)
	s.Memory.Count(-sessionCost - int64(len(ks.reason)))
	return ks.ref
}

// expireSessions forgets the kept sessions whose session_keep_duration is over, oldest first.
func (s *Sampler) expireSessions(now time.Time) {
	keep := s.Outcome.Config().SessionKeepDuration
	var over []gate.Ref
	s.sessions.mu.Lock()
	for e := s.sessions.order.Front(); e != nil && now.Sub(e.Value.(*keptSession).at) >= keep; {
		over = append(over, s.forgetSession(e))
		e = s.sessions.order.Front()
	}
	s.sessions.mu.Unlock()
	for _, ref := range over {
		ref.Done(1)
	}
}

// recoverSession keeps a KindSession record's session again from the time it was kept.
func (s *Sampler) recoverSession(rec journal.Record) error {
	ref := s.Memory.NewRef(rec.ID, 1)
	if len(rec.Payload) < 8 {
		ref.Done(1) // removed
		return errors.New("a truncated kept session")
	}
	key := sampling.SessionKey(binary.BigEndian.Uint64(rec.Payload))
	ks := &keptSession{key: key, reason: string(rec.Payload[8:]), at: rec.HeldAt, ref: ref}
	s.Outcome.KeepSession(ks.key, ks.reason, ks.at)
	s.keepSession(ks)
	return nil
}
