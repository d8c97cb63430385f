package svcexporter

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// tenant is one project sending through a pass-through gateway.
type tenant struct{ publicKey, secretKey string }

func (tn tenant) authorization() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(tn.publicKey+":"+tn.secretKey))
}

// ctx is the context a receiver with include_metadata hands on for a request of tn.
func (tn tenant) ctx() context.Context {
	return client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{
		"authorization": {tn.authorization()},
		"content-type":  {"application/x-protobuf"},
	})})
}

var (
	tenantA = tenant{"pk-lf-team-a", "sk-lf-SECRET-A-91c2"}
	tenantB = tenant{"pk-lf-team-b", "sk-lf-SECRET-B-37d4"}
)

func passThroughConfig(endpoint string) *Config {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.ClientConfig.Endpoint = endpoint
	cfg.PassThrough = true
	return cfg
}

// tenantTraces are n spans whose resource names the tenant, so the platform side can check that a
// request's spans all belong to the request's credentials.
func tenantTraces(tn tenant, n int) ptrace.Traces {
	td := makeTraces(1, 1, n, 0)
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("tenant", tn.publicKey)
	return td
}

func TestPassThroughSendsEachPushWithItsRequestsCredentials(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	env := newTestEnv(t)
	exp := startExporter(t, env, passThroughConfig(p.srv.URL))

	for _, tn := range []tenant{tenantA, tenantB, tenantA} {
		require.NoError(t, exp.pushTraces(tn.ctx(), tenantTraces(tn, 3)))
		require.NoError(t, exp.pushScores(tn.ctx(), makeScores(2)))
	}
	health := p.received(healthPath)
	require.Len(t, health, 1)
	assert.Empty(t, health[0].header.Get("Authorization"), "a pass-through gateway has no keys of its own to send")

	for _, path := range []string{tracesPath, scoresPath} {
		reqs := p.received(path)
		require.Len(t, reqs, 3, path)
		for i, want := range []tenant{tenantA, tenantB, tenantA} {
			assert.Equal(t, want.authorization(), reqs[i].header.Get("Authorization"), "%s request %d", path, i)
			assert.Equal(t, want.publicKey, reqs[i].header.Get("x-svc-public-key"), "%s request %d", path, i)
		}
	}
}

func TestPassThroughRefusesDataWithoutCredentials(t *testing.T) {
	tests := []struct {
		name string
		ctx  context.Context
	}{
		{name: "no client info (receiver without include_metadata)", ctx: context.Background()},
		{name: "bearer token", ctx: client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{"authorization": {"Bearer " + tenantA.secretKey}})})},
		{name: "two tenants' credentials", ctx: client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{"authorization": {tenantA.authorization(), tenantB.authorization()}})})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearCompressionEnv(t)
			p := newFakePlatform(t)
			env := newTestEnv(t)
			exp := startExporter(t, env, passThroughConfig(p.srv.URL))

			errTraces := exp.pushTraces(tt.ctx, tenantTraces(tenantA, 2))
			errScores := exp.pushScores(tt.ctx, makeScores(2))
			for _, err := range []error{errTraces, errScores} {
				require.Error(t, err)
				assert.True(t, consumererror.IsPermanent(err), "no credentials will not appear on a retry: %v", err)
				assert.Contains(t, err.Error(), "include_metadata")
				assert.NotContains(t, err.Error(), tenantA.secretKey)
			}
			assert.Empty(t, p.received(tracesPath))
			assert.Empty(t, p.received(scoresPath))
			assert.NotContains(t, allLogText(env.logs), tenantA.secretKey)
			assert.Equal(t, 2, env.logs.FilterMessageSnippet("came without credentials").Len())
		})
	}
}

