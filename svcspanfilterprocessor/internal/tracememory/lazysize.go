package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Held spans are sized lazily. Most held spans are released by the very next request, and sizing
// a span exactly (spanSize) reads every string attribute value behind its own pointer, which the
// filter never touched: cache misses that were a sixth of the held path's CPU. So a span is held
// with an estimate that reads no attribute value (spanEstimate), and is sized exactly only if it
// is still held at the releaser's next tick (Memory.Expire), or at once when its shard holds more
// than unsizedCap spans not yet sized. The budget is thus exact up to at most unsizedCap spans
// per shard, for at most one releaser interval; a released span that was never sized carries its
// estimate into the ready bytes until it is handed on (a refused delivery is sized exactly at
// Requeue, since it may stay for long).

// unsizedCap bounds the held spans of one shard counted by their estimate. 64 × 32 shards (the
// default) is 2,048 spans: the held spans of one large request, while most requests hold fewer
// spans per shard (480 spans of 20 agent traces hold about 160, 5 per shard) and are never sized.
const unsizedCap = 64

// Initial mean bytes per attribute, event or link (fixed point, ×perEntryScale) before any span
// was sized: a map entry (56) plus a short key and value, as in OpenTelemetry semantic conventions.
const (
	perEntryScale   = 16
	initialPerEntry = 104 * perEntryScale
)

// spanBase is what spanSize counts for a span whatever its attributes.
const spanBase = 96

// sizedHook, when set (tests), is called with each span sized exactly while it is held.
var sizedHook func(ptrace.Span)

// maxPerEntry caps what one sizing pass teaches (bytes per entry): a few spans with a prompt in an
// attribute would otherwise make every later span count as large for a while, and evict early.
// Large spans are still counted exactly at the next tick or past the cap.
const maxPerEntry = 1024 * perEntryScale

// spanEstimate is the held size of span counted until it is sized exactly: its fixed part, its
// name and the learned mean size of an attribute, event or link times their count. Only lengths
// stored in the span itself are read (no attribute value). Under the shard's lock.
func (sh *shard) spanEstimate(span ptrace.Span) int64 {
	entries := int64(span.Attributes().Len() + span.Events().Len() + span.Links().Len())
	return itemCost + spanBase + int64(len(span.Name())) + entries*sh.perEntry/perEntryScale
}

// learn moves the memory's mean bytes per entry toward that of spans just sized exactly (extra
// bytes over spanBase and the name, over entries): an exponentially weighted mean, 1/8 per sizing
// pass (a lost update between shards only delays it by a pass). The shard takes the mean for its
// estimates then: read per held span, the memory's counter would share a cache line that other
// cores write at every locked section.
func (sh *shard) learn(m *Memory, extra, entries int64) {
	if entries > 0 {
		mean := min(extra*perEntryScale/entries, maxPerEntry)
		old := m.perEntry.Load()
		m.perEntry.Store(old + (mean-old)/8)
	}
	sh.perEntry = m.perEntry.Load()
}

// unsizedList links the held items of a shard that carry an estimate (item.sized false), through
// the items: one is taken out in constant time when it is released, so that a released item is
// never kept alive by it, and holding costs no allocation.
type unsizedList struct {
	head *item
	n    int
}

func (l *unsizedList) push(it *item) {
	it.unsizedPrev, it.unsizedNext = nil, l.head
	if l.head != nil {
		l.head.unsizedPrev = it
	}
	l.head = it
	l.n++
}

func (l *unsizedList) remove(it *item) {
	if it.unsizedPrev != nil {
		it.unsizedPrev.unsizedNext = it.unsizedNext
	} else {
		l.head = it.unsizedNext
	}
	if it.unsizedNext != nil {
		it.unsizedNext.unsizedPrev = it.unsizedPrev
	}
	it.unsizedPrev, it.unsizedNext = nil, nil
	l.n--
}

// resize sets the exact size of it, sized now, and corrects the counts of its trace and shard if
// it is held (under the shard's lock). It is no longer estimated.
func (sh *shard) resize(m *Memory, it *item, exact int64) {
	grown := exact - it.bytes
	if it.held {
		if !it.sized {
			sh.unsized.remove(it)
		}
		m.addBytes(it.trace, grown)
		sh.pending.heldBytes += grown
	}
	it.bytes = exact
	it.sized = true
}

// sizeHeld sizes exactly every held span of the shard that carries an estimate (under its lock),
// and learns the mean size of an entry from them.
func (sh *shard) sizeHeld(m *Memory) {
	var extra, entries int64
	for sh.unsized.head != nil {
		it := sh.unsized.head
		exact := itemSize(it.span)
		if sizedHook != nil {
			sizedHook(it.span)
		}
		if n := int64(it.span.Attributes().Len() + it.span.Events().Len() + it.span.Links().Len()); n > 0 {
			extra += exact - itemCost - spanBase - int64(len(it.span.Name()))
			entries += n
		}
		sh.resize(m, it, exact)
	}
	sh.learn(m, extra, entries)
}

// sizeIfMany sizes the shard's estimated held spans once there are more than unsizedCap of them.
func (sh *shard) sizeIfMany(m *Memory) {
	if sh.unsized.n > unsizedCap {
		sh.sizeHeld(m)
	}
}

// sizeDeliveries sizes refused deliveries exactly: they may stay in the ready bytes for as long as
// the next consumer refuses them, and their spans may carry estimates (released before a tick).
func (m *Memory) sizeDeliveries(ds []*Delivery) {
	for _, d := range ds {
		if d.sized || d.bytes == 0 {
			continue // sized, or not counted (recovered spans that resolved at once)
		}
		var exact int64
		rss := d.Traces.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					exact += itemSize(spans.At(k))
				}
			}
		}
		m.readyBytes.Add(exact - d.bytes)
		d.bytes, d.sized = exact, true
	}
}
