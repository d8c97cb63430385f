package svcexporter

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap/zapcore"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/svc/svc-collector/svcexporter/internal/metadatatest"
)

// makeTraces builds resources × scopes × spans spans; span i has span id i+1 (big endian) and
// trace id i/4+1, and an attribute of payloadBytes bytes. Resource and scope attributes name
// their position so that a test can check every span keeps its own.
func makeTraces(resources, scopes, spans, payloadBytes int) ptrace.Traces {
	td := ptrace.NewTraces()
	n := 0
	for r := 0; r < resources; r++ {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutInt("resource.index", int64(r))
		rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
		for s := 0; s < scopes; s++ {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName("scope-" + string(rune('a'+s)))
			ss.Scope().Attributes().PutInt("resource.index", int64(r))
			for i := 0; i < spans; i++ {
				span := ss.Spans().AppendEmpty()
				span.SetName("span")
				span.SetSpanID(testSpanID(n + 1))
				span.SetTraceID(testTraceID(n/4 + 1))
				span.Attributes().PutStr("payload", strings.Repeat("x", payloadBytes))
				n++
			}
		}
	}
	return td
}

func testSpanID(n int) pcommon.SpanID {
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], uint64(n))
	return id
}

func testTraceID(n int) pcommon.TraceID {
	var id pcommon.TraceID
	binary.BigEndian.PutUint64(id[8:], uint64(n))
	return id
}

// spanIDs lists the span ids of td, checking on the way that each span sits under the
// resource and scope it was made with.
func spanIDs(t *testing.T, td ptrace.Traces) []pcommon.SpanID {
	t.Helper()
	var ids []pcommon.SpanID
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		ri, _ := rs.Resource().Attributes().Get("resource.index")
		assert.Equal(t, "https://opentelemetry.io/schemas/1.26.0", rs.SchemaUrl())
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			si, _ := ss.Scope().Attributes().Get("resource.index")
			assert.Equal(t, ri.Int(), si.Int(), "scope under the wrong resource")
			for k := 0; k < ss.Spans().Len(); k++ {
				ids = append(ids, ss.Spans().At(k).SpanID())
			}
		}
	}
	return ids
}

func TestTracesRequest(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	env := newTestEnv(t)
	// A base path and a trailing slash: the API path goes below the base path.
	cfg := testConfig(p.srv.URL + "/svc/")
	cfg.ClientConfig.Headers.Set("x-team", configopaque.String("platform"))
	exp := startExporter(t, env, cfg)

	td := makeTraces(1, 1, 3, 10)
	require.NoError(t, exp.pushTraces(context.Background(), td))

	reqs := p.received("/svc" + tracesPath)
	require.Len(t, reqs, 1)
	h := reqs[0].header
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(testPublicKey+":"+testSecretKey))
	tests := []struct{ header, want string }{
		{"Authorization", wantAuth},
		{"X-Svc-Public-Key", testPublicKey},
		// Spans of other instrumentations than the svc SDKs: written at once (write_path auto).
		{"X-Svc-Ingestion-Version", "4"},
		// The gateway is no SDK: it names itself in User-Agent only.
		{"X-Svc-Sdk-Name", ""},
		{"X-Svc-Sdk-Version", ""},
		{"Content-Type", "application/x-protobuf"},
		{"X-Team", "platform"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, h.Get(tt.header), tt.header)
	}
	assert.True(t, strings.HasPrefix(h.Get("User-Agent"), "svc-otelcol/"+testVersion+" "), h.Get("User-Agent"))
	assert.Equal(t, http.MethodPost, reqs[0].method)
	require.NoError(t, ptracetest.CompareTraces(td, decodeTraces(t, reqs[0].body)), "the body is the batch, resources and scopes included")
}

