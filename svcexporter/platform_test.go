package svcexporter

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/svc/svc-collector/svcexporter/internal/metadatatest"
)

// Credentials of the tests. The secret is distinctive so that a leak is easy to find.
const (
	testPublicKey = "pk-lf-test-public"
	testSecretKey = "sk-lf-TOP-SECRET-5f1e"
	testVersion   = "1.2.3"
)

// recordedRequest is one request the fake platform received, body decompressed.
type recordedRequest struct {
	method  string
	path    string
	header  http.Header
	body    []byte
	gzipped bool
	rawLen  int
}

// fakePlatform is an httptest server on 127.0.0.1 standing in for the svc platform. Each
// endpoint answers with its handler (default: success), after the request is recorded.
type fakePlatform struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests []recordedRequest

	// handlers by path; they get the decompressed body.
	traces func(w http.ResponseWriter, r *http.Request, body []byte)
	scores func(w http.ResponseWriter, r *http.Request, body []byte)
	health func(w http.ResponseWriter, r *http.Request)
}

func newFakePlatform(t *testing.T) *fakePlatform {
	t.Helper()
	p := &fakePlatform{
		traces: func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusOK) },
		scores: func(w http.ResponseWriter, _ *http.Request, body []byte) {
			var batch []json.RawMessage
			_ = json.Unmarshal(body, &batch)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"accepted":`+strconv.Itoa(len(batch))+`}`)
		},
		health: func(w http.ResponseWriter, _ *http.Request) { healthAnswer(w, "4.59.0") },
	}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func healthAnswer(w http.ResponseWriter, version string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"status":"OK","version":"`+version+`"}`)
}

func (p *fakePlatform) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	rec := recordedRequest{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: raw, rawLen: len(raw)}
	if r.Header.Get("Content-Encoding") == "gzip" {
		rec.gzipped = true
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			http.Error(w, "bad gzip", http.StatusBadRequest)
			return
		}
		rec.body, err = io.ReadAll(zr)
		if err != nil {
			http.Error(w, "bad gzip", http.StatusBadRequest)
			return
		}
	}
	p.mu.Lock()
	p.requests = append(p.requests, rec)
	traces, scores, health := p.traces, p.scores, p.health
	p.mu.Unlock()
	// By suffix: the platform may live below a base path.
	switch path := r.URL.Path; {
	case strings.HasSuffix(path, tracesPath):
		traces(w, r, rec.body)
	case strings.HasSuffix(path, scoresPath):
		scores(w, r, rec.body)
	case strings.HasSuffix(path, healthPath):
		health(w, r)
	default:
		http.NotFound(w, r)
	}
}

// received returns the recorded requests to path.
func (p *fakePlatform) received(path string) []recordedRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []recordedRequest
	for _, r := range p.requests {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

func (p *fakePlatform) setTraces(h func(w http.ResponseWriter, r *http.Request, body []byte)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.traces = h
}

func (p *fakePlatform) setScores(h func(w http.ResponseWriter, r *http.Request, body []byte)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scores = h
}

func (p *fakePlatform) setHealth(h func(w http.ResponseWriter, r *http.Request)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.health = h
}

// testConfig is a config for the platform at endpoint, with compression left to the
// environment as by default.
func testConfig(endpoint string) *Config {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.ClientConfig.Endpoint = endpoint
	cfg.PublicKey = testPublicKey
	cfg.SecretKey = testSecretKey
	return cfg
}

// testEnv is what a test needs to look at an exporter's effects.
type testEnv struct {
	telemetry *componenttest.Telemetry
	logs      *observer.ObservedLogs
	settings  exporter.Settings
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	core, logs := observer.New(zap.DebugLevel)
	set := metadatatest.NewSettings(tel)
	set.Logger = zap.New(core)
	set.BuildInfo.Version = testVersion
	return &testEnv{telemetry: tel, logs: logs, settings: set}
}

// startExporter builds and starts the exporter core (no exporterhelper around it), so that a
// test sees exactly what one push returns.
func startExporter(t *testing.T, env *testEnv, cfg *Config) *svcExporter {
	t.Helper()
	require.NoError(t, cfg.Validate())
	exp, err := newSvcExporter(cfg, env.settings)
	require.NoError(t, err)
	require.NoError(t, exp.start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.shutdown(context.Background())) })
	return exp
}

// clearCompressionEnv makes a test independent of the compression variables of the machine.
func clearCompressionEnv(t *testing.T) {
	for _, name := range compressionEnvVars {
		t.Setenv(name, "")
	}
}

// decodeTraces reads an OTLP/protobuf trace request body.
func decodeTraces(t *testing.T, body []byte) ptrace.Traces {
	t.Helper()
	req := ptraceotlp.NewExportRequest()
	require.NoError(t, req.UnmarshalProto(body))
	return req.Traces()
}

// allLogText is every logged message and field, to search for leaks.
func allLogText(logs *observer.ObservedLogs) string {
	var b strings.Builder
	for _, e := range logs.All() {
		b.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			b.WriteString(" " + k + "=")
			b.WriteString(strings.TrimSpace(toString(v)))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case error:
		return x.Error()
	default:
		out, _ := json.Marshal(x)
		return string(out)
	}
}
