package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Held spans are sized lazily: most are released by the next request, and sizing a span exactly
// reads every string value behind its own pointer (a sixth of the held path's CPU). A span is held
// with an estimate that reads no value, sized at the next Expire or once its shard holds over
// unsizedCap estimates; a released span keeps its estimate until handed on (or sized at Requeue).
// The estimate learns the mean bytes per attribute, event or link (fixed point perEntryScale),
// capped by maxPerEntry: a few prompts in attributes would make every later span count as large.
const (
	unsizedCap      = 64
	perEntryScale   = 16
	initialPerEntry = 104 * perEntryScale
	maxPerEntry     = 1024 * perEntryScale
	spanBase        = 96 // what itemSize counts for a span (beside itemCost) whatever its attributes
)

// sizedHook, when set (tests), is called with each span sized exactly while it is held.
var sizedHook func(ptrace.Span)

// spanEstimate is span's size until sized: fixed part, name, entries times their mean size.
func (sh *shard) spanEstimate(span ptrace.Span) int64 {
	return itemCost + spanBase + int64(len(span.Name())) + entriesOf(span)*sh.perEntry/perEntryScale
}

func entriesOf(span ptrace.Span) int64 {
	return int64(span.Attributes().Len() + span.Events().Len() + span.Links().Len())
}

// unsizedList holds a shard's held items that carry an estimate, each knowing its place (unsizedAt).
type unsizedList []*item

func (l *unsizedList) push(it *item) {
	it.unsizedAt = int32(len(*l))
	*l = append(*l, it)
}

func (l *unsizedList) remove(it *item) {
	last := (*l)[len(*l)-1]
	(*l)[it.unsizedAt], last.unsizedAt = last, it.unsizedAt
	(*l)[len(*l)-1] = nil
	*l = (*l)[:len(*l)-1]
}

// resize gives it, a held item (never a released one), its exact size and corrects the counts.
func (sh *shard) resize(m *Memory, it *item, exact int64) {
	if !it.sized {
		sh.unsized.remove(it)
	}
	m.addBytes(it.trace, exact-it.bytes)
	sh.pending.heldBytes += exact - it.bytes
	if it.reason&WaitGate != 0 {
		sh.pending.gatedBytes += exact - it.bytes
	}
	it.bytes, it.sized = exact, true
}

// sizeHeld sizes the shard's estimated held spans and moves the mean bytes per entry 1/8 toward
// theirs (a lost update only delays it); the shard keeps a copy, read per span without contention.
func (sh *shard) sizeHeld(m *Memory) {
	var extra, entries int64
	for len(sh.unsized) > 0 {
		it := sh.unsized[len(sh.unsized)-1]
		exact := itemSize(it.span)
		if sizedHook != nil {
			sizedHook(it.span)
		}
		if n := entriesOf(it.span); n > 0 {
			extra += exact - itemCost - spanBase - int64(len(it.span.Name()))
			entries += n
		}
		sh.resize(m, it, exact)
	}
	if entries > 0 {
		mean := min(extra*perEntryScale/entries, maxPerEntry)
		old := m.perEntry.Load()
		m.perEntry.Store(old + (mean-old)/8)
	}
	sh.perEntry = m.perEntry.Load()
}

// itemSize is what a span counts in the budget while the memory has it: its item and the heap it
// takes in pdata (calibrated with BenchmarkOpenLongRunningTraces).
func itemSize(s ptrace.Span) int64 {
	n := int64(itemCost + spanBase + len(s.Name()) + len(s.TraceState().AsRaw()) + len(s.Status().Message()))
	n += mapSize(s.Attributes())
	for _, e := range s.Events().All() {
		n += 32 + int64(len(e.Name())) + mapSize(e.Attributes())
	}
	for _, l := range s.Links().All() {
		n += 48 + int64(len(l.TraceState().AsRaw())) + mapSize(l.Attributes())
	}
	return n
}

func mapSize(m pcommon.Map) int64 {
	n := 56 * int64(m.Len())
	for k, v := range m.All() {
		n += int64(len(k)) + valueSize(v)
	}
	return n
}

func valueSize(v pcommon.Value) int64 {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return int64(len(v.Str()))
	case pcommon.ValueTypeBytes:
		return int64(v.Bytes().Len())
	case pcommon.ValueTypeSlice:
		var n int64
		for _, e := range v.Slice().All() {
			n += 16 + valueSize(e)
		}
		return n
	case pcommon.ValueTypeMap:
		return mapSize(v.Map())
	}
	return 8
}
