package svcexporter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/svcexporter/internal/metadata"
)

func TestCreateDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	assert.Equal(t, metadata.Type, NewFactory().Type())
	assert.Equal(t, VersionCheckEnforce, cfg.ServerVersionCheck)
	assert.Empty(t, cfg.ClientConfig.Compression, "unset, so that the environment can decide")
	assert.Equal(t, 30*time.Second, cfg.ClientConfig.Timeout)
	assert.True(t, cfg.QueueConfig.HasValue())
	assert.True(t, cfg.RetryConfig.Enabled)
	assert.ErrorContains(t, cfg.Validate(), "endpoint must be set")
}

// fastRetry makes the exporterhelper retry at once and without a queue, so that ConsumeX returns
// only when the data is delivered or given up.
func fastRetry(cfg *Config) {
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.InitialInterval = time.Millisecond
	cfg.RetryConfig.MaxInterval = 5 * time.Millisecond
	cfg.RetryConfig.RandomizationFactor = 0
	cfg.RetryConfig.MaxElapsedTime = 10 * time.Second
}

// dedupingScores is a scores endpoint that stores by id, like the platform, and fails the
// requests whose numbers (1-based) are in fail with 503.
type dedupingScores struct {
	mu         sync.Mutex
	calls      int
	sizes      []int
	deliveries map[string]int
	fail       map[int]bool
}

func (d *dedupingScores) handle(w http.ResponseWriter, _ *http.Request, body []byte) {
	var batch []map[string]any
	if err := json.Unmarshal(body, &batch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	d.sizes = append(d.sizes, len(batch))
	if d.fail[d.calls] {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	for _, s := range batch {
		d.deliveries[s["id"].(string)]++
	}
	w.WriteHeader(http.StatusOK)
}

func TestScoresRetriedThroughTheExporterhelper(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	// The first request is accepted, the second meets an outage twice, then all goes through.
	store := &dedupingScores{deliveries: map[string]int{}, fail: map[int]bool{2: true, 3: true}}
	p.setScores(store.handle)
	cfg := testConfig(p.srv.URL)
	fastRetry(cfg)
	env := newTestEnv(t)
	exp, err := NewFactory().CreateLogs(context.Background(), env.settings, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })

	require.NoError(t, exp.ConsumeLogs(context.Background(), makeScores(250)))

	store.mu.Lock()
	defer store.mu.Unlock()
	assert.Equal(t, []int{100, 100, 100, 100, 50}, store.sizes,
		"chunk 1 once; chunk 2 three times (two 503s); then chunks 2 and 3 of what was left")
	require.Len(t, store.deliveries, 250)
	for id, n := range store.deliveries {
		assert.Equal(t, 1, n, "score %s stored once", id)
	}
}

func TestTracesRetriedThroughTheExporterhelper(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	var mu sync.Mutex
	calls := 0
	delivered := map[pcommon.SpanID]int{}
	p.setTraces(func(w http.ResponseWriter, _ *http.Request, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		switch calls {
		case 1:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		case 2:
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		for _, id := range spanIDs(t, decodeTraces(t, body)) {
			delivered[id]++
		}
		w.WriteHeader(http.StatusOK)
	})
	cfg := testConfig(p.srv.URL)
	fastRetry(cfg)
	exp, err := NewFactory().CreateTraces(context.Background(), newTestEnv(t).settings, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })

	td := makeTraces(2, 2, 5, 10)
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 3, calls)
	require.Len(t, delivered, 20)
	for id, n := range delivered {
		assert.Equal(t, 1, n, id.String())
	}
}

func TestPermanentErrorIsNotRetried(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	p.setScores(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		http.Error(w, `{"message":"body must be a JSON array"}`, http.StatusBadRequest)
	})
	cfg := testConfig(p.srv.URL)
	fastRetry(cfg)
	exp, err := NewFactory().CreateLogs(context.Background(), newTestEnv(t).settings, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })

	err = exp.ConsumeLogs(context.Background(), makeScores(3))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "body must be a JSON array")
	assert.Len(t, p.received(scoresPath), 1)
}

