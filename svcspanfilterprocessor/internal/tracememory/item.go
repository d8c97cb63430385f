package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/credentials"
)

// HeldReason is what a held span waits for: a bitmask, released when it is zero.
type HeldReason uint8

const (
	WaitParent  HeldReason = 1 << iota // the walk to its nearest kept ancestor reached an unknown span
	WaitContent                        // a content candidate whose content has not arrived
)

// requestOrigin is the client context of a request: released spans go on with their own request's.
type requestOrigin struct {
	info   client.Info
	tenant string
}

func newRequestOrigin(info client.Info) *requestOrigin {
	return &requestOrigin{info: info, tenant: TenantOf(info)}
}

// TenantOf is whom a request speaks for: its svc credentials (a pass-through gateway forwards them), or
// empty. Content joins only its tenant's spans: one tenant's prompts must never reach another's project.
func TenantOf(info client.Info) string {
	return strings.Join(info.Metadata.Get(credentials.MetadataKey), "\n")
}

// resourceOrigin and scopeOrigin are shared by every span taken from one ResourceSpans / ScopeSpans.
type resourceOrigin struct {
	request   *requestOrigin
	resource  pcommon.Resource
	schemaURL string
}

type scopeOrigin struct {
	resource  *resourceOrigin
	scope     pcommon.InstrumentationScope
	schemaURL string
}

// item is a kept span the memory holds (or has released and not yet handed on).
type item struct {
	span   ptrace.Span
	origin *scopeOrigin
	trace  *trace
	heldAt time.Time // starts the max wait and the content wait; recovery restores it
	reason HeldReason
	// waitOn is the unknown span the parent walk stopped at; waitPrev and waitNext link the items
	// waiting on it (trace.waitingOn), taken out in constant time with no allocation per span.
	waitOn             pcommon.SpanID
	waitPrev, waitNext *item
	// ref is the journal record of the call that held it (its Admission would keep the call's
	// deliveries alive while one of its spans is held).
	ref *RecordRef
	// bytes is what it counts in the budget: an estimate until sized (lazysize.go); unsizedAt its
	// place in shard.unsized until then (with the flags, one word). indexed: in trace.waitingOn.
	bytes                int64
	unsizedAt            int32
	held, indexed, sized bool
	content              []waitingContent // gathered while it waits for the rest (WaitContent)
	contentRefs          []*RecordRef     // records of the content joined onto it, done when it is handed on
}

func (it *item) tenant() string { return it.origin.resource.request.tenant }

// RecordRef counts the items of a journal record not yet handed on; the last removes the record.
type RecordRef struct {
	mu   sync.Mutex
	id   uint64
	left int
	m    *Memory
}

// NewRecordRef is the reference of journal record id with items still to hand on.
func (m *Memory) NewRecordRef(id uint64, items int) *RecordRef {
	return &RecordRef{id: id, left: items, m: m}
}

// Done marks n items of the record handed on or discarded.
func (r *RecordRef) Done(n int) {
	if r == nil || n == 0 {
		return
	}
	r.mu.Lock()
	r.left -= n
	id, last := r.id, r.left == 0
	r.mu.Unlock()
	if last && id != 0 {
		if err := r.m.journal.Remove(context.Background(), id); err != nil {
			r.m.cfg.Logger.Warn("Could not remove a delivered journal record; the journal retries with its "+
				"next write (a restart before that delivers it again)",
				zap.Uint64("record", id), zap.Error(err))
		}
	}
}
