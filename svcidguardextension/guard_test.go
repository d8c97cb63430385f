package svcidguardextension

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/svc/svc-collector/svcidguardextension/internal/metadata"
	"github.com/svc/svc-collector/svcidguardextension/internal/metadatatest"
)

// makeTraces is n spans of one service; the spans at the indexes of zeroSpan have an all-zero
// span id, those of noTrace no trace id. Every span carries content that must never be logged.
func makeTraces(n int, zeroSpan, noTrace []int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("opentelemetry.instrumentation.openai_v2")
	for i := 0; i < n; i++ {
		span := ss.Spans().AppendEmpty()
		span.SetName("chat gpt-4o")
		var tid pcommon.TraceID
		binary.BigEndian.PutUint64(tid[8:], uint64(i/10+1))
		span.SetTraceID(tid)
		var sid pcommon.SpanID
		binary.BigEndian.PutUint64(sid[:], uint64(i+1))
		span.SetSpanID(sid)
		span.Attributes().PutStr("gen_ai.input.messages", fmt.Sprintf(`[{"role":"user","parts":[{"type":"text","content":"secret prompt %d"}]}]`, i))
	}
	spans := ss.Spans()
	for _, i := range zeroSpan {
		spans.At(i).SetSpanID(pcommon.SpanID{})
	}
	for _, i := range noTrace {
		spans.At(i).SetTraceID(pcommon.TraceID{})
	}
	return td
}

func protoBody(t *testing.T, td ptrace.Traces) []byte {
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	return b
}

func TestHasInvalidSpan(t *testing.T) {
	assert.False(t, hasInvalidSpan(protoBody(t, makeTraces(100, nil, nil))))
	assert.True(t, hasInvalidSpan(protoBody(t, makeTraces(100, []int{57}, nil))))
	assert.True(t, hasInvalidSpan(protoBody(t, makeTraces(3, nil, []int{2}))))
	assert.False(t, hasInvalidSpan(nil), "an empty request holds no span")
	assert.True(t, hasInvalidSpan([]byte{0x0a, 0xff}), "not protobuf: the full decode decides")
}

// receiver stands in for the otlp receiver's HTTP handler: it decodes the request as the
// receiver does, keeps the spans, and answers an empty ExportTraceServiceResponse.
type receiver struct {
	got    []ptrace.Traces
	status int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := ptraceotlp.NewExportRequest()
	var err error
	json := strings.HasPrefix(r.Header.Get("Content-Type"), contentTypeJSON)
	if json {
		err = req.UnmarshalJSON(body)
	} else {
		err = req.UnmarshalProto(body)
	}
	if err != nil || rc.status != 0 {
		w.WriteHeader(max(rc.status, http.StatusBadRequest))
		return
	}
	rc.got = append(rc.got, req.Traces())
	out, _ := ptraceotlp.NewExportResponse().MarshalProto()
	w.Header().Set("Content-Type", contentTypeProtobuf)
	if json {
		out, _ = ptraceotlp.NewExportResponse().MarshalJSON()
		w.Header().Set("Content-Type", contentTypeJSON)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

type testEnv struct {
	guard *guard
	tel   *componenttest.Telemetry
	logs  *observer.ObservedLogs
}

func newTestEnv(t *testing.T) testEnv {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := metadatatest.NewSettings(tel)
	core, logs := observer.New(zap.InfoLevel)
	set.Logger = zap.New(core)
	ext, err := NewFactory().Create(context.Background(), set, createDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return testEnv{guard: ext.(*guard), tel: tel, logs: logs}
}

func (env testEnv) handler(t *testing.T, next http.Handler) http.Handler {
	wrap, err := env.guard.GetHTTPHandler(context.Background())
	require.NoError(t, err)
	h, err := wrap(context.Background(), next)
	require.NoError(t, err)
	return h
}

func post(h http.Handler, path, contentType string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func spanIDs(td ptrace.Traces) map[pcommon.SpanID]bool {
	ids := map[pcommon.SpanID]bool{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				ids[span.SpanID()] = true
			}
		}
	}
	return ids
}

// One span with an all-zero span id among 100: the receiver gets the 99 others, the sender an
// OTLP partial success naming the reason; the refusal is counted and logged without content.
func TestHTTPRefusesTheBadSpanAlone(t *testing.T) {
	for _, tt := range []struct {
		name        string
		contentType string
		encode      func(t *testing.T, td ptrace.Traces) []byte
		decode      func(resp ptraceotlp.ExportResponse, b []byte) error
	}{
		{"protobuf", contentTypeProtobuf, protoBody, ptraceotlp.ExportResponse.UnmarshalProto},
		{"json", contentTypeJSON, func(t *testing.T, td ptrace.Traces) []byte {
			b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
			require.NoError(t, err)
			return b
		}, ptraceotlp.ExportResponse.UnmarshalJSON},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			rc := &receiver{}
			td := makeTraces(100, []int{57}, nil)
			w := post(env.handler(t, rc), "/v1/traces", tt.contentType, tt.encode(t, td))
			require.Equal(t, http.StatusOK, w.Code)
			require.Len(t, rc.got, 1)
			got := spanIDs(rc.got[0])
			assert.Len(t, got, 99)
			assert.False(t, got[pcommon.SpanID{}], "the zero span id never goes on")

			resp := ptraceotlp.NewExportResponse()
			require.NoError(t, tt.decode(resp, w.Body.Bytes()))
			assert.Equal(t, int64(1), resp.PartialSuccess().RejectedSpans())
			assert.Contains(t, resp.PartialSuccess().ErrorMessage(), "1 with an empty or all-zero span id")

			metadatatest.AssertEqualSvcidguardSpansRefused(t, env.tel, []metricdata.DataPoint[int64]{
				{Value: 1, Attributes: attribute.NewSet(attribute.String("reason", "span_id"))},
			}, metricdatatest.IgnoreTimestamp())
			logged := env.logs.FilterMessageSnippet("empty or all-zero").All()
			require.Len(t, logged, 1)
			assert.Equal(t, int64(1), logged[0].ContextMap()["refused"])
			assert.Contains(t, fmt.Sprint(logged[0].ContextMap()["sources"]), `service "checkout"`)
			assert.NotContains(t, fmt.Sprint(logged[0].ContextMap()), "secret prompt")
		})
	}
}

