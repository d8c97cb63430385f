package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"
)

// scoresRequest is the exporterhelper request of the scores of one push: each valid score
// encoded once as the JSON it is sent as, made from the pipeline's score records in the
// pipeline's goroutine (newScoresRequest), before the queue. Neither the queue (scores_queue.go)
// nor the send parses or re-encodes them: a request to the platform is the JSON array of up to
// scorerecord.MaxBatchSize of them, cut out of body.
type scoresRequest struct {
	// body is the JSON of each score followed by a comma: "s0,s1,...,sN-1,".
	body []byte
	// ends[i] is the offset in body just past the comma after score i.
	ends []int
	// frame is the buffer body was made in (newScoresRequest): body is its end, the bytes before
	// it are free for the queue item's header; nil otherwise.
	frame []byte
	// dropped counts the records of the push dropped (logged and counted) when the request was
	// made, as invalid or not encodable: they stay among its items, as exporterhelper's own logs
	// request counted every record, so that the queue's and exporterhelper's counts mean what
	// they meant.
	dropped int
	// size is what the bytes sizer counts: the size of the records' OTLP protobuf, as
	// exporterhelper's logs request counted it (so that a queue bounded in bytes holds what it
	// held before), computed once when the request is made and kept in the queue item. A part of
	// a request (a split, the rest of a retry) counts the part of it its scores' JSON takes.
	size int
}

var (
	_ xexporterhelper.Request             = (*scoresRequest)(nil)
	_ xexporterhelper.RequestErrorHandler = (*scoresRequest)(nil)
)

// newScoresRequest reads the score records of ld (readScores: invalid ones logged, counted and
// dropped, ids given, non-finite metadata dropped) and encodes each valid score.
func (e *svcExporter) newScoresRequest(ctx context.Context, ld plog.Logs) *scoresRequest {
	records := ld.LogRecordCount()
	reqs := e.readScores(ctx, ld)
	r := &scoresRequest{ends: make([]int, 0, len(reqs)), dropped: records - len(reqs)}
	buf := scoresBuffers.Get().(*bytes.Buffer)
	defer putScoresBuffer(buf)
	buf.Reset()
	enc := json.NewEncoder(buf) // encodes as json.Marshal does, with a newline after each
	for i := range reqs {
		if err := enc.Encode(&reqs[i]); err != nil { // Encode writes nothing then
			r.dropped++
			e.telemetry.ExporterSvcSendFailedScores.Add(ctx, 1, e.failedPermanent)
			e.logger.Error("svc exporter cannot encode a score as JSON; it is dropped",
				zap.String("score_id", reqs[i].ID), zap.String("score_name", reqs[i].Name), zap.Error(err))
			continue
		}
		buf.Bytes()[buf.Len()-1] = ','
		r.ends = append(r.ends, buf.Len())
	}
	// The scores are kept in a buffer of their size, with room for the persistent queue to frame
	// them as its item without a copy (scoresQueueEncoding.Marshal).
	room := scoresItemRoom(len(r.ends))
	r.frame = make([]byte, room+buf.Len(), room+buf.Len()+queueItemTrailer)
	copy(r.frame[room:], buf.Bytes())
	r.body = r.frame[room:]
	r.size = logsMarshaler.LogsSize(ld)
	return r
}

// scoresBuffers are the buffers scores are encoded in, of the largest push of late.
var scoresBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func putScoresBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= 16<<20 { // a buffer of an unusual push is left to the GC
		scoresBuffers.Put(buf)
	}
}

var logsMarshaler = &plog.ProtoMarshaler{}

// scoresRequestFromLogs is the converter of the exporterhelper.
func (e *svcExporter) scoresRequestFromLogs(ctx context.Context, ld plog.Logs) (xexporterhelper.Request, error) {
	return e.newScoresRequest(ctx, ld), nil
}

// count is the number of scores to send.
func (r *scoresRequest) count() int { return len(r.ends) }

// ItemsCount counts the score records the request was made of, as exporterhelper's logs request did.
func (r *scoresRequest) ItemsCount() int { return r.count() + r.dropped }

// BytesSize is what the bytes sizer counts (see size).
func (r *scoresRequest) BytesSize() int { return r.size }

func (r *scoresRequest) start(i int) int {
	if i == 0 {
		return 0
	}
	return r.ends[i-1]
}

// score is the JSON of score i.
func (r *scoresRequest) score(i int) []byte { return r.body[r.start(i) : r.ends[i]-1] }

// arrayJSON is the body of a request to the platform carrying scores [lo, hi): their JSON array,
// the very bytes json.Marshal makes of them.
func (r *scoresRequest) arrayJSON(lo, hi int) []byte {
	scores := r.body[r.start(lo) : r.ends[hi-1]-1]
	out := make([]byte, 0, len(scores)+2)
	out = append(out, '[')
	out = append(out, scores...)
	return append(out, ']')
}

