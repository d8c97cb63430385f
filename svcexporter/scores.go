package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/scorerecord"
)

// pushScores sends the score records of ld as the exporter sends them through its queue: made
// into a request, then sent (the consume function of a plog exporter, as pushTraces is).
func (e *svcExporter) pushScores(ctx context.Context, ld plog.Logs) error {
	return e.sendScoreBatch(ctx, e.newScoresRequest(ctx, ld))
}

// pushScoresRequest is the exporterhelper's consume function of scores.
func (e *svcExporter) pushScoresRequest(ctx context.Context, req xexporterhelper.Request) error {
	r, ok := req.(*scoresRequest)
	if !ok {
		return consumererror.NewPermanent(fmt.Errorf("svc exporter: cannot send a %T as scores", req))
	}
	return e.sendScoreBatch(ctx, r)
}

// sendScoreBatch sends the scores of r (the valid ones of a push: docs/contract.md §10) to
// POST {endpoint}/api/public/scores in requests of at most scorerecord.MaxBatchSize. When a
// request fails with a retryable error, the scores from that request on come back to the
// exporterhelper's retry (scoresRetryError), so an accepted request is never sent twice by this
// exporter; a resent one is deduplicated by the platform through the score ids.
func (e *svcExporter) sendScoreBatch(ctx context.Context, r *scoresRequest) error {
	if r.ItemsCount() == 0 {
		return nil
	}
	// Credentials first: without them nothing of the push can go.
	creds, err := e.credentialsFor(ctx, r.ItemsCount(), "scores", e.telemetry.ExporterSvcSendFailedScores)
	if err != nil {
		return err
	}
	n := r.count()
	if n == 0 {
		return nil
	}

	res := deliver(n, evenChunks(n, scorerecord.MaxBatchSize), func(rg itemRange) error {
		return e.sendScores(ctx, creds, r.arrayJSON(rg.lo, rg.hi), rg.len())
	}, isTooLarge, nil)
	if res.splits > 0 {
		e.telemetry.ExporterSvcRequestsSplit.Add(ctx, int64(res.splits))
	}
	if len(res.refusedAlone) > 0 {
		e.telemetry.ExporterSvcScoresDroppedTooLarge.Add(ctx, int64(len(res.refusedAlone)))
		for _, it := range res.refusedAlone {
			id, name := r.idAndName(it.index)
			e.logger.Error("svc platform refused a score as too large even on its own; the score is dropped, the rest of its batch is delivered",
				zap.String("score_id", id),
				zap.String("score_name", name),
				zap.Error(it.err))
		}
	}

	return e.outcome(ctx, res, n, "scores", e.telemetry.ExporterSvcSentScores, e.telemetry.ExporterSvcSendFailedScores, func(err error, from int) error {
		if from == 0 && r.dropped == 0 {
			return err // the retry resends r as it is
		}
		// Only the scores not sent yet go back to the retry, encoded, with their ids.
		return &scoresRetryError{err: err, rest: r.from(from)}
	})
}

// readScores returns the valid score requests of ld. Invalid records are logged at error level
// and dropped. A score without an id gets a deterministic one, so that a resent request replaces
// its scores at the platform instead of duplicating them.
func (e *svcExporter) readScores(ctx context.Context, ld plog.Logs) []scorerecord.Request {
	n := ld.LogRecordCount()
	reqs := make([]scorerecord.Request, 0, n)
	invalid := 0
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				req := scorerecord.Read(lr)
				if err := req.Validate(); err != nil {
					invalid++
					e.logger.Error("Dropping an invalid score record",
						zap.Error(err),
						zap.String("score_id", req.ID),
						zap.String("score_name", req.Name),
						zap.String("event_name", lr.EventName()),
						zap.String("trace_id", req.TraceID),
						zap.String("observation_id", req.ObservationID))
					continue
				}
				if req.ID == "" {
					req.ID = req.ContentID()
				}
				e.dropNonFiniteMetadata(&req)
				reqs = append(reqs, req)
			}
		}
	}
	if invalid > 0 {
		e.telemetry.ExporterSvcScoresDroppedInvalid.Add(ctx, int64(invalid))
	}
	return reqs
}

// dropNonFiniteMetadata removes the metadata entries holding a NaN or an infinity, which JSON
// cannot carry: left in, they would make the whole request fail to encode.
func (e *svcExporter) dropNonFiniteMetadata(req *scorerecord.Request) {
	for key, value := range req.Metadata {
		if finiteJSON(value) {
			continue
		}
		delete(req.Metadata, key)
		e.logger.Warn("Dropping a score metadata value that JSON cannot carry (NaN or infinity); the score is sent without it",
			zap.String("score_id", req.ID), zap.String("score_name", req.Name), zap.String("metadata_key", key))
	}
}

func finiteJSON(v any) bool {
	switch x := v.(type) {
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case map[string]any:
		for _, item := range x {
			if !finiteJSON(item) {
				return false
			}
		}
	case []any:
		for _, item := range x {
			if !finiteJSON(item) {
				return false
			}
		}
	}
	return true
}

// partialResult is the body of a 207 answer: the scores the platform accepted and rejected,
// and its errors (kept as sent, to be logged as the server wrote them).
type partialResult struct {
	Accepted *int              `json:"accepted"`
	Rejected *int              `json:"rejected"`
	Errors   []json.RawMessage `json:"errors"`
}

// sendScores posts body, the JSON array of count scores.
func (e *svcExporter) sendScores(ctx context.Context, c requestCredentials, body []byte, count int) error {
	resp, err := e.post(ctx, c, e.plainClient, e.scoresURL, contentTypeJSON, "", body, false)
	if err != nil {
		return err
	}
	if resp.code != http.StatusMultiStatus {
		e.telemetry.ExporterSvcScoresAccepted.Add(ctx, int64(count))
		return nil
	}

	// 207: part of the batch is rejected; the rejected scores are not retried (docs/contract.md §11).
	var result partialResult
	if err := json.Unmarshal(resp.body, &result); err != nil {
		e.logger.Warn(fmt.Sprintf("svc rejected some of %d scores in batch: the response body is unreadable", count),
			zap.Error(err), zap.String("body", e.serverMessage(c, "text/plain", resp.body)))
		return nil
	}
	rejected := len(result.Errors)
	if result.Rejected != nil {
		rejected = *result.Rejected
	}
	accepted := count - rejected
	if result.Accepted != nil {
		accepted = *result.Accepted
	}
	e.telemetry.ExporterSvcScoresAccepted.Add(ctx, int64(max(accepted, 0)))
	e.telemetry.ExporterSvcScoresRejected.Add(ctx, int64(max(rejected, 0)))
	errorsJSON, _ := json.Marshal(result.Errors) // raw messages: cannot fail
	if result.Errors == nil {
		errorsJSON = []byte("[]")
	}
	e.logger.Warn("svc rejected "+strconv.Itoa(rejected)+" of "+strconv.Itoa(count)+" scores in batch: "+c.redact(string(errorsJSON)),
		zap.Int("accepted", accepted),
		zap.Int("rejected", rejected),
		zap.Int("batch_size", count),
		zap.String("public_key", c.publicKey))
	return nil
}
