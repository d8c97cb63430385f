package svcexporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap/zapcore"

	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/svcexporter/internal/metadatatest"
)

var scoreTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// makeScores builds n valid score records with ids score-0 … score-(n-1), spread over two
// resources.
func makeScores(n int) plog.Logs {
	ld := plog.NewLogs()
	var lrs plog.LogRecordSlice
	for i := 0; i < n; i++ {
		if i == 0 || i == n/2 {
			rl := ld.ResourceLogs().AppendEmpty()
			rl.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", ld.ResourceLogs().Len()))
			lrs = rl.ScopeLogs().AppendEmpty().LogRecords()
		}
		scorerecord.Write(lrs.AppendEmpty(), scorerecord.Score{
			ID:            fmt.Sprintf("score-%d", i),
			TraceID:       testTraceID(i + 1),
			ObservationID: testSpanID(i + 1),
			Name:          "quality",
			Value:         pcommon.NewValueDouble(float64(i) / 10),
			Timestamp:     pcommon.NewTimestampFromTime(scoreTime),
		})
	}
	return ld
}

// scoreIDs reads the ids of the score records of ld.
func scoreIDs(ld plog.Logs) []string {
	var ids []string
	for i := 0; i < ld.ResourceLogs().Len(); i++ {
		sls := ld.ResourceLogs().At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			for k := 0; k < sls.At(j).LogRecords().Len(); k++ {
				ids = append(ids, scorerecord.Read(sls.At(j).LogRecords().At(k)).ID)
			}
		}
	}
	return ids
}

// batches decodes the JSON array bodies of the score requests the platform received.
func batches(t *testing.T, p *fakePlatform) [][]map[string]any {
	t.Helper()
	var out [][]map[string]any
	for _, r := range p.received(scoresPath) {
		var batch []map[string]any
		require.NoError(t, json.Unmarshal(r.body, &batch), "body is a JSON array: %s", r.body)
		out = append(out, batch)
	}
	return out
}

func TestScoresAreSentInBatchesOfAtMost100(t *testing.T) {
	clearCompressionEnv(t)
	tests := []struct {
		scores    int
		wantSizes []int
	}{
		{scores: 0, wantSizes: nil},
		{scores: 1, wantSizes: []int{1}},
		{scores: 100, wantSizes: []int{100}},
		{scores: 101, wantSizes: []int{100, 1}},
		{scores: 250, wantSizes: []int{100, 100, 50}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.scores), func(t *testing.T) {
			p := newFakePlatform(t)
			env := newTestEnv(t)
			exp := startExporter(t, env, testConfig(p.srv.URL))
			require.NoError(t, exp.pushScores(context.Background(), makeScores(tt.scores)))

			var sizes []int
			seen := map[string]int{}
			for _, b := range batches(t, p) {
				sizes = append(sizes, len(b))
				for _, s := range b {
					seen[s["id"].(string)]++
				}
			}
			assert.Equal(t, tt.wantSizes, sizes)
			assert.Len(t, seen, tt.scores)
			for id, n := range seen {
				assert.Equal(t, 1, n, id)
			}
			if tt.scores > 0 {
				metadatatest.AssertEqualExporterSvcScoresAccepted(t, env.telemetry,
					[]metricdata.DataPoint[int64]{{Value: int64(tt.scores)}}, metricdatatest.IgnoreTimestamp())
			}
		})
	}
}

func TestScoresRequest(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	exp := startExporter(t, newTestEnv(t), testConfig(p.srv.URL))

	ld := plog.NewLogs()
	md := pcommon.NewMap()
	md.PutStr("model", "gpt-x")
	md.PutInt("attempt", 2)
	scorerecord.Write(ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty(), scorerecord.Score{
		ID:            "score-full",
		TraceID:       testTraceID(0xabc),
		ObservationID: testSpanID(0xdef),
		Name:          "relevance",
		Value:         pcommon.NewValueStr("high"),
		Comment:       "judged by rubric v2",
		ConfigID:      "cfg-1",
		Environment:   "production",
		Metadata:      md,
		Timestamp:     pcommon.NewTimestampFromTime(scoreTime),
	})
	require.NoError(t, exp.pushScores(context.Background(), ld))

	reqs := p.received(scoresPath)
	require.Len(t, reqs, 1)
	assert.Equal(t, "application/json", reqs[0].header.Get("Content-Type"))
	assert.Equal(t, testPublicKey, reqs[0].header.Get("X-Svc-Public-Key"))
	// The gateway is no SDK: it names itself in User-Agent only; scores have no write path.
	assert.Empty(t, reqs[0].header.Values("X-Svc-Sdk-Name"))
	assert.Empty(t, reqs[0].header.Values("X-Svc-Sdk-Version"))
	assert.Empty(t, reqs[0].header.Values("X-Svc-Ingestion-Version"))
	assert.True(t, strings.HasPrefix(reqs[0].header.Get("User-Agent"), "svc-otelcol/"+testVersion+" "))
	assert.True(t, strings.HasPrefix(reqs[0].header.Get("Authorization"), "Basic "))
	assert.False(t, reqs[0].gzipped)
	assert.JSONEq(t, `[{
		"id": "score-full",
		"traceId": "00000000000000000000000000000abc",
		"observationId": "0000000000000def",
		"name": "relevance",
		"value": "high",
		"dataType": "CATEGORICAL",
		"comment": "judged by rubric v2",
		"configId": "cfg-1",
		"environment": "production",
		"metadata": {"model": "gpt-x", "attempt": 2},
		"timestamp": "2026-03-01T12:00:00Z"
	}]`, string(reqs[0].body))
}

