package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/credentials"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// ErrOverloaded: refused released spans fill the memory limit; new data is pushed back, not buffered.
var ErrOverloaded = errors.New("svcspanfilter: the next consumer is refusing released spans and they fill trace_integrity.memory_limit_mib; retry later")

// ErrContentOverloaded: waiting content and refused spans fill the memory limit; new content is pushed back.
var ErrContentOverloaded = errors.New("svcspanfilter: waiting GenAI content and released spans the next consumer refused fill trace_integrity.memory_limit_mib; retry later")

// Config of a Memory: the processor's trace_integrity options.
type Config struct {
	WaitDuration, MaxWaitDuration, RememberDuration time.Duration

	LateParentWindow time.Duration // how long a late trace stays (doc.go)
	ContentWait      time.Duration // the wait of a span for its content, and of content for its span
	MaxTraces        int
	MemoryLimitBytes int64 // records, held spans, ready spans and waiting content together
	ConnectorSpans   bool
	Journaled        bool             // held spans written ahead, open parents and dropped spans after
	Shards           int              // by trace id, each under its own lock (default 32)
	Now              func() time.Time // the clock (tests inject theirs); default time.Now
	Logger           *zap.Logger
	MaxGatedBytes    int64 // bounds what waits behind gates (gated.go; 0: only MemoryLimitBytes)
}

// Memory is the trace memory, safe for concurrent use (a lock per shard); it never calls the next consumer.
type Memory struct {
	cfg     Config
	gate    gate.Gate // nil: no trace waits behind a gate (gated.go)
	journal journal.Journal
	join    Join
	observe func(*Stats) // the Stats of every operation
	shards  []*shard
	// bytes: records, held spans and waiting content; perEntry: lazysize.go.
	bytes, heldBytes, heldSpans, traces, readyBytes, perEntry atomic.Int64
	gatedBytes, gateOwn                                       atomic.Int64 // behind gates; the gate's outside traces
	scratch                                                   sync.Pool
	readyMu                                                   sync.Mutex
	ready                                                     []*Delivery
	wake                                                      chan struct{}
}

type shard struct {
	mu     sync.Mutex
	traces map[pcommon.TraceID]*trace
	// idle, waiting and late traces (doc.go), oldest activity first.
	idle, waiting, late traceList
	withContent         map[*trace]struct{} // traces with content waiting for its span
	// pending: the count changes made under the lock, published at unlock (not span by span).
	pending  counts
	unsized  unsizedList // lazysize.go
	perEntry int64
	handle   gated // the gate's handle on a trace of the shard (gated.go)
}

type counts struct{ bytes, heldBytes, heldSpans, traces, gatedBytes int64 }

// unlock publishes the shard's pending counts and releases its lock.
func (sh *shard) unlock(m *Memory) {
	if p := sh.pending; p != (counts{}) {
		sh.pending = counts{}
		m.bytes.Add(p.bytes)
		m.heldBytes.Add(p.heldBytes)
		m.heldSpans.Add(p.heldSpans)
		m.traces.Add(p.traces)
		if p.gatedBytes != 0 {
			m.gatedBytes.Add(p.gatedBytes)
		}
	}
	sh.mu.Unlock()
}

// New returns an empty memory. j may be journal.Nop, join and observe may be nil.
func New(cfg Config, j journal.Journal, join Join, observe func(*Stats)) *Memory {
	cfg.Shards = cmp.Or(max(cfg.Shards, 0), 32)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Logger = cmp.Or(cfg.Logger, zap.NewNop())
	cfg.LateParentWindow = max(cfg.LateParentWindow, cfg.RememberDuration)
	if observe == nil {
		observe = func(*Stats) {}
	}
	m := &Memory{cfg: cfg, journal: j, join: join, observe: observe, wake: make(chan struct{}, 1)}
	m.scratch.New = func() any { return &admitScratch{} }
	m.perEntry.Store(initialPerEntry)
	m.shards = make([]*shard, cfg.Shards)
	for i := range m.shards {
		m.shards[i] = &shard{traces: map[pcommon.TraceID]*trace{}, withContent: map[*trace]struct{}{},
			perEntry: initialPerEntry}
	}
	return m
}

// shardOf spreads trace ids by their last bytes (random in a trace id).
func (m *Memory) shardOf(id pcommon.TraceID) int {
	return int(uint32(id[12])<<24|uint32(id[13])<<16|uint32(id[14])<<8|uint32(id[15])) % len(m.shards)
}

// The counts: HeldBytes of held spans, GatedBytes of what waits behind gates, ReadyBytes of
// released spans not yet taken; Bytes is all the budget counts. Wake: deliveries are queued.
func (m *Memory) HeldSpans() int64      { return m.heldSpans.Load() }
func (m *Memory) HeldBytes() int64      { return m.heldBytes.Load() }
func (m *Memory) GatedBytes() int64     { return m.gatedBytes.Load() }
func (m *Memory) ReadyBytes() int64     { return m.readyBytes.Load() }
func (m *Memory) Bytes() int64          { return m.bytes.Load() + m.readyBytes.Load() + m.gateOwn.Load() }
func (m *Memory) Traces() int64         { return m.traces.Load() }
func (m *Memory) Wake() <-chan struct{} { return m.wake }

// traceList is a shard's list of traces linked through the traces (no allocation per move).
type traceList struct{ head, tail *trace }

func (l *traceList) pushBack(t *trace) {
	t.list, t.prev, t.next = l, l.tail, nil
	if l.tail != nil {
		l.tail.next = t
	} else {
		l.head = t
	}
	l.tail = t
}

func (t *trace) unlist() {
	l := t.list
	if l == nil {
		return
	}
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		l.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		l.tail = t.prev
	}
	t.list, t.prev, t.next = nil, nil, nil
}