// idAndName reads the id and name of score i, for the log of a score the platform refused.
func (r *scoresRequest) idAndName(i int) (id, name string) {
	var s struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	_ = json.Unmarshal(r.score(i), &s) // encoded by newScoresRequest: cannot fail
	return s.ID, s.Name
}

// bytesOf is the part of r's size that scores [lo, hi) take: in proportion to their JSON.
func (r *scoresRequest) bytesOf(lo, hi int) int {
	if hi <= lo {
		return 0
	}
	return int(int64(r.size) * int64(r.ends[hi-1]-r.start(lo)) / int64(len(r.body)))
}

// from is a request of the scores from i on (none dropped: they were counted with this one).
func (r *scoresRequest) from(i int) *scoresRequest {
	offset := r.start(i)
	ends := make([]int, 0, r.count()-i)
	for _, end := range r.ends[i:] {
		ends = append(ends, end-offset)
	}
	return &scoresRequest{body: r.body[offset:], ends: ends, size: r.bytesOf(i, r.count())}
}

// scoresRetryError hands the retry the scores of a push not delivered yet, as consumererror.Logs
// does for exporterhelper's own logs request: those of the request that failed with a retryable
// error and after it. They keep the ids sent: they are encoded.
type scoresRetryError struct {
	err  error
	rest *scoresRequest
}

func (e *scoresRetryError) Error() string { return e.err.Error() }
func (e *scoresRetryError) Unwrap() error { return e.err }

// OnError hands the retry only the scores an error says are still to be sent.
func (r *scoresRequest) OnError(err error) xexporterhelper.Request {
	if re, ok := errors.AsType[*scoresRetryError](err); ok {
		return re.rest
	}
	return r
}

// MergeSplit merges and splits score requests for the exporterhelper's batcher
// (sending_queue.batch) by the items sizer (records) or the bytes sizer (size), as
// exporterhelper's logs request does; scores are moved as they are encoded, never parsed. A
// score larger than max_size alone is dropped, with an error, as exporterhelper drops such a
// record.
func (r *scoresRequest) MergeSplit(_ context.Context, maxSize int, szt exporterhelper.RequestSizerType, other xexporterhelper.Request) ([]xexporterhelper.Request, error) {
	switch szt {
	case exporterhelper.RequestSizerTypeItems, exporterhelper.RequestSizerTypeBytes:
	default:
		return nil, errors.New("unknown sizer type")
	}
	if other != nil {
		o, ok := other.(*scoresRequest)
		if !ok {
			return nil, errors.New("invalid input type")
		}
		r.merge(o)
	}
	size := r.size
	if szt == exporterhelper.RequestSizerTypeItems {
		size = r.ItemsCount()
	}
	if maxSize == 0 || size <= maxSize {
		return []xexporterhelper.Request{r}, nil
	}
	return r.split(maxSize, szt == exporterhelper.RequestSizerTypeItems)
}

// merge appends the scores of o to r's (in a new body: r's may be the queue's buffer).
func (r *scoresRequest) merge(o *scoresRequest) {
	body := make([]byte, 0, len(r.body)+len(o.body))
	body = append(append(body, r.body...), o.body...)
	ends := make([]int, 0, r.count()+o.count())
	ends = append(ends, r.ends...)
	for _, end := range o.ends {
		ends = append(ends, len(r.body)+end)
	}
	r.body, r.ends, r.frame = body, ends, nil
	r.dropped += o.dropped
	r.size += o.size
}

// split cuts r into requests of at most maxSize items (byItems) or bytes, in order. The records
// dropped when r was made weigh one item each and no bytes, and go first.
func (r *scoresRequest) split(maxSize int, byItems bool) ([]xexporterhelper.Request, error) {
	var res []xexporterhelper.Request
	cur, curSize := &scoresRequest{}, 0
	flush := func() {
		if cur.ItemsCount() > 0 {
			res = append(res, cur)
		}
		cur, curSize = &scoresRequest{}, 0
	}
	if byItems {
		for range r.dropped {
			if curSize+1 > maxSize {
				flush()
			}
			cur.dropped++
			curSize++
		}
	} else {
		cur.dropped = r.dropped
	}
	tooLarge := 0
	for i := range r.count() {
		bytes := r.bytesOf(i, i+1)
		size := bytes
		if byItems {
			size = 1
		}
		if size > maxSize {
			tooLarge++
			continue
		}
		if curSize+size > maxSize {
			flush()
		}
		cur.body = append(cur.body, r.body[r.start(i):r.ends[i]]...)
		cur.ends = append(cur.ends, len(cur.body))
		cur.size += bytes
		curSize += size
	}
	flush()
	if tooLarge > 0 {
		return res, fmt.Errorf("single score exceeds the max size limit, dropping items: %d", tooLarge)
	}
	return res, nil
}