func TestTracesCompression(t *testing.T) {
	const (
		svcVar    = "SVC_OTEL_COMPRESSION"
		tracesVar = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"
		otlpVar   = "OTEL_EXPORTER_OTLP_COMPRESSION"
	)
	tests := []struct {
		name       string
		configured configcompression.Type
		env        map[string]string
		wantGzip   bool
	}{
		{name: "default is gzip", wantGzip: true},
		{name: "config none", configured: "none", wantGzip: false},
		{name: "config gzip beats env none", configured: "gzip", env: map[string]string{svcVar: "none"}, wantGzip: true},
		{name: "config none beats env gzip", configured: "none", env: map[string]string{svcVar: "gzip"}, wantGzip: false},
		{name: "SVC_OTEL_COMPRESSION none", env: map[string]string{svcVar: "none"}, wantGzip: false},
		{name: "SVC_OTEL_COMPRESSION first", env: map[string]string{svcVar: "gzip", tracesVar: "none", otlpVar: "none"}, wantGzip: true},
		{name: "traces var before generic var", env: map[string]string{tracesVar: "none", otlpVar: "gzip"}, wantGzip: false},
		{name: "traces var gzip", env: map[string]string{tracesVar: "gzip", otlpVar: "none"}, wantGzip: true},
		{name: "generic var none", env: map[string]string{otlpVar: "none"}, wantGzip: false},
		{name: "values are case-insensitive", env: map[string]string{svcVar: " NONE "}, wantGzip: false},
		{name: "empty variable is unset", env: map[string]string{svcVar: "", otlpVar: "none"}, wantGzip: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearCompressionEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			p := newFakePlatform(t)
			cfg := testConfig(p.srv.URL)
			cfg.ClientConfig.Compression = tt.configured
			exp := startExporter(t, newTestEnv(t), cfg)

			td := makeTraces(1, 1, 20, 100)
			require.NoError(t, exp.pushTraces(context.Background(), td))
			reqs := p.received(tracesPath)
			require.Len(t, reqs, 1)
			assert.Equal(t, tt.wantGzip, reqs[0].gzipped, "Content-Encoding: %q", reqs[0].header.Get("Content-Encoding"))
			if tt.wantGzip {
				assert.Less(t, reqs[0].rawLen, len(reqs[0].body), "a gzip body is smaller than the spans it carries")
			} else {
				assert.Empty(t, reqs[0].header.Get("Content-Encoding"))
			}
			require.NoError(t, ptracetest.CompareTraces(td, decodeTraces(t, reqs[0].body)))

			// Scores are never compressed: the SDKs compress span batches only.
			require.NoError(t, exp.pushScores(context.Background(), makeScores(3)))
			scoreReqs := p.received(scoresPath)
			require.Len(t, scoreReqs, 1)
			assert.False(t, scoreReqs[0].gzipped)
		})
	}
}

func TestTracesCompressionEnvError(t *testing.T) {
	clearCompressionEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "brotli")
	_, err := NewFactory().CreateTraces(context.Background(), newTestEnv(t).settings, testConfig("http://127.0.0.1:1"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `OTEL_EXPORTER_OTLP_TRACES_COMPRESSION="brotli"`)
	assert.Contains(t, err.Error(), "gzip or none")

	// The config overrides the environment, so it also repairs a bad variable.
	cfg := testConfig("http://127.0.0.1:1")
	cfg.ClientConfig.Compression = "gzip"
	_, err = NewFactory().CreateTraces(context.Background(), newTestEnv(t).settings, cfg)
	require.NoError(t, err)
}

// statusCase is one platform answer and how the exporter must classify it.
type statusCase struct {
	name        string
	status      int
	header      map[string]string
	body        []byte
	contentType string
	// wantRetryable: the error goes back to the retry; wantThrottle: with this delay.
	wantErr       bool
	wantRetryable bool
	wantThrottle  string
	wantInError   []string
}

func statusCases() []statusCase {
	otlpStatus, _ := proto.Marshal(&status.Status{Code: 3, Message: "span 7 has no name"})
	return []statusCase{
		{name: "200", status: http.StatusOK},
		{name: "202", status: http.StatusAccepted},
		{name: "400 with OTLP status", status: http.StatusBadRequest, body: otlpStatus, contentType: "application/x-protobuf",
			wantErr: true, wantInError: []string{"HTTP 400", "span 7 has no name"}},
		{name: "400 with text", status: http.StatusBadRequest, body: []byte("malformed payload"), contentType: "text/plain",
			wantErr: true, wantInError: []string{"HTTP 400", "malformed payload"}},
		{name: "401", status: http.StatusUnauthorized, wantErr: true,
			wantInError: []string{"HTTP 401", "refused the credentials", testPublicKey, "check public_key and secret_key"}},
		{name: "403", status: http.StatusForbidden, wantErr: true, wantInError: []string{"HTTP 403", "refused the credentials"}},
		{name: "404", status: http.StatusNotFound, wantErr: true, wantInError: []string{"HTTP 404"}},
		{name: "429", status: http.StatusTooManyRequests, wantErr: true, wantRetryable: true, wantInError: []string{"HTTP 429"}},
		{name: "429 Retry-After seconds", status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "7"},
			wantErr: true, wantRetryable: true, wantThrottle: "7s"},
		{name: "503 Retry-After seconds", status: http.StatusServiceUnavailable, header: map[string]string{"Retry-After": "3"},
			wantErr: true, wantRetryable: true, wantThrottle: "3s"},
		{name: "500", status: http.StatusInternalServerError, wantErr: true, wantRetryable: true, wantInError: []string{"HTTP 500"}},
		{name: "502", status: http.StatusBadGateway, wantErr: true, wantRetryable: true},
		{name: "504", status: http.StatusGatewayTimeout, wantErr: true, wantRetryable: true},
	}
}

