package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"
	pdatareq "go.opentelemetry.io/collector/pdata/xpdata/request"
	"go.uber.org/zap"
)

// The scores of a push are stored in the queue (sending_queue.storage) as they are sent: the JSON
// of each score, encoded once before the queue (scoresRequest). The item is framed as
// queue_item.go says, with
//
//	magic         0x00 "svcs"
//	version       1
//	flag          0
//	fields        score count, the count of the push's records dropped before the queue
//	              (invalid: they count among the request's items), and the size the bytes
//	              sizer counts (the records' protobuf)
//	payload       the length of each score's JSON and its comma, uvarints, then the JSON of
//	              each score followed by a comma
//
// Items stored by exporterhelper's own logs encoding (the releases before: an xpdata LogsRequest,
// or a plain OTLP LogsData) are still read, by its format (see scoresQueueEncoding.Unmarshal).
var scoresQueueMagic = []byte{0x00, 's', 'v', 'c', 's'}

const scoresQueueVersion = 1

// errCorruptQueuedScores is wrapped by every error of an item the queue cannot read; the
// persistent queue drops such an item.
var errCorruptQueuedScores = errors.New("svc exporter: a score batch in the persistent queue is unreadable")

// scoresQueueEncoding is the persistent queue's encoding of scores.
type scoresQueueEncoding struct {
	// exp reads the score records of items queued by a release before this one, and logs
	// unreadable items at error level.
	exp *svcExporter
}

// Marshal frames the encoded scores of req with its context; nothing is encoded here. The scores
// of a request made from score records (newScoresRequest) get the header written in the room
// before them and the checksum after them, in place: the item is not a copy.
func (enc scoresQueueEncoding) Marshal(ctx context.Context, req xexporterhelper.Request) ([]byte, error) {
	r, ok := req.(*scoresRequest)
	if !ok {
		return nil, fmt.Errorf("svc exporter: cannot queue a %T as scores", req)
	}
	reqCtx, err := marshalRequestContext(ctx)
	if err != nil {
		return nil, err
	}
	n := r.count()
	header := make([]byte, 0, queueHeaderSize(scoresQueueMagic, 3, reqCtx)+n*binary.MaxVarintLen32)
	header = appendQueueHeader(header, scoresQueueMagic, scoresQueueVersion, 0, reqCtx, uint64(n), uint64(r.dropped), uint64(r.size))
	for i := range n {
		header = binary.AppendUvarint(header, uint64(r.ends[i]-r.start(i)))
	}
	return frameQueueItem(r.frame, r.body, header), nil
}

// scoresItemRoom is the room newScoresRequest leaves before n scores for the queue item's header:
// queueItemRoom and the length of each score.
func scoresItemRoom(n int) int {
	return queueItemRoom(scoresQueueMagic, 3) + n*binary.MaxVarintLen32
}

// Unmarshal reads a stored item. Items of this exporter come back as their scores' JSON, not
// parsed; items stored by exporterhelper's own encoding (before the upgrade) are decoded as it
// does and their records read and encoded as newScoresRequest does.
func (enc scoresQueueEncoding) Unmarshal(data []byte) (context.Context, xexporterhelper.Request, error) {
	ctx, req, err := enc.unmarshal(data)
	if err != nil {
		logUnreadableQueueItem(enc.exp.logger, "a score batch", err, zap.Int("bytes", len(data)))
	}
	return ctx, req, err
}

func (enc scoresQueueEncoding) unmarshal(data []byte) (context.Context, xexporterhelper.Request, error) {
	if !isQueueItem(data, scoresQueueMagic) {
		return enc.unmarshalStock(data)
	}
	var fields [3]uint64
	_, ctx, payload, err := readQueueItem(data, scoresQueueMagic, scoresQueueVersion, fields[:])
	if err != nil {
		return ctx, nil, fmt.Errorf("%w: %w", errCorruptQueuedScores, err)
	}
	count, dropped, size := fields[0], fields[1], fields[2]
	// Every score takes at least one byte of length and three of JSON ("{},").
	if count > uint64(len(payload))/4 || dropped > 1<<31 || size > 1<<40 {
		return ctx, nil, fmt.Errorf("%w: bad header", errCorruptQueuedScores)
	}
	ends := make([]int, int(count))
	end := 0
	for i := range ends {
		length, n := binary.Uvarint(payload)
		if n <= 0 || length < 2 || length > uint64(len(payload)) {
			return ctx, nil, fmt.Errorf("%w: bad score length", errCorruptQueuedScores)
		}
		payload = payload[n:]
		end += int(length)
		ends[i] = end
	}
	if end != len(payload) {
		return ctx, nil, fmt.Errorf("%w: the scores take %d bytes where the item holds %d", errCorruptQueuedScores, end, len(payload))
	}
	for _, e := range ends {
		if payload[e-1] != ',' {
			return ctx, nil, fmt.Errorf("%w: bad score framing", errCorruptQueuedScores)
		}
	}
	return ctx, &scoresRequest{body: payload, ends: ends, dropped: int(dropped), size: int(size)}, nil
}

// unmarshalStock reads what exporterhelper v0.164's logs encoding stored: the xpdata request
// format with its context, or (older releases) a plain OTLP protobuf without one. The request
// made of it has the size exporterhelper counted when it queued the item, so that the queue's
// size stays right.
func (enc scoresQueueEncoding) unmarshalStock(data []byte) (context.Context, xexporterhelper.Request, error) {
	ctx, ld, err := pdatareq.UnmarshalLogs(data)
	if errors.Is(err, pdatareq.ErrInvalidFormat) {
		ld, err = (&plog.ProtoUnmarshaler{}).UnmarshalLogs(data)
	}
	if err != nil {
		return ctx, nil, fmt.Errorf("%w: %w", errCorruptQueuedScores, err)
	}
	return ctx, enc.exp.newScoresRequest(ctx, ld), nil
}
