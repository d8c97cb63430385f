package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"go.opentelemetry.io/collector/pdata/ptrace"
	pdatareq "go.opentelemetry.io/collector/pdata/xpdata/request"
	"go.uber.org/zap"
)

// The frame both persistent queue formats of this exporter share (span batches: spans_queue.go,
// scores: scores_queue.go):
//
//	magic         5 bytes  0x00 and four letters, one per signal
//	version       1 byte
//	flag          1 byte   the signal's own (spans: the body's compression)
//	fields        uvarints the signal's own counts, a fixed number of them
//	context size  uvarint  then the request context: client metadata (pass-through
//	                       credentials), client address and span context, in the format of
//	                       pdata/xpdata/request (a TracesRequest without spans)
//	payload                the signal's own
//	crc           4 bytes  CRC-32C (Castagnoli) of everything before it, little endian
//
// The first byte 0x00 is never the first byte of what exporterhelper's own encodings stored (the
// releases before: an xpdata request, which starts with 0x0D, or plain OTLP, which starts with a
// field tag, never 0), so items queued before an upgrade are still read, by exporterhelper's format.

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// queueItemTrailer is the size of the checksum after an item's payload.
const queueItemTrailer = 4

// marshalRequestContext encodes what of ctx the queue keeps with an item.
func marshalRequestContext(ctx context.Context) ([]byte, error) {
	reqCtx, err := pdatareq.MarshalTraces(ctx, ptrace.NewTraces())
	if err != nil {
		return nil, fmt.Errorf("svc exporter: encoding the request context: %w", err)
	}
	return reqCtx, nil
}

// appendQueueHeader appends an item's header, up to its payload, to dst.
func appendQueueHeader(dst, magic []byte, version, flag byte, reqCtx []byte, fields ...uint64) []byte {
	dst = append(dst, magic...)
	dst = append(dst, version, flag)
	for _, f := range fields {
		dst = binary.AppendUvarint(dst, f)
	}
	dst = binary.AppendUvarint(dst, uint64(len(reqCtx)))
	return append(dst, reqCtx...)
}

// queueHeaderSize is the most bytes appendQueueHeader writes for a context of reqCtx bytes.
func queueHeaderSize(magic []byte, fields int, reqCtx []byte) int {
	return queueHeaderBytes(magic, fields, len(reqCtx))
}

// queueContextRoom is the request context a payload made for the queue leaves room for before
// it: client metadata larger than that costs a copy of the payload when the item is framed.
const queueContextRoom = 512

// queueItemRoom is the room a payload made for the queue leaves before it for the item's header
// (the fixed fields and a request context of up to queueContextRoom bytes), so that
// frameQueueItem frames it in place.
func queueItemRoom(magic []byte, fields int) int {
	return queueHeaderBytes(magic, fields, queueContextRoom)
}

func queueHeaderBytes(magic []byte, fields, contextBytes int) int {
	return len(magic) + 2 + (fields+1)*binary.MaxVarintLen64 + contextBytes
}

// frameQueueItem makes the item of header and body, body being the end of frame: in place, in the
// room before body and the capacity after it, when they suffice (no copy of the body), else in a
// new buffer.
func frameQueueItem(frame, body, header []byte) []byte {
	var item []byte
	if room := len(frame) - len(body); room >= len(header) && cap(frame)-len(frame) >= queueItemTrailer {
		item = frame[room-len(header):]
		copy(item, header)
	} else {
		item = make([]byte, 0, len(header)+len(body)+queueItemTrailer)
		item = append(append(item, header...), body...)
	}
	return appendQueueChecksum(item)
}

// appendQueueChecksum ends an item (header and payload) with its checksum.
func appendQueueChecksum(item []byte) []byte {
	return binary.LittleEndian.AppendUint32(item, crc32.Checksum(item, crc32c))
}

// readQueueItem checks an item of the format magic and version (its length, checksum and
// version) and returns its flag, its request context and its payload; fields receives the
// signal's counts. The payload is a slice of data, not a copy.
func readQueueItem(data, magic []byte, version byte, fields []uint64) (byte, context.Context, []byte, error) {
	ctx := context.Background()
	if len(data) < len(magic)+2+len(fields)+1+queueItemTrailer {
		return 0, ctx, nil, fmt.Errorf("%d bytes is too short", len(data))
	}
	content, sum := data[:len(data)-queueItemTrailer], binary.LittleEndian.Uint32(data[len(data)-queueItemTrailer:])
	if crc32.Checksum(content, crc32c) != sum {
		return 0, ctx, nil, errors.New("checksum mismatch")
	}
	rest := content[len(magic):]
	if rest[0] != version {
		return 0, ctx, nil, fmt.Errorf("format version %d; this release reads version %d (a queue written by a newer release?)", rest[0], version)
	}
	flag := rest[1]
	rest = rest[2:]
	for i := range fields {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return 0, ctx, nil, errors.New("bad header")
		}
		fields[i], rest = v, rest[n:]
	}
	ctxLen, n := binary.Uvarint(rest)
	if n <= 0 || ctxLen > uint64(len(rest)-n) {
		return 0, ctx, nil, errors.New("bad header")
	}
	rest = rest[n:]
	reqCtx, _, err := pdatareq.UnmarshalTraces(rest[:ctxLen])
	if err != nil {
		return 0, ctx, nil, fmt.Errorf("request context: %w", err)
	}
	return flag, reqCtx, rest[ctxLen:], nil
}

// isQueueItem says whether data is an item of the format magic (else it was stored by
// exporterhelper's own encoding).
func isQueueItem(data, magic []byte) bool { return bytes.HasPrefix(data, magic) }

// logUnreadableQueueItem reports at error level an item of the persistent queue (what: "a span
// batch", "a score batch") that cannot be read, when the queue reads it or when its payload is
// decoded: either way it cannot be sent and is dropped (the persistent queue itself logs that only
// at debug level). It is a local failure, kept apart from the platform's refusals.
func logUnreadableQueueItem(logger *zap.Logger, what string, err error, fields ...zap.Field) {
	if logger == nil {
		return
	}
	logger.Error("svc exporter: "+what+" in the persistent queue cannot be read; it is dropped",
		append(fields, zap.Error(err))...)
}