func TestTracesResponses(t *testing.T) {
	clearCompressionEnv(t)
	for _, tt := range statusCases() {
		if tt.status == http.StatusBadRequest {
			continue // a span batch is split on 400: TestTraces400*
		}
		t.Run(tt.name, func(t *testing.T) {
			p := newFakePlatform(t)
			p.setTraces(statusHandler(tt))
			env := newTestEnv(t)
			exp := startExporter(t, env, testConfig(p.srv.URL))
			err := exp.pushTraces(context.Background(), makeTraces(1, 1, 2, 10))
			checkClassified(t, tt, err)
			assert.Len(t, p.received(tracesPath), 1, "the exporter itself never resends: retries are the exporterhelper's")
		})
	}
}

func statusHandler(tt statusCase) func(w http.ResponseWriter, r *http.Request, body []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		for k, v := range tt.header {
			w.Header().Set(k, v)
		}
		if tt.contentType != "" {
			w.Header().Set("Content-Type", tt.contentType)
		}
		w.WriteHeader(tt.status)
		_, _ = w.Write(tt.body)
	}
}

func checkClassified(t *testing.T, tt statusCase, err error) {
	t.Helper()
	if !tt.wantErr {
		require.NoError(t, err)
		return
	}
	require.Error(t, err)
	assert.Equal(t, !tt.wantRetryable, consumererror.IsPermanent(err), "permanent? %v", err)
	if tt.wantThrottle != "" {
		// exporterhelper's throttle error is unexported; its text carries the delay.
		assert.Contains(t, err.Error(), "Throttle ("+tt.wantThrottle+")")
	}
	for _, part := range tt.wantInError {
		assert.Contains(t, err.Error(), part)
	}
	assert.NotContains(t, err.Error(), testSecretKey)
}

func TestTracesNetworkErrorIsRetryable(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	exp := startExporter(t, newTestEnv(t), testConfig(p.srv.URL))
	p.srv.Close()
	err := exp.pushTraces(context.Background(), makeTraces(1, 1, 1, 1))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "sending to the svc platform failed")
}

func TestTracesRetryAfterHTTPDate(t *testing.T) {
	d, ok := retryAfter(time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat))
	require.True(t, ok)
	assert.InDelta(t, 90*time.Second, d, float64(2*time.Second))
	d, ok = retryAfter(time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat))
	require.True(t, ok)
	assert.Equal(t, time.Duration(0), d, "a date in the past means now")
	_, ok = retryAfter("soon")
	assert.False(t, ok)
	_, ok = retryAfter("")
	assert.False(t, ok)
}