func TestScores207LogsRejectionsAndDoesNotRetry(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	const answer = `{"accepted":1,"rejected":2,"errors":[` +
		`{"index":0,"id":"score-0","message":"a score must name what it scores"},` +
		`{"index":2,"id":"score-2","message":"dataType BOOLEAN needs the value 0 or 1"}]}`
	p.setScores(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMultiStatus)
		_, _ = w.Write([]byte(answer))
	})
	env := newTestEnv(t)
	exp := startExporter(t, env, testConfig(p.srv.URL))
	require.NoError(t, exp.pushScores(context.Background(), makeScores(3)), "a 207 is a success: rejected scores are not retried")
	assert.Len(t, p.received(scoresPath), 1)

	warnings := env.logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warnings, 1)
	assert.Equal(t,
		`svc rejected 2 of 3 scores in batch: [{"index":0,"id":"score-0","message":"a score must name what it scores"},{"index":2,"id":"score-2","message":"dataType BOOLEAN needs the value 0 or 1"}]`,
		warnings[0].Message)
	metadatatest.AssertEqualExporterSvcScoresRejected(t, env.telemetry,
		[]metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualExporterSvcScoresAccepted(t, env.telemetry,
		[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
}

func TestScores207WithoutCounts(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	p.setScores(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.WriteHeader(http.StatusMultiStatus)
		_, _ = w.Write([]byte(`{"errors":[{"index":1,"message":"bad"}]}`))
	})
	env := newTestEnv(t)
	exp := startExporter(t, env, testConfig(p.srv.URL))
	require.NoError(t, exp.pushScores(context.Background(), makeScores(4)))
	warnings := env.logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warnings, 1)
	assert.Equal(t, `svc rejected 1 of 4 scores in batch: [{"index":1,"message":"bad"}]`, warnings[0].Message)
}

func TestScoresResponses(t *testing.T) {
	clearCompressionEnv(t)
	for _, tt := range statusCases() {
		t.Run(tt.name, func(t *testing.T) {
			p := newFakePlatform(t)
			p.setScores(statusHandler(tt))
			exp := startExporter(t, newTestEnv(t), testConfig(p.srv.URL))
			err := exp.pushScores(context.Background(), makeScores(5))
			checkClassified(t, tt, err)
			assert.Len(t, p.received(scoresPath), 1)
		})
	}
}

