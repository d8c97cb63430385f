package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"context"
	"errors"
	"fmt"
	"math/bits"

	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// MergeSplit merges and splits span batches for the exporterhelper's batcher (sending_queue.batch),
// with the result of exporterhelper v0.164's own traces request (internal/queuebatch/
// traces_batch.go, whose algorithm this follows step by step, Apache-2.0): the same batches
// for the items and the bytes sizers. The batcher calls it for every request it takes, with
// other nil: a batch that fits max_size is handed on as it is, so a batch read from the
// persistent queue keeps its body and is posted without being decoded. Only merging (other not
// nil) or splitting decodes; the merged or split batches are encoded again at send.
func (r *spansRequest) MergeSplit(ctx context.Context, maxSize int, szt exporterhelper.RequestSizerType, other xexporterhelper.Request) ([]xexporterhelper.Request, error) {
	var sz tracesSizer
	switch szt {
	case exporterhelper.RequestSizerTypeItems:
		sz = spansCountSizer{}
	case exporterhelper.RequestSizerTypeBytes:
		sz = &spansBytesSizer{}
	default:
		return nil, errors.New("unknown sizer type")
	}
	if other == nil && r.fits(maxSize, szt) {
		return []xexporterhelper.Request{r}, nil
	}
	var o *spansRequest
	if other != nil {
		var ok bool
		if o, ok = other.(*spansRequest); !ok {
			return nil, errors.New("invalid input type")
		}
	}
	td, err := r.traces()
	if err != nil {
		r.dropUnreadable(ctx)
		if o == nil {
			return nil, err
		}
		// r is the batcher's current batch and cannot be read (logged by traces): it is
		// dropped, and other takes its place rather than being lost with it.
		reqs, oErr := o.MergeSplit(ctx, maxSize, szt, nil)
		return reqs, errors.Join(err, oErr)
	}
	if o != nil {
		otd, err := o.traces()
		if err != nil {
			o.dropUnreadable(ctx) // the batcher keeps its current batch, r
			return nil, err
		}
		otd.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		o.setTraces(otd)
		r.class = mergedClass(r.class, o.class)
	}
	r.setTraces(td)
	if maxSize == 0 {
		return []xexporterhelper.Request{r}, nil
	}
	return r.split(maxSize, sz)
}

// mergedClass is the class of a merge of batches of classes a and b. The batcher merges only
// batches of one partition, hence of one class (classPartitioner); were they to differ, the
// merge is sent as mixed, each scope's spans by their own class.
func mergedClass(a, b requestClass) requestClass {
	if a == b {
		return a
	}
	return classMixed
}

// dropUnreadable counts the spans of r, a queued batch whose body cannot be decoded and that
// MergeSplit drops, as failed for good. The batcher only hands MergeSplit's error to a request's
// completion (the incoming one's, even when it is the current batch that is dropped) and counts
// nothing; the batch is never sent, so neither exporterhelper's send_failed nor pushSpans counts
// it: this is its only count.
func (r *spansRequest) dropUnreadable(ctx context.Context) {
	if r.codec.droppedUnreadable != nil {
		r.codec.droppedUnreadable(ctx, r.spans)
	}
}

// fits says whether the request is within maxSize (0: no limit), measured without decoding it:
// the span count and the protobuf size are known from the queue item's header.
func (r *spansRequest) fits(maxSize int, szt exporterhelper.RequestSizerType) bool {
	switch {
	case maxSize == 0:
		return true
	case szt == exporterhelper.RequestSizerTypeItems:
		return r.spans <= maxSize
	default:
		return r.BytesSize() <= maxSize
	}
}

func (r *spansRequest) split(maxSize int, sz tracesSizer) ([]xexporterhelper.Request, error) {
	size := sz.TracesSize(r.td)
	if size <= maxSize {
		return []xexporterhelper.Request{r}, nil
	}
	var res []xexporterhelper.Request
	droppedItems := 0
	for size > maxSize {
		spansBefore := r.td.SpanCount()
		td, removedSize := extractTraces(r.td, maxSize, sz)
		if removedSize == 0 {
			r.setTraces(r.td)
			return res, fmt.Errorf("request size is greater than max size and cannot be split further, dropping items: %d", droppedItems+r.td.SpanCount())
		}
		size -= removedSize
		droppedItems += spansBefore - r.td.SpanCount() - td.SpanCount()
		if td.SpanCount() > 0 {
			piece := newSpansRequest(td, r.codec)
			piece.class = r.class
			res = append(res, piece)
		}
	}
	r.setTraces(r.td)
	if r.td.SpanCount() > 0 {
		res = append(res, r)
	}
	if droppedItems > 0 {
		return res, fmt.Errorf("single span exceeds the max size limit, dropping items: %d", droppedItems)
	}
	return res, nil
}

// tracesSizer measures spans as exporterhelper's sizers do (internal/sizer).
type tracesSizer interface {
	TracesSize(td ptrace.Traces) int
	ResourceSpansSize(rs ptrace.ResourceSpans) int
	ScopeSpansSize(ss ptrace.ScopeSpans) int
	SpanSize(span ptrace.Span) int
	// DeltaSize is the size an item of newItemSize adds to its parent.
	DeltaSize(newItemSize int) int
}

type spansCountSizer struct{}

