package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	pdatareq "go.opentelemetry.io/collector/pdata/xpdata/request"
	"go.uber.org/zap"
)

// A span batch in the persistent queue (sending_queue.storage) is stored as it goes on the
// wire, so that neither the queue nor the send decodes, re-encodes or re-compresses it. The
// item is framed as queue_item.go says, with
//
//	magic         0x00 "svcq"
//	version       2
//	flag          compression: 0 none, 1 gzip: how the payload is compressed
//	fields        span count (the items sizer; checked against the body when decoded), the
//	              size of the uncompressed protobuf (the bytes sizer), then the write path class
//	              (requestClass: 0 none, 1 direct, 2 staged, 3 mixed)
//	payload       OTLP/protobuf ExportTraceServiceRequest, compressed as said
//
// Version 1 (the releases before write_path) had no class: its items are read as staged, the path
// they would have taken then.
// Items stored by exporterhelper's own encoding (the releases before: an xpdata TracesRequest,
// or a plain OTLP TracesData) are still read, by its format (see spansQueueEncoding.Unmarshal).
var spansQueueMagic = []byte{0x00, 's', 'v', 'c', 'q'}

const (
	spansQueueVersion = 2
	// spansQueueVersionNoClass is the format before the class field, still read.
	spansQueueVersionNoClass = 1
	spansQueueFields         = 3
)

// Compression codes of the queue format.
const (
	queuedUncompressed byte = 0
	queuedGzip         byte = 1
)

// errCorruptQueuedSpans is wrapped by every error of an item the queue cannot read; the
// persistent queue drops such an item.
var errCorruptQueuedSpans = errors.New("svc exporter: a span batch in the persistent queue is unreadable")

// spansQueueEncoding is the persistent queue's encoding of span batches.
type spansQueueEncoding struct {
	codec *spanBodyCodec
	// logger reports unreadable items at error level: the persistent queue drops them and logs
	// that only at debug level.
	logger *zap.Logger
}

// spansItemRoom is the room encodeForQueue leaves before a body for the item's header.
var spansItemRoom = queueItemRoom(spansQueueMagic, spansQueueFields)

// Marshal stores req's wire body, encoding and compressing the spans if that was not done yet;
// the body is kept on req as well. A body made for the queue (encodeForQueue) gets its header
// written in the room before it and its checksum after it, in place: the item is not a copy.
func (e spansQueueEncoding) Marshal(ctx context.Context, req xexporterhelper.Request) ([]byte, error) {
	r, ok := req.(*spansRequest)
	if !ok {
		return nil, fmt.Errorf("svc exporter: cannot queue a %T as spans", req)
	}
	if err := r.encodeForQueue(spansItemRoom); err != nil {
		return nil, err
	}
	reqCtx, err := marshalRequestContext(ctx)
	if err != nil {
		return nil, err
	}
	code := queuedUncompressed
	if r.bodyCompression == configcompression.TypeGzip {
		code = queuedGzip
	}
	header := appendQueueHeader(make([]byte, 0, queueHeaderSize(spansQueueMagic, spansQueueFields, reqCtx)),
		spansQueueMagic, spansQueueVersion, code, reqCtx, uint64(r.spans), uint64(r.BytesSize()), uint64(r.class))
	return frameQueueItem(r.frame, r.body, header), nil
}

// Unmarshal reads a stored batch. Batches of this exporter come back as their body, not decoded;
// batches stored by exporterhelper's own encoding (before the upgrade) are decoded as it does.
func (e spansQueueEncoding) Unmarshal(data []byte) (context.Context, xexporterhelper.Request, error) {
	ctx, req, err := e.unmarshal(data)
	if err != nil {
		logUnreadableQueueItem(e.logger, "a span batch", err, zap.Int("bytes", len(data)))
	}
	return ctx, req, err
}

func (e spansQueueEncoding) unmarshal(data []byte) (context.Context, xexporterhelper.Request, error) {
	if !isQueueItem(data, spansQueueMagic) {
		return e.unmarshalStock(data)
	}
	fields := [spansQueueFields]uint64{2: uint64(classStaged)}
	version, nFields := byte(spansQueueVersion), spansQueueFields
	if len(data) > len(spansQueueMagic) && data[len(spansQueueMagic)] == spansQueueVersionNoClass {
		version, nFields = spansQueueVersionNoClass, 2
	}
	flag, reqCtx, body, err := readQueueItem(data, spansQueueMagic, version, fields[:nFields])
	if err != nil {
		return reqCtx, nil, fmt.Errorf("%w: %w", errCorruptQueuedSpans, err)
	}
	var compression configcompression.Type
	switch flag {
	case queuedUncompressed:
		compression = compressionNone
	case queuedGzip:
		compression = configcompression.TypeGzip
	default:
		return reqCtx, nil, fmt.Errorf("%w: unknown compression code %d", errCorruptQueuedSpans, flag)
	}
	spans, protoSize, class := fields[0], fields[1], fields[2]
	if spans > 1<<31 || protoSize > 1<<40 || class > uint64(classMixed) {
		return reqCtx, nil, fmt.Errorf("%w: bad header", errCorruptQueuedSpans)
	}
	return reqCtx, &spansRequest{
		codec:           e.codec,
		body:            body,
		bodyCompression: compression,
		spans:           int(spans),
		protoSize:       int(protoSize),
		class:           requestClass(class),
	}, nil
}

// unmarshalStock reads what exporterhelper v0.164's traces encoding stored: the xpdata request
// format with its context, or (older releases) a plain OTLP protobuf without one.
func (e spansQueueEncoding) unmarshalStock(data []byte) (context.Context, xexporterhelper.Request, error) {
	ctx, td, err := pdatareq.UnmarshalTraces(data)
	if errors.Is(err, pdatareq.ErrInvalidFormat) {
		td, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data)
	}
	if err != nil {
		return ctx, nil, fmt.Errorf("%w: %v", errCorruptQueuedSpans, err)
	}
	r := newSpansRequest(td, e.codec)
	r.class = classStaged // queued before write_path: the path it would have taken then
	return ctx, r, nil
}