func TestScoresValidationDropsOnlyTheInvalid(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	env := newTestEnv(t)
	exp := startExporter(t, env, testConfig(p.srv.URL))

	ld := makeScores(2)
	lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	invalid := []struct {
		id    string
		name  string
		value func(pcommon.Value)
		attrs map[string]string
	}{
		{"empty-name", "", func(v pcommon.Value) { v.SetDouble(1) }, nil},
		{"nan", "quality", func(v pcommon.Value) { v.SetDouble(math.NaN()) }, nil},
		{"inf", "quality", func(v pcommon.Value) { v.SetDouble(math.Inf(1)) }, nil},
		{"minus-inf", "quality", func(v pcommon.Value) { v.SetDouble(math.Inf(-1)) }, nil},
		{"bytes", "quality", func(v pcommon.Value) { v.SetEmptyBytes().FromRaw([]byte("x")) }, nil},
		{"map", "quality", func(v pcommon.Value) { v.SetEmptyMap().PutStr("a", "b") }, nil},
		{"missing-value", "quality", nil, nil},
		{"unknown-target", "quality", func(v pcommon.Value) { v.SetDouble(1) }, map[string]string{scorerecord.AttrTarget: "session"}},
	}
	for _, bad := range invalid {
		lr := lrs.AppendEmpty()
		lr.SetEventName(scorerecord.EventName)
		lr.SetTraceID(testTraceID(99))
		lr.Attributes().PutStr(scorerecord.AttrID, bad.id)
		lr.Attributes().PutStr(scorerecord.AttrName, bad.name)
		if bad.value != nil {
			bad.value(lr.Attributes().PutEmpty(scorerecord.AttrValue))
		}
		for k, v := range bad.attrs {
			lr.Attributes().PutStr(k, v)
		}
	}
	require.NoError(t, exp.pushScores(context.Background(), ld), "invalid scores are dropped, not failed")

	var sent []string
	for _, b := range batches(t, p) {
		for _, s := range b {
			sent = append(sent, s["id"].(string))
		}
	}
	assert.Equal(t, []string{"score-0", "score-1"}, sent)

	errs := env.logs.FilterLevelExact(zapcore.ErrorLevel).All()
	require.Len(t, errs, len(invalid))
	for i, e := range errs {
		assert.Equal(t, "Dropping an invalid score record", e.Message)
		assert.Equal(t, invalid[i].id, e.ContextMap()["score_id"])
	}
	assert.Contains(t, errs[0].ContextMap()["error"], "score name is empty")
	assert.Contains(t, errs[1].ContextMap()["error"], "not a finite number")
	assert.Contains(t, errs[4].ContextMap()["error"], "neither a number nor a string")
	assert.Contains(t, errs[7].ContextMap()["error"], "svc.score.target must be")
	metadatatest.AssertEqualExporterSvcScoresDroppedInvalid(t, env.telemetry,
		[]metricdata.DataPoint[int64]{{Value: int64(len(invalid))}}, metricdatatest.IgnoreTimestamp())
}

func TestScoresOnlyInvalidSendsNothing(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	exp := startExporter(t, newTestEnv(t), testConfig(p.srv.URL))
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("not a score")
	require.NoError(t, exp.pushScores(context.Background(), ld))
	assert.Empty(t, p.received(scoresPath))
}

func TestScoresPartialFailureReturnsOnlyUnsentRecords(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	calls := 0
	p.setScores(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		calls++
		if calls == 1 {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Retry-After", "4")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	exp := startExporter(t, newTestEnv(t), testConfig(p.srv.URL))

	ld := makeScores(250)
	// An invalid record among the unsent ones must not come back to the retry either.
	bad := ld.ResourceLogs().At(1).ScopeLogs().At(0).LogRecords().AppendEmpty()
	bad.Attributes().PutStr(scorerecord.AttrName, "")

	err := exp.pushScores(context.Background(), ld)
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "Throttle (4s)", "the Retry-After delay survives the wrapping")
	rest := retriedScores(t, err)
	// Chunk 1 was accepted and is not resent; the rest comes back as it was encoded, the invalid
	// one left out.
	want := makeScores(250)
	sent := 0
	want.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().RemoveIf(func(plog.LogRecord) bool {
		sent++
		return sent <= 100
	})
	wantRest := exp.newScoresRequest(context.Background(), want)
	require.Equal(t, 150, rest.ItemsCount())
	assert.Equal(t, string(wantRest.arrayJSON(0, 150)), string(rest.arrayJSON(0, rest.count())))
	assert.Len(t, p.received(scoresPath), 2, "delivery stops at the first retryable failure")
}

func TestScoresFirstChunkRetryableReturnsPlainError(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	p.setScores(func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusBadGateway) })
	exp := startExporter(t, newTestEnv(t), testConfig(p.srv.URL))
	err := exp.pushScores(context.Background(), makeScores(150))
	require.Error(t, err)
	var retryErr *scoresRetryError
	assert.False(t, errors.As(err, &retryErr), "nothing was delivered: the retry resends the batch as it is")
	assert.False(t, consumererror.IsPermanent(err))
}