func (spansCountSizer) TracesSize(td ptrace.Traces) int { return td.SpanCount() }

func (spansCountSizer) ResourceSpansSize(rs ptrace.ResourceSpans) int {
	count := 0
	for k := 0; k < rs.ScopeSpans().Len(); k++ {
		count += rs.ScopeSpans().At(k).Spans().Len()
	}
	return count
}

func (spansCountSizer) ScopeSpansSize(ss ptrace.ScopeSpans) int { return ss.Spans().Len() }
func (spansCountSizer) SpanSize(ptrace.Span) int                { return 1 }
func (spansCountSizer) DeltaSize(newItemSize int) int           { return newItemSize }

type spansBytesSizer struct{ ptrace.ProtoMarshaler }

// DeltaSize is the size of a length-delimited protobuf field of newItemSize bytes.
func (*spansBytesSizer) DeltaSize(newItemSize int) int {
	return 1 + newItemSize + (bits.Len64(uint64(newItemSize)|1)+6)/7
}

func extractTraces(srcTraces ptrace.Traces, capacity int, sz tracesSizer) (ptrace.Traces, int) {
	destTraces := ptrace.NewTraces()
	capacityLeft := capacity - sz.TracesSize(destTraces)
	removedSize := 0
	srcTraces.ResourceSpans().RemoveIf(func(srcRS ptrace.ResourceSpans) bool {
		if capacityLeft == 0 {
			return false
		}
		rawRsSize := sz.ResourceSpansSize(srcRS)
		rsSize := sz.DeltaSize(rawRsSize)
		if rsSize > capacityLeft {
			extSrcRS, extRsSize := extractResourceSpans(srcRS, capacityLeft, capacity, sz)
			// This cannot make it to exactly 0 for the bytes; 0 is the stopping condition.
			capacityLeft = 0
			if extSrcRS.ScopeSpans().Len() > 0 {
				extSrcRS.MoveTo(destTraces.ResourceSpans().AppendEmpty())
			}
			if srcRS.ScopeSpans().Len() == 0 {
				removedSize += rsSize
				return true
			}
			removedSize += rsSize - sz.DeltaSize(rawRsSize-extRsSize)
			return false
		}
		capacityLeft -= rsSize
		removedSize += rsSize
		srcRS.MoveTo(destTraces.ResourceSpans().AppendEmpty())
		return true
	})
	return destTraces, removedSize
}

func extractResourceSpans(srcRS ptrace.ResourceSpans, capacity, maxSize int, sz tracesSizer) (ptrace.ResourceSpans, int) {
	destRS := ptrace.NewResourceSpans()
	destRS.SetSchemaUrl(srcRS.SchemaUrl())
	srcRS.Resource().CopyTo(destRS.Resource())
	capacityLeft := capacity - (sz.DeltaSize(capacity) - capacity) - sz.ResourceSpansSize(destRS)
	maxScopeSize := maxSize - (sz.DeltaSize(maxSize) - maxSize) - sz.ResourceSpansSize(destRS)
	removedSize := 0
	srcRS.ScopeSpans().RemoveIf(func(srcSS ptrace.ScopeSpans) bool {
		if capacityLeft == 0 {
			return false
		}
		rawSsSize := sz.ScopeSpansSize(srcSS)
		ssSize := sz.DeltaSize(rawSsSize)
		if ssSize > capacityLeft {
			extSrcSS, extSsSize := extractScopeSpans(srcSS, capacityLeft, maxScopeSize, sz)
			capacityLeft = 0
			if extSrcSS.Spans().Len() > 0 {
				extSrcSS.MoveTo(destRS.ScopeSpans().AppendEmpty())
			}
			if srcSS.Spans().Len() == 0 {
				removedSize += ssSize
				return true
			}
			removedSize += ssSize - sz.DeltaSize(rawSsSize-extSsSize)
			return false
		}
		capacityLeft -= ssSize
		removedSize += ssSize
		srcSS.MoveTo(destRS.ScopeSpans().AppendEmpty())
		return true
	})
	return destRS, removedSize
}

func extractScopeSpans(srcSS ptrace.ScopeSpans, capacity, maxScopeSize int, sz tracesSizer) (ptrace.ScopeSpans, int) {
	destSS := ptrace.NewScopeSpans()
	destSS.SetSchemaUrl(srcSS.SchemaUrl())
	srcSS.Scope().CopyTo(destSS.Scope())
	capacityLeft := capacity - (sz.DeltaSize(capacity) - capacity) - sz.ScopeSpansSize(destSS)
	maxSpanSize := maxScopeSize - (sz.DeltaSize(maxScopeSize) - maxScopeSize) - sz.ScopeSpansSize(destSS)
	removedSize := 0
	srcSS.Spans().RemoveIf(func(srcSpan ptrace.Span) bool {
		if capacityLeft == 0 {
			return false
		}
		spanSize := sz.DeltaSize(sz.SpanSize(srcSpan))
		if spanSize > maxSpanSize {
			// It can never be exported and would block every span behind it: dropped.
			removedSize += spanSize
			return true
		}
		if spanSize > capacityLeft {
			capacityLeft = 0
			return false
		}
		capacityLeft -= spanSize
		removedSize += spanSize
		srcSpan.MoveTo(destSS.Spans().AppendEmpty())
		return true
	})
	return destSS, removedSize
}