// ReleaseReason is why held spans went on.
type ReleaseReason uint8

const (
	ReleaseParentArrived ReleaseReason = iota // the parent (or, through dropped spans, an ancestor) arrived
	ReleaseWaitExpired                        // the trace was idle for wait_duration
	ReleaseMaxWait                            // the span waited max_wait_duration
	ReleaseEvicted                            // the memory limit or max_traces was reached
	ReleaseShutdown                           // the collector stopped
	ReleaseContent                            // its content arrived or its content wait ended
	ReleaseGate                               // its trace's gate opened (named "decided" in metrics)
	NumReleaseReasons
)

func (r ReleaseReason) String() string {
	return [...]string{"parent_arrived", "wait_expired", "max_wait", "evicted", "shutdown", "content", "decided"}[r]
}

// EvictReason is the bound that made the memory evict a trace.
type EvictReason uint8

const (
	EvictMemoryLimit EvictReason = iota
	EvictMaxTraces
	NumEvictReasons
)

func (r EvictReason) String() string { return [...]string{"memory_limit", "max_traces"}[r] }

// ReparentReason is why a kept span's parent id was changed.
type ReparentReason uint8

const (
	ReparentDroppedParent  ReparentReason = iota // moved to the nearest kept (or connector) ancestor
	ReparentNoKeptAncestor                       // every ancestor is known dropped: made a root
	ReparentOpenAncestor                         // the wait ended at an unknown ancestor above a dropped parent
	ReparentCycle                                // its parent chain led back to it (a hostile tree): made a root
	NumReparentReasons
)

func (r ReparentReason) String() string {
	return [...]string{"dropped_parent", "no_kept_ancestor", "open_ancestor", "cycle"}[r]
}

// UnmatchedReason is why content records were not joined onto their span.
type UnmatchedReason uint8

const (
	UnmatchedSpanDropped    UnmatchedReason = iota // the filter dropped its span
	UnmatchedSpanGone                              // its span had already gone on
	UnmatchedNoSpan                                // it waited ContentWait (or its trace was forgotten) without its span
	UnmatchedSpanHasContent                        // the span carried its own content, which takes precedence
	UnmatchedOtherTenant                           // its span came with another tenant's credentials
	NumUnmatchedReasons
)

func (r UnmatchedReason) String() string {
	return [...]string{"span_dropped", "span_gone", "no_span", "span_has_content", "other_tenant"}[r]
}

// Stats are the events of one memory operation.
type Stats struct {
	Released         [NumReleaseReasons]int64
	Reparented       [NumReparentReasons]int64
	Evicted          [NumEvictReasons]int64
	EvictedWaiting   int64 // evicted traces that held spans (released early)
	Connectors       int64
	ContentJoined    int64 // spans that received joined content
	ContentUnmatched [NumUnmatchedReasons]int64
	ContentWaits     []time.Duration // how long each span held for its content waited
	Discarded        int64           // held spans discarded as their trace's gate shut
}

// HeldReason is what a held span waits for: a bitmask, released when it is zero.
type HeldReason uint8

const (
	WaitParent  HeldReason = 1 << iota // the walk to its nearest kept ancestor reached an unknown span
	WaitContent                        // a content candidate whose content has not arrived
	WaitGate                           // its trace's gate is pending (gated.go)
)

// requestOrigin is the client context of a request: released spans go on with their own request's.
type requestOrigin struct {
	info   client.Info
	tenant string
}

func newRequestOrigin(info client.Info) *requestOrigin {
	return &requestOrigin{info: info, tenant: TenantOf(info)}
}

// TenantOf is whom a request speaks for: its svc credentials (forwarded by a pass-through gateway),
// or empty: content joins only its tenant's spans.
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
	// waitOn: the unknown span its walk stopped at; waitPrev, waitNext: the others waiting on it.
	waitOn             pcommon.SpanID
	waitPrev, waitNext *item
	ref                *RecordRef // the journal record of the call that held it
	// bytes: an estimate until sized (lazysize.go), unsizedAt its place in shard.unsized until then.
	bytes          int64
	unsizedAt      int32
	indexed, sized bool             // indexed: in trace.waitingOn
	content        []waitingContent // gathered while it waits for the rest (WaitContent)
	contentRefs    []*RecordRef     // of the content joined onto it, done when it is handed on
}

func (it *item) tenant() string { return it.origin.resource.request.tenant }

// RecordRef counts the items of a journal record not yet handed on; the last removes the record.
type RecordRef struct {
	id   uint64 // set before the reference is shared
	left atomic.Int64
	m    *Memory
}

// NewRecordRef is the reference of journal record id with items still to hand on.
func (m *Memory) NewRecordRef(id uint64, items int) *RecordRef {
	r := &RecordRef{id: id, m: m}
	r.left.Store(int64(items))
	return r
}

func (r *RecordRef) Done(n int) {
	if id := r.add(-n); id != 0 {
		r.m.remove(id)
	}
}

// add counts n more items of the record (fewer when n < 0); it returns the record's id when none
// is left (it is to be removed), else 0.
func (r *RecordRef) add(n int) uint64 {
	if r == nil || n == 0 || r.left.Add(int64(n)) != 0 {
		return 0
	}
	return r.id
}

// remove forgets the records of ids in one journal write.
func (m *Memory) remove(ids ...uint64) {
	if len(ids) == 0 {
		return
	}
	if err := m.journal.Remove(context.Background(), ids...); err != nil {
		m.cfg.Logger.Warn("Could not remove delivered journal records; the journal retries with its "+
			"next write (a restart before that delivers them again)", zap.Uint64s("records", ids), zap.Error(err))
	}
}