func TestScores413SplitsAndDropsTheOversizedScore(t *testing.T) {
	clearCompressionEnv(t)
	const limit = 2000
	p := newFakePlatform(t)
	var mu sync.Mutex
	stored := map[string]int{}
	p.setScores(func(w http.ResponseWriter, _ *http.Request, body []byte) {
		if len(body) > limit {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		var batch []map[string]any
		require.NoError(t, json.Unmarshal(body, &batch))
		mu.Lock()
		for _, s := range batch {
			stored[s["id"].(string)]++
		}
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
	env := newTestEnv(t)
	exp := startExporter(t, env, testConfig(p.srv.URL))
	ld := makeScores(60)
	big := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(7)
	big.Attributes().PutStr(scorerecord.AttrComment, strings.Repeat("c", 2*limit))

	require.NoError(t, exp.pushScores(context.Background(), ld))
	for _, id := range scoreIDs(makeScores(60)) {
		if id == "score-7" {
			assert.Zero(t, stored[id])
			continue
		}
		assert.Equal(t, 1, stored[id], id)
	}
	errs := env.logs.FilterLevelExact(zapcore.ErrorLevel).All()
	require.Len(t, errs, 1)
	assert.Equal(t, "score-7", errs[0].ContextMap()["score_id"])
	metadatatest.AssertEqualExporterSvcScoresDroppedTooLarge(t, env.telemetry,
		[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
}

func TestScoresWithoutIDGetAStableID(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	exp := startExporter(t, newTestEnv(t), testConfig(p.srv.URL))
	withoutIDs := func() plog.Logs {
		ld := makeScores(3)
		for r := 0; r < ld.ResourceLogs().Len(); r++ {
			lrs := ld.ResourceLogs().At(r).ScopeLogs().At(0).LogRecords()
			for i := 0; i < lrs.Len(); i++ {
				lrs.At(i).Attributes().Remove(scorerecord.AttrID)
			}
		}
		return ld
	}
	require.NoError(t, exp.pushScores(context.Background(), withoutIDs()))
	require.NoError(t, exp.pushScores(context.Background(), withoutIDs()))
	b := batches(t, p)
	require.Len(t, b, 2)
	first, second := b[0], b[1]
	require.Len(t, first, 3)
	ids := map[string]bool{}
	for i := range first {
		id, _ := first[i]["id"].(string)
		require.NotEmpty(t, id)
		assert.Equal(t, id, second[i]["id"], "a resent score keeps its id")
		ids[id] = true
	}
	assert.Len(t, ids, 3, "different scores get different ids")
}

func TestScoresRetriedWithoutIDKeepTheirIDs(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	calls := 0
	var firstAttempt []string
	p.setScores(func(w http.ResponseWriter, _ *http.Request, body []byte) {
		calls++
		if calls == 2 {
			var batch []map[string]any
			require.NoError(t, json.Unmarshal(body, &batch))
			for _, s := range batch {
				firstAttempt = append(firstAttempt, s["id"].(string))
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	exp := startExporter(t, newTestEnv(t), testConfig(p.srv.URL))
	ld := makeScores(150)
	for r := 0; r < ld.ResourceLogs().Len(); r++ {
		lrs := ld.ResourceLogs().At(r).ScopeLogs().At(0).LogRecords()
		for i := 0; i < lrs.Len(); i++ {
			lrs.At(i).Attributes().Remove(scorerecord.AttrID)
		}
	}
	err := exp.pushScores(context.Background(), ld)
	rest := retriedScores(t, err)
	require.Len(t, firstAttempt, 50)
	var retried []map[string]any
	require.NoError(t, json.Unmarshal(rest.arrayJSON(0, rest.count()), &retried))
	var retriedIDs []string
	for _, s := range retried {
		retriedIDs = append(retriedIDs, s["id"].(string))
	}
	assert.Equal(t, firstAttempt, retriedIDs, "the scores to retry carry the ids already sent")
}

func TestScoresNonFiniteMetadataDoesNotSinkTheBatch(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	env := newTestEnv(t)
	exp := startExporter(t, env, testConfig(p.srv.URL))
	ld := makeScores(3)
	attrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes()
	attrs.PutDouble(scorerecord.AttrMetadataPrefix+"ratio", math.NaN())
	attrs.PutEmptyMap(scorerecord.AttrMetadataPrefix+"nested").PutDouble("x", math.Inf(1))
	attrs.PutStr(scorerecord.AttrMetadataPrefix+"model", "gpt-x")

	require.NoError(t, exp.pushScores(context.Background(), ld))
	b := batches(t, p)
	require.Len(t, b, 1)
	require.Len(t, b[0], 3, "every score is sent")
	assert.Equal(t, map[string]any{"model": "gpt-x"}, b[0][0]["metadata"], "only the values JSON cannot carry are left out")
	assert.Len(t, env.logs.FilterLevelExact(zapcore.WarnLevel).All(), 2)
}

// retriedScores is what the retry of a push failed with err sends: the request err hands to
// OnError.
func retriedScores(t *testing.T, err error) *scoresRequest {
	t.Helper()
	var retryErr *scoresRetryError
	require.True(t, errors.As(err, &retryErr), "the error carries the scores to retry: %v", err)
	rest, ok := (&scoresRequest{}).OnError(err).(*scoresRequest)
	require.True(t, ok)
	require.Same(t, retryErr.rest, rest, "the retry sends the scores the error carries")
	return rest
}
