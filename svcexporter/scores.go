package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/scorerecord"
)

// recordRef locates one log record in a plog.Logs.
type recordRef struct{ resource, scope, record int }

// pushScores maps the score records of ld onto CreateScoreRequests, drops the invalid ones
// (docs/contract.md §10) and sends the rest to POST {endpoint}/api/public/scores in requests of at most
// scorerecord.MaxBatchSize. When a request fails with a retryable error, the records from that
// request on come back to the exporterhelper's retry (consumererror.Logs), so an accepted
// request is never sent twice by this exporter; a resent one is deduplicated by the platform
// through the score ids.
func (e *svcExporter) pushScores(ctx context.Context, ld plog.Logs) error {
	if ld.LogRecordCount() == 0 {
		return nil
	}
	// Credentials first: without them nothing of the push can go, valid or not.
	creds, err := e.credentialsFor(ctx, ld.LogRecordCount(), "scores", e.telemetry.ExporterSvcSendFailedScores)
	if err != nil {
		return err
	}
	reqs, refs := e.readScores(ctx, ld)
	dropped := ld.LogRecordCount() - len(reqs)
	if len(reqs) == 0 {
		return nil
	}

	res := deliver(len(reqs), evenChunks(len(reqs), scorerecord.MaxBatchSize), func(r itemRange) error {
		return e.sendScores(ctx, creds, reqs[r.lo:r.hi])
	})
	if res.splits > 0 {
		e.telemetry.ExporterSvcRequestsSplit.Add(ctx, int64(res.splits))
	}
	if len(res.tooLarge) > 0 {
		e.telemetry.ExporterSvcScoresDroppedTooLarge.Add(ctx, int64(len(res.tooLarge)))
		for _, it := range res.tooLarge {
			e.logger.Error("svc platform refused a score as too large even on its own; the score is dropped, the rest of its batch is delivered",
				zap.String("score_id", reqs[it.index].ID),
				zap.String("score_name", reqs[it.index].Name),
				zap.Error(it.err))
		}
	}

	return e.outcome(ctx, res, len(reqs), "scores", e.telemetry.ExporterSvcSentScores, e.telemetry.ExporterSvcSendFailedScores, func(err error, from int) error {
		if from == 0 && dropped == 0 {
			return err // the retry resends ld as it is
		}
		// Only the valid records not sent yet go back to the retry, with their ids.
		return consumererror.NewLogs(err, logsOf(ld, refs[from:], reqs[from:]))
	})
}

// readScores returns the valid score requests of ld with the place of each record. Invalid
// records are logged at error level and dropped. A score without an id gets a deterministic one,
// so that a resent request replaces its scores at the platform instead of duplicating them.
func (e *svcExporter) readScores(ctx context.Context, ld plog.Logs) ([]scorerecord.Request, []recordRef) {
	n := ld.LogRecordCount()
	reqs := make([]scorerecord.Request, 0, n)
	refs := make([]recordRef, 0, n)
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
				refs = append(refs, recordRef{i, j, k})
			}
		}
	}
	if invalid > 0 {
		e.telemetry.ExporterSvcScoresDroppedInvalid.Add(ctx, int64(invalid))
	}
	return reqs, refs
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

func (e *svcExporter) sendScores(ctx context.Context, c requestCredentials, batch []scorerecord.Request) error {
	body, err := json.Marshal(batch)
	if err != nil {
		return consumererror.NewPermanent(fmt.Errorf("encoding scores as JSON: %w", err))
	}
	resp, err := e.post(ctx, c, e.plainClient, e.scoresURL, contentTypeJSON, "", body)
	if err != nil {
		return err
	}
	if resp.code != http.StatusMultiStatus {
		e.telemetry.ExporterSvcScoresAccepted.Add(ctx, int64(len(batch)))
		return nil
	}

	// 207: part of the batch is rejected; the rejected scores are not retried (docs/contract.md §11).
	var result partialResult
	if err := json.Unmarshal(resp.body, &result); err != nil {
		e.logger.Warn(fmt.Sprintf("svc rejected some of %d scores in batch: the response body is unreadable", len(batch)),
			zap.Error(err), zap.String("body", e.serverMessage(c, "text/plain", resp.body)))
		return nil
	}
	rejected := len(result.Errors)
	if result.Rejected != nil {
		rejected = *result.Rejected
	}
	accepted := len(batch) - rejected
	if result.Accepted != nil {
		accepted = *result.Accepted
	}
	e.telemetry.ExporterSvcScoresAccepted.Add(ctx, int64(max(accepted, 0)))
	e.telemetry.ExporterSvcScoresRejected.Add(ctx, int64(max(rejected, 0)))
	errorsJSON, _ := json.Marshal(result.Errors) // raw messages: cannot fail
	if result.Errors == nil {
		errorsJSON = []byte("[]")
	}
	e.logger.Warn("svc rejected "+strconv.Itoa(rejected)+" of "+strconv.Itoa(len(batch))+" scores in batch: "+c.redact(string(errorsJSON)),
		zap.Int("accepted", accepted),
		zap.Int("rejected", rejected),
		zap.Int("batch_size", len(batch)),
		zap.String("public_key", c.publicKey))
	return nil
}

// logsOf copies the records refs points at (in order) into a new plog.Logs, each under a copy
// of its own resource and scope, and writes into each the id of its request in reqs, so that a
// retry sends the very ids this attempt sent.
func logsOf(ld plog.Logs, refs []recordRef, reqs []scorerecord.Request) plog.Logs {
	out := plog.NewLogs()
	var rl plog.ResourceLogs
	var sl plog.ScopeLogs
	last := recordRef{-1, -1, -1}
	for i, r := range refs {
		src := ld.ResourceLogs().At(r.resource)
		if r.resource != last.resource {
			rl = out.ResourceLogs().AppendEmpty()
			src.Resource().CopyTo(rl.Resource())
			rl.SetSchemaUrl(src.SchemaUrl())
			last.scope = -1
		}
		srcScope := src.ScopeLogs().At(r.scope)
		if r.scope != last.scope {
			sl = rl.ScopeLogs().AppendEmpty()
			srcScope.Scope().CopyTo(sl.Scope())
			sl.SetSchemaUrl(srcScope.SchemaUrl())
		}
		lr := sl.LogRecords().AppendEmpty()
		srcScope.LogRecords().At(r.record).CopyTo(lr)
		lr.Attributes().PutStr(scorerecord.AttrID, reqs[i].ID)
		last = r
	}
	return out
}