func TestHTTPRequests(t *testing.T) {
	t.Run("every span bad: nothing goes on, all rejected", func(t *testing.T) {
		env := newTestEnv(t)
		rc := &receiver{}
		w := post(env.handler(t, rc), "/v1/traces", contentTypeProtobuf, protoBody(t, makeTraces(3, []int{0}, []int{1, 2})))
		require.Equal(t, http.StatusOK, w.Code)
		resp := ptraceotlp.NewExportResponse()
		require.NoError(t, resp.UnmarshalProto(w.Body.Bytes()))
		assert.Equal(t, int64(3), resp.PartialSuccess().RejectedSpans())
		assert.Contains(t, resp.PartialSuccess().ErrorMessage(), "2 with an empty or all-zero trace id")
		require.Len(t, rc.got, 1)
		assert.Equal(t, 0, rc.got[0].SpanCount())
	})
	t.Run("good request passes unchanged", func(t *testing.T) {
		env := newTestEnv(t)
		rc := &receiver{}
		w := post(env.handler(t, rc), "/v1/traces", contentTypeProtobuf, protoBody(t, makeTraces(10, nil, nil)))
		require.Equal(t, http.StatusOK, w.Code)
		resp := ptraceotlp.NewExportResponse()
		require.NoError(t, resp.UnmarshalProto(w.Body.Bytes()))
		assert.Zero(t, resp.PartialSuccess().RejectedSpans())
		assert.Equal(t, 10, rc.got[0].SpanCount())
		assert.Empty(t, env.logs.All())
	})
	t.Run("receiver refuses: its answer goes back as it is", func(t *testing.T) {
		env := newTestEnv(t)
		rc := &receiver{status: http.StatusServiceUnavailable}
		w := post(env.handler(t, rc), "/v1/traces", contentTypeProtobuf, protoBody(t, makeTraces(10, []int{1}, nil)))
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	})
	t.Run("not OTLP: the receiver answers", func(t *testing.T) {
		env := newTestEnv(t)
		rc := &receiver{}
		w := post(env.handler(t, rc), "/v1/traces", contentTypeProtobuf, []byte{0x0a, 0xff, 0x01})
		assert.Equal(t, http.StatusBadRequest, w.Code)
	})
	t.Run("other paths untouched", func(t *testing.T) {
		env := newTestEnv(t)
		rc := &receiver{}
		w := post(env.handler(t, rc), "/v1/logs", contentTypeProtobuf, protoBody(t, makeTraces(2, []int{0}, nil)))
		require.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, 2, rc.got[0].SpanCount(), "the guard reads span requests only")
	})
}

type traceServer struct {
	ptraceotlp.UnimplementedGRPCServer
	got []ptrace.Traces
}

func (s *traceServer) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	td := ptrace.NewTraces()
	req.Traces().CopyTo(td)
	s.got = append(s.got, td)
	return ptraceotlp.NewExportResponse(), nil
}

// Over OTLP/gRPC the same: the server gets the good spans, the client a partial success.
func TestGRPCRefusesTheBadSpanAlone(t *testing.T) {
	env := newTestEnv(t)
	opts, err := env.guard.GetGRPCServerOptions(context.Background())
	require.NoError(t, err)
	srv := grpc.NewServer(opts...)
	ts := &traceServer{}
	ptraceotlp.RegisterGRPCServer(srv, ts)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	resp, err := ptraceotlp.NewGRPCClient(conn).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(makeTraces(100, []int{0}, nil)))
	require.NoError(t, err)
	assert.Equal(t, int64(1), resp.PartialSuccess().RejectedSpans())
	assert.Contains(t, resp.PartialSuccess().ErrorMessage(), "span id")
	require.Len(t, ts.got, 1)
	assert.Len(t, spanIDs(ts.got[0]), 99)
	assert.False(t, spanIDs(ts.got[0])[pcommon.SpanID{}])

	// A good request passes without a partial success.
	resp, err = ptraceotlp.NewGRPCClient(conn).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(makeTraces(5, nil, nil)))
	require.NoError(t, err)
	assert.Zero(t, resp.PartialSuccess().RejectedSpans())
	assert.Equal(t, 5, ts.got[1].SpanCount())
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for _, tt := range []struct {
		id      component.ID
		path    string
		wantErr string
	}{
		{id: component.NewID(metadata.Type), path: "/v1/traces"},
		{id: component.NewIDWithName(metadata.Type, "custom_path"), path: "/otlp/v1/traces"},
		{id: component.NewIDWithName(metadata.Type, "relative"), wantErr: "absolute URL path"},
	} {
		t.Run(tt.id.String(), func(t *testing.T) {
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			cfg := createDefaultConfig()
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.path, cfg.TracesPath)
		})
	}
}
