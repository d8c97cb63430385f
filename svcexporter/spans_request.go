package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/xpdata/pref"
	"go.uber.org/zap"
)

// spansRequest is the exporterhelper request of a span batch. It holds the spans, the body they
// go on the wire as, or both:
//   - built from spans (what the pipeline hands on), the body is made at send (in-memory
//     queue) or before the persistent queue stores it (spansRequestFromTraces), and kept, so
//     that neither a retry nor the send after the queue re-encodes or re-compresses;
//   - read back from the persistent queue (spansQueueEncoding), it holds only the body, as it was
//     stored; the spans are decoded from it only when something needs them (a 413 split, a
//     partial retry, the log of a span too large, merging batches, splitting one too large for
//     the batch's max_size).
//
// Whoever changes the spans (MergeSplit) drops the body.
type spansRequest struct {
	codec *spanBodyCodec

	td      ptrace.Traces
	decoded bool // td is valid
	// decodeErr is why the body could not be decoded (logged once, when it happened).
	decodeErr error

	body            []byte // nil until encoded
	bodyCompression configcompression.Type
	// frame is the buffer body was made in for the persistent queue (encodeForQueue): body is
	// its end, and the bytes before it are free for the queue item's header; nil otherwise.
	frame []byte

	spans     int
	protoSize int // size of the uncompressed OTLP protobuf (the bytes sizer); -1: not known yet

	// class is the write path class of the spans (write_path auto; write_path.go).
	class requestClass

	// pinned are the spans spansReferenceCounter.Ref pinned, set by Ref only and read by Unref
	// only. The queue's consumer calls Unref as soon as the batcher took the request, while the
	// batcher may still hold it as its current batch and merge into it (MergeSplit, setTraces)
	// on another consumer's goroutine: Unref must not read what MergeSplit writes.
	pinned    ptrace.Traces
	hasPinned bool
}

var (
	_ xexporterhelper.Request             = (*spansRequest)(nil)
	_ xexporterhelper.RequestErrorHandler = (*spansRequest)(nil)
)

func newSpansRequest(td ptrace.Traces, codec *spanBodyCodec) *spansRequest {
	return &spansRequest{codec: codec, td: td, decoded: true, spans: td.SpanCount(), protoSize: -1}
}

// ItemsCount is the number of spans: what the queue's items sizer and the exporterhelper's
// sent/failed counts count.
func (r *spansRequest) ItemsCount() int { return r.spans }

// BytesSize is the size of the uncompressed protobuf, as of exporterhelper's own traces request,
// so that a queue or batch sized in bytes means the same as before.
func (r *spansRequest) BytesSize() int {
	if r.protoSize < 0 {
		r.protoSize = tracesMarshaler.TracesSize(r.td)
	}
	return r.protoSize
}

var tracesMarshaler = &ptrace.ProtoMarshaler{}

// traces returns the spans, decoding them from the body once if the request came from the queue.
// A body that cannot be decoded (it passed the queue's checksum, so a writer's bug, not the disk)
// is logged at error level, once, as an unreadable queue item: the batch cannot be sent, and the
// error (errCorruptQueuedSpans) is permanent.
func (r *spansRequest) traces() (ptrace.Traces, error) {
	if r.decoded {
		return r.td, nil
	}
	if r.decodeErr != nil {
		return ptrace.Traces{}, r.decodeErr
	}
	td, err := decodeSpanBody(r.body, r.bodyCompression)
	if err == nil && td.SpanCount() != r.spans {
		err = fmt.Errorf("it holds %d spans where its header says %d", td.SpanCount(), r.spans)
	}
	if err != nil {
		r.decodeErr = fmt.Errorf("%w: %w", errCorruptQueuedSpans, err)
		logUnreadableQueueItem(r.codec.logger, "a span batch", r.decodeErr, zap.Int("spans", r.spans), zap.Int("bytes", len(r.body)))
		return ptrace.Traces{}, r.decodeErr
	}
	r.td, r.decoded = td, true
	return td, nil
}