func TestPassThroughRefusedCredentialsAreCountedAndLoggedPerPublicKey(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	// The platform revoked tenant B's keys: 403 for B, 401 for B's scores, 200 for A.
	p.setTraces(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if r.Header.Get("x-svc-public-key") == tenantB.publicKey {
			http.Error(w, "key revoked: "+r.Header.Get("Authorization"), http.StatusForbidden) // a server echoing the credentials
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	p.setScores(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if r.Header.Get("x-svc-public-key") == tenantB.publicKey {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	env := newTestEnv(t)
	exp := startExporter(t, env, passThroughConfig(p.srv.URL))

	require.NoError(t, exp.pushTraces(tenantA.ctx(), tenantTraces(tenantA, 2)))
	errB := exp.pushTraces(tenantB.ctx(), tenantTraces(tenantB, 2))
	require.Error(t, errB)
	assert.True(t, consumererror.IsPermanent(errB))
	assert.Contains(t, errB.Error(), `public key "pk-lf-team-b"`)
	errB = exp.pushScores(tenantB.ctx(), makeScores(2))
	require.Error(t, errB)
	require.NoError(t, exp.pushScores(tenantA.ctx(), makeScores(2)))

	text := allLogText(env.logs) + errB.Error()
	for _, secret := range []string{tenantB.secretKey, strings.TrimPrefix(tenantB.authorization(), "Basic ")} {
		assert.NotContains(t, text, secret)
	}
	assert.Contains(t, allLogText(env.logs), "pk-lf-team-b")

	got, err := env.telemetry.GetMetric("otelcol_exporter_svc_credentials_refused")
	require.NoError(t, err)
	counts := map[string]int64{}
	for _, dp := range got.Data.(metricdata.Sum[int64]).DataPoints {
		pk, _ := dp.Attributes.Value(attrPublicKey)
		code, _ := dp.Attributes.Value(attrStatusCode)
		counts[fmt.Sprintf("%s/%d", pk.AsString(), code.AsInt64())] += dp.Value
	}
	assert.Equal(t, map[string]int64{"pk-lf-team-b/403": 1, "pk-lf-team-b/401": 1}, counts)
}

// TestPassThroughBatchesNeverMixTenants runs the exporterhelper's queue with batching on, two
// tenants sending at once: every request the platform receives holds the spans of one tenant,
// sent with that tenant's credentials, although the config asks for no partitioning.
func TestPassThroughBatchesNeverMixTenants(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	var mu sync.Mutex
	mixed := []string{}
	spans := map[string]int{}
	p.setTraces(func(w http.ResponseWriter, r *http.Request, body []byte) {
		td := decodeTraces(t, body)
		mu.Lock()
		defer mu.Unlock()
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			owner, _ := rs.Resource().Attributes().Get("tenant")
			if owner.Str() != r.Header.Get("x-svc-public-key") {
				mixed = append(mixed, fmt.Sprintf("%s's spans sent with %s's key", owner.Str(), r.Header.Get("x-svc-public-key")))
			}
			spans[owner.Str()] += rs.ScopeSpans().At(0).Spans().Len()
		}
		w.WriteHeader(http.StatusOK)
	})
	cfg := batchingPassThroughConfig(p.srv.URL)
	env := newTestEnv(t)
	exp, err := NewFactory().CreateTraces(context.Background(), env.settings, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))

	var wg sync.WaitGroup
	for _, tn := range []tenant{tenantA, tenantB} {
		wg.Go(func() {
			for range 20 {
				assert.NoError(t, exp.ConsumeTraces(tn.ctx(), tenantTraces(tn, 5)))
			}
		})
	}
	wg.Wait()
	require.NoError(t, exp.Shutdown(context.Background())) // flushes the batches
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, mixed)
	assert.Equal(t, map[string]int{tenantA.publicKey: 100, tenantB.publicKey: 100}, spans)
	assert.Less(t, len(p.received(tracesPath)), 40, "spans were batched (fewer requests than pushes)")
}

// batchingPassThroughConfig is a pass-through exporter whose queue batches: every batch is a flush
// of what the tenants sent within 50 ms.
func batchingPassThroughConfig(endpoint string) *Config {
	cfg := passThroughConfig(endpoint)
	q := exporterhelper.NewDefaultQueueConfig()
	b := exporterhelper.NewDefaultBatchConfig()
	b.FlushTimeout = 50 * time.Millisecond
	b.MinSize = 1000 // never reached: every batch is a flush of what both tenants sent meanwhile
	q.Batch = configoptional.Some(b)
	cfg.QueueConfig = configoptional.Some(q)
	return cfg
}

// The public keys counted by exporter_svc_credentials_refused are bounded: a gateway that lets in
// any well-formed key pair must not grow a metric series per random key for as long as it runs.
func TestRefusedPublicKeysAreBounded(t *testing.T) {
	e := &svcExporter{}
	for i := range maxRefusedKeys {
		assert.Equal(t, fmt.Sprintf("pk-%d", i), e.refusedLabel(fmt.Sprintf("pk-%d", i)))
	}
	assert.Equal(t, otherPublicKeys, e.refusedLabel("pk-one-too-many"))
	assert.Equal(t, "pk-7", e.refusedLabel("pk-7"), "a key already counted keeps its series")
}
