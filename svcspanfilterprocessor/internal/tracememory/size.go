package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// itemSize is what a span counts in the budget while the memory has it (held, or released and not
// yet handed on): the span and its item.
func itemSize(span ptrace.Span) int64 { return spanSize(span) + itemCost }

// spanSize estimates the heap a span takes in pdata: its strings and attribute values plus the
// structs around them (calibrated with benchmarks/BenchmarkOpenLongRunningTraces so that the heap in
// use stays near memory_limit_mib). It is cheap: no marshalling on the hot path.
func spanSize(s ptrace.Span) int64 {
	n := int64(96 + len(s.Name()) + len(s.TraceState().AsRaw()) + len(s.Status().Message()))
	n += mapSize(s.Attributes())
	for i := 0; i < s.Events().Len(); i++ {
		e := s.Events().At(i)
		n += 32 + int64(len(e.Name())) + mapSize(e.Attributes())
	}
	for i := 0; i < s.Links().Len(); i++ {
		l := s.Links().At(i)
		n += 48 + int64(len(l.TraceState().AsRaw())) + mapSize(l.Attributes())
	}
	return n
}

// mapSize reads each value once: a string value's length is behind a pointer that is rarely in
// the cache (the filter read only the keys), and that read is most of the estimate's cost.
func mapSize(m pcommon.Map) int64 {
	n := 56 * int64(m.Len())
	for k, v := range m.All() {
		n += int64(len(k))
		if v.Type() == pcommon.ValueTypeStr {
			n += int64(len(v.Str()))
		} else {
			n += valueSize(v)
		}
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
		for i := 0; i < v.Slice().Len(); i++ {
			n += 16 + valueSize(v.Slice().At(i))
		}
		return n
	case pcommon.ValueTypeMap:
		return mapSize(v.Map())
	}
	return 8
}