// wireBody returns the body to post, compressed as the exporter's codec compresses: the one
// kept, or a new one (kept for a retry). A body stored with another compression (the
// compression setting changed across a restart) is re-encoded.
func (r *spansRequest) wireBody() ([]byte, error) {
	if r.body != nil && r.bodyCompression == r.codec.compression {
		return r.body, nil
	}
	td, err := r.traces()
	if err != nil {
		return nil, err
	}
	body, protoSize, err := r.codec.encode(td)
	if err != nil {
		return nil, err
	}
	r.body, r.bodyCompression, r.protoSize, r.frame = body, r.codec.compression, protoSize, nil
	return body, nil
}

// encodeForQueue makes the wire body, if there is none yet, with room free bytes before it, so
// that the persistent queue frames it there as a queue item without copying it.
func (r *spansRequest) encodeForQueue(room int) error {
	if r.body != nil && r.bodyCompression == r.codec.compression {
		return nil
	}
	td, err := r.traces()
	if err != nil {
		return err
	}
	buf, at, protoSize, err := r.codec.encodeWithRoom(td, room)
	if err != nil {
		return err
	}
	r.frame, r.body, r.bodyCompression, r.protoSize = buf, buf[at:], r.codec.compression, protoSize
	return nil
}

// setTraces replaces the spans (after a merge or split), which makes the body stale.
func (r *spansRequest) setTraces(td ptrace.Traces) {
	r.td, r.decoded = td, true
	r.body, r.frame = nil, nil
	r.spans = td.SpanCount()
	r.protoSize = -1
}

// OnError hands the retry only the spans an error says are still to be sent (a partial
// delivery: consumererror.Traces, see pushSpans), as exporterhelper's traces request does.
func (r *spansRequest) OnError(err error) xexporterhelper.Request {
	if te, ok := errors.AsType[consumererror.Traces](err); ok {
		rest := newSpansRequest(te.Data(), r.codec)
		rest.class = r.class
		return rest
	}
	return r
}

// spansReferenceCounter keeps pooled pdata (the pdata pooling feature gate) alive while the
// queue holds a request, as exporterhelper does for its own traces requests. The in-memory queue
// calls Ref when it takes a request; the queue's consumers call Unref on every request they read,
// also on those of the persistent queue, which never calls Ref. Unref releases only what Ref
// pinned: the spans of a request read from storage belong to the request alone, and releasing
// them would free them (with the gate on) while the batcher still holds the request.
type spansReferenceCounter struct{}

func (spansReferenceCounter) Ref(req xexporterhelper.Request) {
	if r, ok := req.(*spansRequest); ok && r.decoded {
		r.pinned, r.hasPinned = r.td, true
		pref.RefTraces(r.pinned)
	}
}

func (spansReferenceCounter) Unref(req xexporterhelper.Request) {
	if r, ok := req.(*spansRequest); ok && r.hasPinned {
		pref.UnrefTraces(r.pinned)
	}
}

// spansRequestFromTraces is the converter of the exporterhelper: the pipeline's spans become a
// request of this exporter's codec. For a persistent queue the body is made here, in the
// caller's goroutine: the queue stores it (spansQueueEncoding.Marshal) under its lock, which every
// other call and every queue consumer waits for, and encoding and compressing the spans there
// would make them wait for that too. A failure here is left to Marshal, which reports it.
// With classify (write_path auto) the request gets its write path class here, where the client's
// headers are known (client metadata of ctx): one request whatever its classes, so that the
// queue takes all of a batch or none of it.
func spansRequestFromTraces(codec *spanBodyCodec, persistent, classify bool) xexporterhelper.RequestConverterFunc[ptrace.Traces] {
	return func(ctx context.Context, td ptrace.Traces) (xexporterhelper.Request, error) {
		r := newSpansRequest(td, codec)
		if classify {
			r.class = classOf(ctx, td)
		}
		if persistent {
			_ = r.encodeForQueue(spansItemRoom)
		}
		return r, nil
	}
}
