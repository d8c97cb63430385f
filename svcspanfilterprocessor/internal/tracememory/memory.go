package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"errors"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// ErrOverloaded: spans released but refused by the next consumer alone fill the memory limit. The
// processor refuses new data with a retryable error (push back) instead of buffering without bound.
var ErrOverloaded = errors.New("svcspanfilter: the next consumer is refusing released spans and they fill trace_integrity.memory_limit_mib; retry later")

// ErrContentOverloaded: content waiting for its span and released spans the next consumer refused
// fill the memory limit; the logs side refuses new content with a retryable error (push back)
// instead of forgetting content it acknowledged.
var ErrContentOverloaded = errors.New("svcspanfilter: waiting GenAI content and released spans the next consumer refused fill trace_integrity.memory_limit_mib; retry later")

// Memory is the trace memory, safe for concurrent use: it is sharded by trace id, each shard under
// its own lock, and it never calls the next consumer.
type Memory struct {
	cfg     Config
	journal journal.Journal
	join    Join
	// joins: a content join is configured (join is not noJoin).
	joins   bool
	observe Observer
	shards  []*shard

	// bytes: records, held spans and waiting content; heldBytes the held spans alone.
	bytes      atomic.Int64
	heldBytes  atomic.Int64
	heldSpans  atomic.Int64
	traces     atomic.Int64
	readyBytes atomic.Int64
	// perEntry is the learned mean bytes per attribute, event or link of the spans sized exactly
	// (×perEntryScale), for the estimate of a held span (lazysize.go).
	perEntry atomic.Int64

	scratch sync.Pool

	readyMu sync.Mutex
	ready   []*Delivery
	wake    chan struct{}
}

type shard struct {
	mu     sync.Mutex
	traces map[pcommon.TraceID]*trace
	// idle (no held span), waiting (held spans) and late (records forgotten, open parents kept)
	// traces, each ordered by last activity, oldest first.
	idle, waiting, late *traceList
	// withContent are traces holding content that waits for its span.
	withContent map[*trace]struct{}
	// pending are the changes to the memory's counts made under the lock since it was last
	// released: published once per locked section (unlock), not once per span, so that requests on
	// different shards do not contend for the counters' cache line span by span.
	pending counts
	// unsized are the held items counted by their estimate, sized at the next Expire or once
	// there are more than unsizedCap.
	unsized unsizedList
	// perEntry is the memory's perEntry as of the shard's last sizing pass.
	perEntry int64
}

// counts are changes to the memory's counters.
type counts struct{ bytes, heldBytes, heldSpans, traces int64 }

// unlock publishes the shard's pending counts and releases its lock. Every locked section ends
// with it (a section that ended with mu.Unlock would only delay its counts to the next one).
func (sh *shard) unlock(m *Memory) {
	if p := sh.pending; p != (counts{}) {
		sh.pending = counts{}
		m.bytes.Add(p.bytes)
		m.heldBytes.Add(p.heldBytes)
		m.heldSpans.Add(p.heldSpans)
		m.traces.Add(p.traces)
	}
	sh.mu.Unlock()
}

// New returns an empty memory. j may be journal.Nop, join may be nil (no content join) and observe
// may be nil.
func New(cfg Config, j journal.Journal, join Join, observe Observer) *Memory {
	cfg.setDefaults()
	if j == nil {
		j = journal.Nop
	}
	joins := join != nil
	if join == nil {
		join = noJoin{}
	}
	if observe == nil {
		observe = func(*Stats) {}
	}
	m := &Memory{cfg: cfg, journal: j, join: join, joins: joins, observe: observe, wake: make(chan struct{}, 1)}
	m.scratch.New = func() any { return &admitScratch{} }
	m.perEntry.Store(initialPerEntry)
	m.shards = make([]*shard, cfg.Shards)
	for i := range m.shards {
		m.shards[i] = &shard{
			traces: map[pcommon.TraceID]*trace{}, idle: &traceList{}, waiting: &traceList{}, late: &traceList{},
			withContent: map[*trace]struct{}{}, perEntry: initialPerEntry,
		}
	}
	return m
}

func (m *Memory) shardOf(id pcommon.TraceID) int {
	// Trace ids are random: their last bytes spread evenly.
	return int(uint32(id[12])<<24|uint32(id[13])<<16|uint32(id[14])<<8|uint32(id[15])) % len(m.shards)
}

// HeldSpans is the number of spans held (waiting for their parent or content).
func (m *Memory) HeldSpans() int64 { return m.heldSpans.Load() }

// HeldBytes is the estimated size of the held spans.
func (m *Memory) HeldBytes() int64 { return m.heldBytes.Load() }

// Bytes is everything the budget counts: records, held spans, waiting content and ready spans.
func (m *Memory) Bytes() int64 { return m.bytes.Load() + m.readyBytes.Load() }

// ReadyBytes is the size of released spans not yet accepted by the next consumer.
func (m *Memory) ReadyBytes() int64 { return m.readyBytes.Load() }

// Traces is the number of traces in memory.
func (m *Memory) Traces() int64 { return m.traces.Load() }

// Wake is signalled when deliveries are queued for the releaser.
func (m *Memory) Wake() <-chan struct{} { return m.wake }
