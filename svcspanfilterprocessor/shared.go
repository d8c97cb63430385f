package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
)

// sharedComponents hands out one instance per key to every pipeline component that asks for it (the
// traces and the logs processor of one component ID share one trace memory). Each LoadOrStore takes
// a reference; the instance starts with the first Start and shuts down with the Shutdown of its last
// reference, then is forgotten, so a collector reload builds a new one. (Contrib's
// internal/sharedcomponent does this for receivers but is not importable.)
type sharedComponents[K comparable, V lifecycle] struct {
	mu sync.Mutex
	m  map[K]*sharedComponent[K, V]
}

// lifecycle is what the shared value does when the first user starts it and the last one stops.
type lifecycle interface {
	start(ctx context.Context, host component.Host) error
	shutdown(ctx context.Context) error
}

// sharedComponent is one reference-counted instance.
type sharedComponent[K comparable, V lifecycle] struct {
	owner *sharedComponents[K, V]
	key   K
	value V

	// refs and started are guarded by owner.mu.
	refs    int
	started bool
}

func newSharedComponents[K comparable, V lifecycle]() *sharedComponents[K, V] {
	return &sharedComponents[K, V]{m: map[K]*sharedComponent[K, V]{}}
}

// sharedRef is one user's reference: its Shutdown (or release) gives the reference back once.
type sharedRef[K comparable, V lifecycle] struct {
	c        *sharedComponent[K, V]
	returned bool // guarded by c.owner.mu
}

// LoadOrStore returns a new reference to the instance of key, creating the instance with create if
// there is none. A caller that fails after LoadOrStore gives its reference back with release.
func (s *sharedComponents[K, V]) LoadOrStore(key K, create func() (V, error)) (*sharedRef[K, V], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.m[key]
	if !ok {
		v, err := create()
		if err != nil {
			return nil, err
		}
		c = &sharedComponent[K, V]{owner: s, key: key, value: v}
		s.m[key] = c
	}
	c.refs++
	return &sharedRef[K, V]{c: c}, nil
}

// Value is the shared instance.
func (r *sharedRef[K, V]) Value() V { return r.c.value }

// Start starts the instance the first time any of its users is started.
func (r *sharedRef[K, V]) Start(ctx context.Context, host component.Host) error {
	c := r.c
	c.owner.mu.Lock()
	defer c.owner.mu.Unlock()
	if c.started {
		return nil
	}
	c.started = true
	return c.value.start(ctx, host)
}

// Shutdown gives back this reference; the last one shuts the instance down (if it was started) and
// forgets it, so a collector reload builds a new one.
func (r *sharedRef[K, V]) Shutdown(ctx context.Context) error {
	c := r.c
	c.owner.mu.Lock()
	defer c.owner.mu.Unlock()
	if !r.giveBack() {
		return nil
	}
	if !c.started {
		return nil
	}
	return c.value.shutdown(ctx)
}

// release gives back the reference of a user that was never built (its creation failed after
// LoadOrStore).
func (r *sharedRef[K, V]) release() {
	r.c.owner.mu.Lock()
	defer r.c.owner.mu.Unlock()
	r.giveBack()
}

// giveBack drops this reference once and reports whether it was the last; the caller holds the lock.
func (r *sharedRef[K, V]) giveBack() bool {
	if r.returned {
		return false
	}
	r.returned = true
	c := r.c
	c.refs--
	if c.refs > 0 {
		return false
	}
	if c.owner.m[c.key] == c {
		delete(c.owner.m, c.key)
	}
	return true
}
