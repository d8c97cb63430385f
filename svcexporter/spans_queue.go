package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	pdatareq "go.opentelemetry.io/collector/pdata/xpdata/request"
	"go.uber.org/zap"
)

// A span batch in the persistent queue (sending_queue.storage) is stored as it goes on the
// wire, so that neither the queue nor the send decodes, re-encodes or re-compresses it:
//
//	magic         5 bytes  0x00 "svcq"
//	version       1 byte   1
//	compression   1 byte   0 none, 1 gzip: how body is compressed
//	spans         uvarint  span count (the items sizer; checked against the body when decoded)
//	proto size    uvarint  size of the uncompressed protobuf (the bytes sizer)
//	context size  uvarint  then the request context: client metadata (pass-through
//	                       credentials), client address and span context, in the format of
//	                       pdata/xpdata/request (a TracesRequest without spans)
//	body                   OTLP/protobuf ExportTraceServiceRequest, compressed as said
//	crc           4 bytes  CRC-32C (Castagnoli) of everything before it, little endian
//
// The first byte 0x00 is never the first byte of what exporterhelper's own encoding stored
// (the releases before: an xpdata TracesRequest, which starts with 0x0D, or a plain OTLP
// TracesData, which starts with a field tag, never 0), so items queued before an upgrade are
// still read, by exporterhelper's format (see spansQueueEncoding.Unmarshal).
var spansQueueMagic = []byte{0x00, 's', 'v', 'c', 'q'}

const spansQueueVersion = 1

// Compression codes of the queue format.
const (
	queuedUncompressed byte = 0
	queuedGzip         byte = 1
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

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

// queueItemRoom is the room encodeForQueue leaves before a body for the item's header: the fixed
// fields and a request context of up to 512 bytes (client metadata larger than that costs a copy
// of the body); queueItemTrailer is the checksum after it.
const (
	queueItemRoom    = 7 + 3*binary.MaxVarintLen64 + 512
	queueItemTrailer = 4
)

// Marshal stores req's wire body, encoding and compressing the spans if that was not done yet;
// the body is kept on req as well. A body made for the queue (encodeForQueue) gets its header
// written in the room before it and its checksum after it, in place: the item is not a copy.
func (e spansQueueEncoding) Marshal(ctx context.Context, req xexporterhelper.Request) ([]byte, error) {
	r, ok := req.(*spansRequest)
	if !ok {
		return nil, fmt.Errorf("svc exporter: cannot queue a %T as spans", req)
	}
	if err := r.encodeForQueue(queueItemRoom); err != nil {
		return nil, err
	}
	reqCtx, err := pdatareq.MarshalTraces(ctx, ptrace.NewTraces())
	if err != nil {
		return nil, fmt.Errorf("svc exporter: encoding the request context: %w", err)
	}
	code := queuedUncompressed
	if r.bodyCompression == configcompression.TypeGzip {
		code = queuedGzip
	}
	header := make([]byte, 0, len(spansQueueMagic)+2+3*binary.MaxVarintLen64+len(reqCtx))
	header = append(header, spansQueueMagic...)
	header = append(header, spansQueueVersion, code)
	header = binary.AppendUvarint(header, uint64(r.spans))
	header = binary.AppendUvarint(header, uint64(r.BytesSize()))
	header = binary.AppendUvarint(header, uint64(len(reqCtx)))
	header = append(header, reqCtx...)
	var item []byte
	if room := len(r.frame) - len(r.body); room >= len(header) && cap(r.frame)-len(r.frame) >= queueItemTrailer {
		item = r.frame[room-len(header):]
		copy(item, header)
	} else {
		item = make([]byte, 0, len(header)+len(r.body)+queueItemTrailer)
		item = append(append(item, header...), r.body...)
	}
	return binary.LittleEndian.AppendUint32(item, crc32.Checksum(item, crc32c)), nil
}

// Unmarshal reads a stored batch. Batches of this exporter come back as their body, not decoded;
// batches stored by exporterhelper's own encoding (before the upgrade) are decoded as it does.
func (e spansQueueEncoding) Unmarshal(data []byte) (context.Context, xexporterhelper.Request, error) {
	ctx, req, err := e.unmarshal(data)
	if err != nil {
		logUnreadableQueuedSpans(e.logger, err, zap.Int("bytes", len(data)))
	}
	return ctx, req, err
}

// logUnreadableQueuedSpans reports at error level a span batch of the persistent queue that
// cannot be read, when the queue reads it (Unmarshal) or when its body is decoded (a body that
// passed the checksum but does not decode): either way it cannot be sent and is dropped. It is a
// local failure, kept apart from the platform's refusals.
func logUnreadableQueuedSpans(logger *zap.Logger, err error, fields ...zap.Field) {
	if logger == nil {
		return
	}
	logger.Error("svc exporter: a span batch in the persistent queue cannot be read; it is dropped",
		append(fields, zap.Error(err))...)
}

func (e spansQueueEncoding) unmarshal(data []byte) (context.Context, xexporterhelper.Request, error) {
	if !bytes.HasPrefix(data, spansQueueMagic) {
		return e.unmarshalStock(data)
	}
	ctx := context.Background()
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", errCorruptQueuedSpans, fmt.Sprintf(format, args...))
	}
	if len(data) < len(spansQueueMagic)+2+3+4 {
		return ctx, nil, corrupt("%d bytes is too short", len(data))
	}
	content, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(content, crc32c) != sum {
		return ctx, nil, corrupt("checksum mismatch")
	}
	rest := content[len(spansQueueMagic):]
	if rest[0] != spansQueueVersion {
		return ctx, nil, corrupt("format version %d; this release reads version %d (a queue written by a newer release?)", rest[0], spansQueueVersion)
	}
	var compression configcompression.Type
	switch rest[1] {
	case queuedUncompressed:
		compression = compressionNone
	case queuedGzip:
		compression = configcompression.TypeGzip
	default:
		return ctx, nil, corrupt("unknown compression code %d", rest[1])
	}
	rest = rest[2:]
	var fields [3]uint64
	for i := range fields {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return ctx, nil, corrupt("bad header")
		}
		fields[i], rest = v, rest[n:]
	}
	spans, protoSize, ctxLen := fields[0], fields[1], fields[2]
	if ctxLen > uint64(len(rest)) || spans > 1<<31 || protoSize > 1<<40 {
		return ctx, nil, corrupt("bad header")
	}
	reqCtx, _, err := pdatareq.UnmarshalTraces(rest[:ctxLen])
	if err != nil {
		return ctx, nil, corrupt("request context: %v", err)
	}
	return reqCtx, &spansRequest{
		codec:           e.codec,
		body:            rest[ctxLen:],
		bodyCompression: compression,
		spans:           int(spans),
		protoSize:       int(protoSize),
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
	return ctx, newSpansRequest(td, e.codec), nil
}
