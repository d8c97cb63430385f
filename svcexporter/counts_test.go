package svcexporter

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/svc/svc-collector/svcexporter/internal/metadatatest"
)

// itemRules is how a fake platform answers a request, by the items (0-based) it carries.
type itemRules struct {
	limit     int          // more items than this: 413
	tooLarge  map[int]bool // a request holding one of these: 413, even alone
	retryable map[int]bool // 503
	refused   map[int]bool // 422, for good
	malformed map[int]bool // 400: spans split on it, scores take it as refused for good
}

func (r itemRules) status(items []int) int {
	if r.limit > 0 && len(items) > r.limit || slices.ContainsFunc(items, func(i int) bool { return r.tooLarge[i] }) {
		return http.StatusRequestEntityTooLarge
	}
	if slices.ContainsFunc(items, func(i int) bool { return r.retryable[i] }) {
		return http.StatusServiceUnavailable
	}
	if slices.ContainsFunc(items, func(i int) bool { return r.refused[i] }) {
		return http.StatusUnprocessableEntity
	}
	if slices.ContainsFunc(items, func(i int) bool { return r.malformed[i] }) {
		return http.StatusBadRequest
	}
	return http.StatusOK
}

func set(items ...int) map[int]bool {
	m := map[int]bool{}
	for _, i := range items {
		m[i] = true
	}
	return m
}

// deliveryCounts are the exporter's sent and send_failed counters of one signal.
type deliveryCounts struct{ sent, failedPermanent, failedRetryable int64 }

func readDeliveryCounts(t *testing.T, tel *componenttest.Telemetry, signal string) deliveryCounts {
	t.Helper()
	var c deliveryCounts
	if m, err := tel.GetMetric("otelcol_exporter_svc_sent_" + signal); err == nil {
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			c.sent += dp.Value
		}
	}
	if m, err := tel.GetMetric("otelcol_exporter_svc_send_failed_" + signal); err == nil {
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			permanent, ok := dp.Attributes.Value(errorPermanentKey)
			require.True(t, ok, "send_failed has %s", errorPermanentKey)
			if permanent.AsBool() {
				c.failedPermanent += dp.Value
			} else {
				c.failedRetryable += dp.Value
			}
		}
	}
	return c
}

// Pushes of 250 items: scores go out in requests of 100, spans in one request; both split in
// halves on 413.
var deliveryCases = []struct {
	name          string
	rules         itemRules
	scores, spans deliveryCounts
}{
	{"all delivered", itemRules{}, deliveryCounts{sent: 250}, deliveryCounts{sent: 250}},
	{"one request refused for good", itemRules{refused: set(150)},
		deliveryCounts{sent: 150, failedPermanent: 100}, deliveryCounts{failedPermanent: 250}},
	{"the rest handed back to the retry", itemRules{retryable: set(220)},
		deliveryCounts{sent: 200, failedRetryable: 50}, deliveryCounts{failedRetryable: 250}},
	{"refused, then the rest retried", itemRules{refused: set(10), retryable: set(120)},
		deliveryCounts{failedPermanent: 100, failedRetryable: 150}, deliveryCounts{failedRetryable: 250}},
	{"nothing delivered", itemRules{retryable: set(0)},
		deliveryCounts{failedRetryable: 250}, deliveryCounts{failedRetryable: 250}},
	{"400: spans split, one malformed alone", itemRules{malformed: set(150)},
		deliveryCounts{sent: 150, failedPermanent: 100}, deliveryCounts{sent: 249, failedPermanent: 1}},
	{"413: split, one item too large alone", itemRules{limit: 40, tooLarge: set(33)},
		deliveryCounts{sent: 249, failedPermanent: 1}, deliveryCounts{sent: 249, failedPermanent: 1}},
	// Scores: [0,100) splits, [0,50) goes, [50,100) meets the 503. Spans: [0,31) and [31,62) go,
	// [62,93) meets the 503.
	{"413: split, then the rest retried", itemRules{limit: 60, retryable: set(90)},
		deliveryCounts{sent: 50, failedRetryable: 200}, deliveryCounts{sent: 62, failedRetryable: 188}},
}

// A push delivered in part counts each score once: as sent when the platform took it, as failed
// (permanent or handed back to the retry) when not; never the whole batch.
func TestScoresSentAndFailedCountEachScore(t *testing.T) {
	for _, tt := range deliveryCases {
		t.Run(tt.name, func(t *testing.T) {
			clearCompressionEnv(t)
			p := newFakePlatform(t)
			p.setScores(func(w http.ResponseWriter, _ *http.Request, body []byte) {
				var batch []map[string]any
				require.NoError(t, json.Unmarshal(body, &batch))
				var items []int
				for _, s := range batch {
					n, err := strconv.Atoi(strings.TrimPrefix(s["id"].(string), "score-"))
					require.NoError(t, err)
					items = append(items, n)
				}
				w.WriteHeader(tt.rules.status(items))
			})
			env := newTestEnv(t)
			exp := startExporter(t, env, testConfig(p.srv.URL))
			err := exp.pushScores(context.Background(), makeScores(250))
			assert.Equal(t, tt.scores.failedPermanent+tt.scores.failedRetryable > 0 && !tt.rules.onlyTooLarge(), err != nil, "error: %v", err)
			assert.Equal(t, tt.scores, readDeliveryCounts(t, env.telemetry, "scores"))
		})
	}
}

func TestSpansSentAndFailedCountEachSpan(t *testing.T) {
	for _, tt := range deliveryCases {
		t.Run(tt.name, func(t *testing.T) {
			clearCompressionEnv(t)
			p := newFakePlatform(t)
			p.setTraces(func(w http.ResponseWriter, _ *http.Request, body []byte) {
				var items []int
				for _, id := range spanIDs(t, decodeTraces(t, body)) {
					items = append(items, int(binary.BigEndian.Uint64(id[:]))-1)
				}
				w.WriteHeader(tt.rules.status(items))
			})
			env := newTestEnv(t)
			exp := startExporter(t, env, testConfig(p.srv.URL))
			err := exp.pushTraces(context.Background(), makeTraces(1, 1, 250, 0))
			onlyRefusedAlone := tt.rules.onlyTooLarge() || len(tt.rules.malformed) > 0 && len(tt.rules.retryable) == 0 && len(tt.rules.refused) == 0
			assert.Equal(t, tt.spans.failedPermanent+tt.spans.failedRetryable > 0 && !onlyRefusedAlone, err != nil, "error: %v", err)
			assert.Equal(t, tt.spans, readDeliveryCounts(t, env.telemetry, "spans"))
		})
	}
}

// onlyTooLarge: items dropped as too large alone make no error; the rest is delivered.
func (r itemRules) onlyTooLarge() bool {
	return len(r.tooLarge) > 0 && len(r.retryable) == 0 && len(r.refused) == 0
}

// The counters carry the exporterhelper's attribute name and the documented metric names.
func TestSendFailedCounterShape(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	p.setScores(func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusServiceUnavailable) })
	env := newTestEnv(t)
	exp := startExporter(t, env, testConfig(p.srv.URL))
	require.Error(t, exp.pushScores(context.Background(), makeScores(3)))
	metadatatest.AssertEqualExporterSvcSendFailedScores(t, env.telemetry, []metricdata.DataPoint[int64]{
		{Value: 3, Attributes: attribute.NewSet(attribute.Bool("error.permanent", false))},
	}, metricdatatest.IgnoreTimestamp())
}
