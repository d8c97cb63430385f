package sampling

import (
	"container/list"
	"time"
)

// recentKeys is a bounded memory of keys, each with a value, remembered ttl after it was last
// marked (a ttl of 0 or less: until pushed out): beyond maxKeys the key marked least recently is
// forgotten first. It is not safe for concurrent use: its owner locks. Both the memory of
// experiment traces and of kept sessions are one.
type recentKeys[K comparable, V any] struct {
	maxKeys int
	ttl     time.Duration
	// order holds the keys, least recently marked at the front; byKey points into it.
	order *list.List
	byKey map[K]*list.Element
}

type recentKey[K comparable, V any] struct {
	key      K
	value    V
	markedAt time.Time
}

func newRecentKeys[K comparable, V any](maxKeys int, ttl time.Duration) recentKeys[K, V] {
	return recentKeys[K, V]{maxKeys: max(maxKeys, 1), ttl: ttl, order: list.New(), byKey: make(map[K]*list.Element)}
}

// mark remembers key with value as of now (a key already held takes the new value).
func (r *recentKeys[K, V]) mark(key K, value V, now time.Time) {
	if e, ok := r.byKey[key]; ok {
		m := e.Value.(*recentKey[K, V])
		m.value, m.markedAt = value, now
		r.order.MoveToBack(e)
		return
	}
	r.expire(now)
	for r.order.Len() >= r.maxKeys {
		r.remove(r.order.Front())
	}
	r.byKey[key] = r.order.PushBack(&recentKey[K, V]{key: key, value: value, markedAt: now})
}

// lookup is the key's entry, nil when it is not held or expired at now (then it is dropped).
func (r *recentKeys[K, V]) lookup(key K, now time.Time) *recentKey[K, V] {
	e, ok := r.byKey[key]
	if !ok {
		return nil
	}
	m := e.Value.(*recentKey[K, V])
	if r.expired(m, now) {
		r.remove(e)
		return nil
	}
	return m
}

// touch renews a held key's lifetime from now.
func (r *recentKeys[K, V]) touch(key K, now time.Time) {
	if e, ok := r.byKey[key]; ok {
		e.Value.(*recentKey[K, V]).markedAt = now
		r.order.MoveToBack(e)
	}
}

func (r *recentKeys[K, V]) len() int { return r.order.Len() }

func (r *recentKeys[K, V]) expired(m *recentKey[K, V], now time.Time) bool {
	return r.ttl > 0 && now.Sub(m.markedAt) >= r.ttl
}

// expire drops the expired keys from the front: they are the least recently marked.
func (r *recentKeys[K, V]) expire(now time.Time) {
	for e := r.order.Front(); e != nil && r.expired(e.Value.(*recentKey[K, V]), now); e = r.order.Front() {
		r.remove(e)
	}
}

func (r *recentKeys[K, V]) remove(e *list.Element) {
	delete(r.byKey, e.Value.(*recentKey[K, V]).key)
	r.order.Remove(e)
}