func TestStartFailsOnAnOlderPlatformUnderEnforce(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	p.setHealth(func(w http.ResponseWriter, _ *http.Request) { healthAnswer(w, "4.12.0") })
	creators := map[string]func(cfg *Config) (component.Component, error){
		"traces": func(cfg *Config) (component.Component, error) {
			return NewFactory().CreateTraces(context.Background(), newTestEnv(t).settings, cfg)
		},
		"logs": func(cfg *Config) (component.Component, error) {
			return NewFactory().CreateLogs(context.Background(), newTestEnv(t).settings, cfg)
		},
	}
	for _, create := range creators {
		exp, err := create(testConfig(p.srv.URL))
		require.NoError(t, err)
		err = exp.Start(context.Background(), componenttest.NewNopHost())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "4.12.0")
		assert.Contains(t, err.Error(), "4.59.0")
		require.NoError(t, exp.Shutdown(context.Background()))
	}
}

// TestSecretNeverLeaks drives every path that formats an error or a log line with a platform
// that echoes the credentials it gets, and looks for the secret everywhere.
func TestSecretNeverLeaks(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	echo := func(w http.ResponseWriter, r *http.Request) string {
		creds, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.Header.Get("Authorization"), "Basic "))
		return fmt.Sprintf("credentials %q refused (header %s)", creds, r.Header.Get("Authorization"))
	}
	p.setTraces(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		http.Error(w, echo(w, r), http.StatusUnauthorized)
	})
	p.setScores(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.WriteHeader(http.StatusMultiStatus)
		_, _ = fmt.Fprintf(w, `{"accepted":0,"rejected":1,"errors":[{"index":0,"message":"bad"}]}`)
	})
	p.setHealth(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, echo(w, r), http.StatusForbidden)
	})
	env := newTestEnv(t)
	cfg := testConfig(p.srv.URL)
	fastRetry(cfg)
	traces, err := NewFactory().CreateTraces(context.Background(), env.settings, cfg)
	require.NoError(t, err)
	require.NoError(t, traces.Start(context.Background(), componenttest.NewNopHost()))
	err = traces.ConsumeTraces(context.Background(), makeTraces(1, 1, 1, 1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refused the credentials")
	assert.Contains(t, err.Error(), "[REDACTED]", "the echoed secret is blanked")
	assert.NotContains(t, err.Error(), testSecretKey)
	assert.NotContains(t, err.Error(), base64.StdEncoding.EncodeToString([]byte(testPublicKey+":"+testSecretKey)))

	logs, err := NewFactory().CreateLogs(context.Background(), env.settings, cfg)
	require.NoError(t, err)
	require.NoError(t, logs.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, logs.ConsumeLogs(context.Background(), makeScores(1)))
	// Gone before the next exporter starts: it checks the version again (a reload).
	require.NoError(t, traces.Shutdown(context.Background()))
	require.NoError(t, logs.Shutdown(context.Background()))

	// The enforce failure names the endpoint and the versions, nothing of the credentials.
	p.setHealth(func(w http.ResponseWriter, _ *http.Request) { healthAnswer(w, "4.0.0") })
	old, err := NewFactory().CreateTraces(context.Background(), env.settings, cfg)
	require.NoError(t, err)
	err = old.Start(context.Background(), componenttest.NewNopHost())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), testSecretKey)
	require.NoError(t, old.Shutdown(context.Background()))

	text := allLogText(env.logs)
	require.NotEmpty(t, text)
	assert.NotContains(t, text, testSecretKey)
	assert.Contains(t, fmt.Sprintf("%+v", cfg), "[REDACTED]")
	assert.NotContains(t, fmt.Sprintf("%+v %v %#v", cfg, *cfg, cfg), testSecretKey)
}