func TestTracesPartialSuccessIsLogged(t *testing.T) {
	clearCompressionEnv(t)
	tests := []struct {
		name        string
		contentType string
		encode      func(ptraceotlp.ExportResponse) ([]byte, error)
	}{
		{"protobuf", "application/x-protobuf", func(r ptraceotlp.ExportResponse) ([]byte, error) { return r.MarshalProto() }},
		{"json", "application/json", func(r ptraceotlp.ExportResponse) ([]byte, error) { return r.MarshalJSON() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := ptraceotlp.NewExportResponse()
			resp.PartialSuccess().SetRejectedSpans(3)
			resp.PartialSuccess().SetErrorMessage("3 spans have no trace id")
			body, err := tt.encode(resp)
			require.NoError(t, err)

			p := newFakePlatform(t)
			p.setTraces(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.Header().Set("Content-Type", tt.contentType)
				_, _ = w.Write(body)
			})
			env := newTestEnv(t)
			exp := startExporter(t, env, testConfig(p.srv.URL))
			require.NoError(t, exp.pushTraces(context.Background(), makeTraces(1, 1, 5, 1)))

			warnings := env.logs.FilterMessage("svc platform accepted the spans partially").All()
			require.Len(t, warnings, 1)
			assert.Equal(t, zapcore.WarnLevel, warnings[0].Level)
			assert.Equal(t, int64(3), warnings[0].ContextMap()["rejected_spans"])
			assert.Equal(t, "3 spans have no trace id", warnings[0].ContextMap()["message"])
			metadatatest.AssertEqualExporterSvcSpansRejected(t, env.telemetry,
				[]metricdata.DataPoint[int64]{{Value: 3}}, metricdatatest.IgnoreTimestamp())
		})
	}
}

