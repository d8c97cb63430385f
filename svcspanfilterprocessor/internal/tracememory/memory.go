package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// ErrOverloaded: refused released spans fill the memory limit; new data is pushed back, not buffered.
var ErrOverloaded = errors.New("svcspanfilter: the next consumer is refusing released spans and they fill trace_integrity.memory_limit_mib; retry later")

// ErrContentOverloaded: waiting content and refused spans fill the memory limit; new content is pushed back.
var ErrContentOverloaded = errors.New("svcspanfilter: waiting GenAI content and released spans the next consumer refused fill trace_integrity.memory_limit_mib; retry later")

// Config of a Memory. Durations and bounds are the processor's trace_integrity options.
type Config struct {
	WaitDuration, MaxWaitDuration, RememberDuration time.Duration
	// LateParentWindow: how long an idle trace keeps its open parents and the records of its dropped
	// spans, so that a late dropped parent still becomes a connector below its nearest kept ancestor.
	LateParentWindow time.Duration
	ContentWait      time.Duration // the wait of a span for its content, and of content for its span
	MaxTraces        int
	MemoryLimitBytes int64 // records, held spans, ready spans and waiting content together
	ConnectorSpans   bool
	Journaled        bool             // journal what it may hold ahead, open parents and dropped spans after
	Shards           int              // by trace id, each under its own lock (default 32)
	Now              func() time.Time // the clock (tests inject theirs); default time.Now
	Logger           *zap.Logger
}

// Memory is the trace memory, safe for concurrent use (a lock per shard); it never calls the next consumer.
type Memory struct {
	cfg     Config
	journal journal.Journal
	join    Join
	joins   bool         // join is not noJoin
	observe func(*Stats) // the Stats of every operation that had events
	shards  []*shard
	// bytes: records, held spans and waiting content; heldBytes the held spans alone.
	bytes, heldBytes, heldSpans, traces, readyBytes atomic.Int64
	// perEntry: the learned mean size of an attribute, event or link (lazysize.go).
	perEntry atomic.Int64
	scratch  sync.Pool
	readyMu  sync.Mutex
	ready    []*Delivery
	wake     chan struct{}
}

type shard struct {
	mu     sync.Mutex
	traces map[pcommon.TraceID]*trace
	// idle (no held span), waiting (held spans) and late (compacted) traces, oldest activity first.
	idle, waiting, late *traceList
	withContent         map[*trace]struct{} // traces with content waiting for its span
	// pending are the count changes made under the lock, published once per locked section
	// (unlock): shards would otherwise contend span by span for the counters' cache line.
	pending counts
	// unsized: held items counted by their estimate; perEntry: the memory's at the last sizing (lazysize.go).
	unsized  unsizedList
	perEntry int64
}

type counts struct{ bytes, heldBytes, heldSpans, traces int64 }

// unlock publishes the shard's pending counts and releases its lock; every locked section ends so.
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

// New returns an empty memory. j may be journal.Nop, join and observe may be nil.
func New(cfg Config, j journal.Journal, join Join, observe func(*Stats)) *Memory {
	if cfg.Shards <= 0 {
		cfg.Shards = 32
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	cfg.LateParentWindow = max(cfg.LateParentWindow, cfg.RememberDuration)
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

// shardOf spreads trace ids by their last bytes (random in a trace id).
func (m *Memory) shardOf(id pcommon.TraceID) int {
	return int(uint32(id[12])<<24|uint32(id[13])<<16|uint32(id[14])<<8|uint32(id[15])) % len(m.shards)
}

// HeldSpans and HeldBytes: the spans held and their size; ReadyBytes: released spans not yet taken
// by the next consumer; Bytes: all the budget counts; Wake: signalled when deliveries are queued.
func (m *Memory) HeldSpans() int64      { return m.heldSpans.Load() }
func (m *Memory) HeldBytes() int64      { return m.heldBytes.Load() }
func (m *Memory) ReadyBytes() int64     { return m.readyBytes.Load() }
func (m *Memory) Bytes() int64          { return m.bytes.Load() + m.readyBytes.Load() }
func (m *Memory) Traces() int64         { return m.traces.Load() }
func (m *Memory) Wake() <-chan struct{} { return m.wake }

// traceList is a shard's list of traces linked through the traces themselves: a trace moves
// between lists on every hold and release, and an element allocated per move showed in profiles.
type traceList struct{ head, tail *trace }

// pushBack appends t, which is on no list.
func (l *traceList) pushBack(t *trace) {
	t.list, t.prev, t.next = l, l.tail, nil
	if l.tail != nil {
		l.tail.next = t
	} else {
		l.head = t
	}
	l.tail = t
}

// remove takes t out of l, the list it is on.
func (l *traceList) remove(t *trace) {
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