// sizeLimitedTraces answers 413 to a body above limit bytes (decompressed), else 200.
func sizeLimitedTraces(limit int) func(w http.ResponseWriter, r *http.Request, body []byte) {
	return func(w http.ResponseWriter, _ *http.Request, body []byte) {
		if len(body) > limit {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

// acceptedSpanIDs decodes every request to the traces path the platform answered with 2xx.
func acceptedSpanIDs(t *testing.T, p *fakePlatform, limit int) []pcommon.SpanID {
	var ids []pcommon.SpanID
	for _, r := range p.received(tracesPath) {
		if len(r.body) <= limit {
			ids = append(ids, spanIDs(t, decodeTraces(t, r.body))...)
		}
	}
	return ids
}

func TestTraces413SplitsAndDeliversEverySpanOnce(t *testing.T) {
	for _, compression := range []configcompression.Type{"none", "gzip"} {
		t.Run(string(compression), func(t *testing.T) {
			clearCompressionEnv(t)
			const limit = 4 * 1024 // about a dozen spans of ~300 bytes
			p := newFakePlatform(t)
			p.setTraces(sizeLimitedTraces(limit))
			env := newTestEnv(t)
			cfg := testConfig(p.srv.URL)
			cfg.ClientConfig.Compression = compression
			exp := startExporter(t, env, cfg)

			td := makeTraces(3, 2, 17, 300) // 102 spans over 6 resource/scope pairs
			// Span 40 alone is bigger than the limit.
			big := td.ResourceSpans().At(1).ScopeSpans().At(0).Spans().At(6)
			big.Attributes().PutStr("payload", strings.Repeat("y", 2*limit))
			bigTrace, bigSpan := big.TraceID(), big.SpanID()

			require.NoError(t, exp.pushTraces(context.Background(), td),
				"the rest was delivered: the dropped span is reported in the log and the metrics")

			want := map[pcommon.SpanID]int{}
			for _, id := range spanIDs(t, td) {
				if id != bigSpan {
					want[id] = 1
				}
			}
			got := map[pcommon.SpanID]int{}
			for _, id := range acceptedSpanIDs(t, p, limit) {
				got[id]++
			}
			assert.Equal(t, want, got, "every span but the oversized one arrives exactly once")

			errs := env.logs.FilterLevelExact(zapcore.ErrorLevel).All()
			require.Len(t, errs, 1)
			assert.Contains(t, errs[0].Message, "too large")
			assert.Equal(t, bigTrace.String(), errs[0].ContextMap()["trace_id"])
			assert.Equal(t, bigSpan.String(), errs[0].ContextMap()["span_id"])

			metadatatest.AssertEqualExporterSvcSpansDroppedTooLarge(t, env.telemetry,
				[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
			splits := 0
			for _, r := range p.received(tracesPath) {
				if len(r.body) > limit && len(spanIDs(t, decodeTraces(t, r.body))) > 1 {
					splits++
				}
			}
			require.Positive(t, splits)
			metadatatest.AssertEqualExporterSvcRequestsSplit(t, env.telemetry,
				[]metricdata.DataPoint[int64]{{Value: int64(splits)}}, metricdatatest.IgnoreTimestamp())
		})
	}
}

func TestTraces413SingleSpanIsDropped(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	p.setTraces(sizeLimitedTraces(100))
	env := newTestEnv(t)
	exp := startExporter(t, env, testConfig(p.srv.URL))
	td := makeTraces(1, 1, 1, 500)
	require.NoError(t, exp.pushTraces(context.Background(), td))
	assert.Len(t, p.received(tracesPath), 1)
	errs := env.logs.FilterLevelExact(zapcore.ErrorLevel).All()
	require.Len(t, errs, 1)
	assert.Equal(t, testSpanID(1).String(), errs[0].ContextMap()["span_id"])
	assert.Equal(t, testTraceID(1).String(), errs[0].ContextMap()["trace_id"])
}

func TestTraces413ThenRetryableReturnsOnlyUnsentSpans(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	calls := 0
	// 1st: the whole batch is too large; 2nd: the first half is accepted; 3rd: the second half
	// meets an outage.
	p.setTraces(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		calls++
		switch calls {
		case 1:
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		case 2:
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	exp := startExporter(t, newTestEnv(t), testConfig(p.srv.URL))
	td := makeTraces(2, 1, 5, 10)
	err := exp.pushTraces(context.Background(), td)
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	var tracesErr consumererror.Traces
	require.True(t, errors.As(err, &tracesErr), "the error carries the spans to retry: %v", err)
	// Only the second half (the second resource) goes back to the retry, under its own resource.
	want := ptrace.NewTraces()
	td.ResourceSpans().At(1).CopyTo(want.ResourceSpans().AppendEmpty())
	require.NoError(t, ptracetest.CompareTraces(want, tracesErr.Data()))
}

func TestTraces413ThenPermanentKeepsDeliveringTheRest(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	calls := 0
	// The whole batch is too large; its first half is refused for good; the second accepted.
	p.setTraces(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		calls++
		switch calls {
		case 1:
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		case 2:
			w.WriteHeader(http.StatusUnprocessableEntity) // permanent, not split on (unlike 400)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	env := newTestEnv(t)
	exp := startExporter(t, env, testConfig(p.srv.URL))
	err := exp.pushTraces(context.Background(), makeTraces(1, 1, 8, 10))
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "refused 4 of 8 spans")
	assert.Len(t, p.received(tracesPath), 3, "the second half was still sent")
	logged := env.logs.FilterMessage("svc platform refused spans for good; they are dropped").All()
	require.Len(t, logged, 1, "the loss is logged whatever the queue settings")
	assert.Equal(t, zapcore.ErrorLevel, logged[0].Level)
	assert.Equal(t, int64(4), logged[0].ContextMap()["dropped"])
}

func TestTracesEmptyBatchSendsNothing(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	exp := startExporter(t, newTestEnv(t), testConfig(p.srv.URL))
	require.NoError(t, exp.pushTraces(context.Background(), ptrace.NewTraces()))
	assert.Empty(t, p.received(tracesPath))
}

// malformedSpanTraces answers 400 to any request holding a span with the attribute "unreadable",
// as the platform refuses a whole request for one malformed span.
func malformedSpanTraces(t *testing.T) func(w http.ResponseWriter, r *http.Request, body []byte) {
	return func(w http.ResponseWriter, _ *http.Request, body []byte) {
		for _, span := range allSpans(decodeTraces(t, body)) {
			if _, bad := span.Attributes().Get("unreadable"); bad {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte("Invalid request data: no spans were ingested"))
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	}
}

func allSpans(td ptrace.Traces) []ptrace.Span {
	var spans []ptrace.Span
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				spans = append(spans, span)
			}
		}
	}
	return spans
}

// acceptedSpans counts the spans of the requests the platform took, by span id.
func acceptedSpans(t *testing.T, p *fakePlatform) map[pcommon.SpanID]int {
	got := map[pcommon.SpanID]int{}
	for _, r := range p.received(tracesPath) {
		ids := spanIDs(t, decodeTraces(t, r.body))
		refused := false
		for _, span := range allSpans(decodeTraces(t, r.body)) {
			if _, bad := span.Attributes().Get("unreadable"); bad {
				refused = true
			}
		}
		if !refused {
			for _, id := range ids {
				got[id]++
			}
		}
	}
	return got
}

func TestTraces400SplitsAndDeliversEveryOtherSpan(t *testing.T) {
	for _, tt := range []struct {
		name string
		bad  []int // indexes of the unreadable spans among 100
	}{
		{"one unreadable span", []int{37}},
		{"first and last", []int{0, 99}},
		{"three", []int{5, 6, 60}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clearCompressionEnv(t)
			p := newFakePlatform(t)
			p.setTraces(malformedSpanTraces(t))
			env := newTestEnv(t)
			exp := startExporter(t, env, testConfig(p.srv.URL))

			td := makeTraces(2, 2, 25, 50)
			spans := allSpans(td)
			badIDs := map[pcommon.SpanID]bool{}
			for _, i := range tt.bad {
				spans[i].Attributes().PutBool("unreadable", true)
				spans[i].Attributes().PutStr("gen_ai.input.messages", "private prompt of span "+strconv.Itoa(i))
				badIDs[spans[i].SpanID()] = true
			}
			require.NoError(t, exp.pushTraces(context.Background(), td),
				"the rest was delivered: the refused spans are reported in the log and the metrics")

			want := map[pcommon.SpanID]int{}
			for _, span := range spans {
				if !badIDs[span.SpanID()] {
					want[span.SpanID()] = 1
				}
			}
			assert.Equal(t, want, acceptedSpans(t, p), "every other span arrives exactly once")

			errs := env.logs.FilterLevelExact(zapcore.ErrorLevel).All()
			require.Len(t, errs, len(tt.bad))
			for _, e := range errs {
				assert.Contains(t, e.Message, "malformed (400)")
				id := e.ContextMap()["span_id"].(string)
				assert.True(t, slices.ContainsFunc(spans, func(s ptrace.Span) bool { return badIDs[s.SpanID()] && s.SpanID().String() == id }), id)
				assert.NotContains(t, fmt.Sprint(e.ContextMap()), "private prompt", "never the span's content")
			}
			metadatatest.AssertEqualExporterSvcSpansRefusedInvalid(t, env.telemetry,
				[]metricdata.DataPoint[int64]{{Value: int64(len(tt.bad))}}, metricdatatest.IgnoreTimestamp())
			metadatatest.AssertEqualExporterSvcSentSpans(t, env.telemetry,
				[]metricdata.DataPoint[int64]{{Value: int64(100 - len(tt.bad))}}, metricdatatest.IgnoreTimestamp())
			t.Logf("%d requests for 100 spans, %d unreadable", len(p.received(tracesPath)), len(tt.bad))
		})
	}
}

func TestTraces400SingleSpanIsDropped(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	p.setTraces(malformedSpanTraces(t))
	env := newTestEnv(t)
	exp := startExporter(t, env, testConfig(p.srv.URL))
	td := makeTraces(1, 1, 1, 10)
	allSpans(td)[0].Attributes().PutBool("unreadable", true)
	require.NoError(t, exp.pushTraces(context.Background(), td))
	assert.Len(t, p.received(tracesPath), 1)
	errs := env.logs.FilterLevelExact(zapcore.ErrorLevel).All()
	require.Len(t, errs, 1)
	assert.Equal(t, testSpanID(1).String(), errs[0].ContextMap()["span_id"])
	assert.Contains(t, errs[0].ContextMap()["error"], "HTTP 400")
}

// A 400 not about one span (a proxy, an encoding the platform does not take) answers every
// request: the batch is not split down to single spans.
func TestTraces400ToEveryRequestStaysWithinTheSplitBudget(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	p.setTraces(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("unsupported request"))
	})
	env := newTestEnv(t)
	exp := startExporter(t, env, testConfig(p.srv.URL))

	err := exp.pushTraces(context.Background(), makeTraces(2, 4, 64, 10))
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))

	requests := len(p.received(tracesPath))
	assert.LessOrEqual(t, requests, splitBudget(512), "not 2·512−1 = 1023")
	errs := env.logs.FilterLevelExact(zapcore.ErrorLevel).All()
	assert.LessOrEqual(t, len(errs), splitBudget(512)/2+1, "not one line per span")
	assert.Contains(t, errs[len(errs)-1].ContextMap()["error"], "not split further")
	metadatatest.AssertEqualExporterSvcSpansRefusedInvalid(t, env.telemetry,
		[]metricdata.DataPoint[int64]{{Value: 512}}, metricdatatest.IgnoreTimestamp())
	t.Logf("%d requests and %d error lines for 512 spans answered 400", requests, len(errs))
}
