package svcexporter

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/zap/zapcore"
)

func TestServerVersionCheck(t *testing.T) {
	clearCompressionEnv(t)
	answer := func(status int, body string) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		}
	}
	version := func(v string) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, _ *http.Request) { healthAnswer(w, v) }
	}
	tests := []struct {
		name        string
		mode        ServerVersionCheck
		health      func(w http.ResponseWriter, r *http.Request)
		unreachable bool
		wantErr     []string
		wantWarn    string // a part of the warning's message
		wantNoCall  bool
	}{
		{name: "enforce, minimum", mode: VersionCheckEnforce, health: version("4.59.0")},
		{name: "enforce, newer minor", mode: VersionCheckEnforce, health: version("4.60.1")},
		{name: "enforce, newer major", mode: VersionCheckEnforce, health: version("5.0.0")},
		{name: "enforce, v prefix", mode: VersionCheckEnforce, health: version("v4.59.2")},
		{name: "enforce, older patch level", mode: VersionCheckEnforce, health: version("4.58.9"),
			wantErr: []string{"reports version 4.58.9", "older than the minimum 4.59.0", "server_version_check"}},
		{name: "enforce, version 3", mode: VersionCheckEnforce, health: version("3.120.0"),
			wantErr: []string{"3.120.0", "4.59.0"}},
		{name: "enforce, pre-release of the minimum", mode: VersionCheckEnforce, health: version("4.59.0-rc.1"),
			wantErr: []string{"4.59.0-rc.1"}},
		{name: "warn, older", mode: VersionCheckWarn, health: version("4.10.0"), wantWarn: "older than the minimum version"},
		{name: "warn, newer", mode: VersionCheckWarn, health: version("4.59.0")},
		{name: "off, older, no request", mode: VersionCheckOff, health: version("2.0.0"), wantNoCall: true},
		{name: "enforce, platform unreachable", mode: VersionCheckEnforce, unreachable: true, wantWarn: "Could not check the svc platform version"},
		{name: "enforce, 500", mode: VersionCheckEnforce, health: answer(http.StatusInternalServerError, "db down"), wantWarn: "Could not check"},
		{name: "enforce, not JSON", mode: VersionCheckEnforce, health: answer(http.StatusOK, "<html>"), wantWarn: "Could not check"},
		{name: "enforce, no version", mode: VersionCheckEnforce, health: answer(http.StatusOK, `{"status":"OK"}`), wantWarn: "Could not check"},
		{name: "enforce, unreadable version", mode: VersionCheckEnforce, health: answer(http.StatusOK, `{"status":"OK","version":"latest"}`), wantWarn: "Could not check"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newFakePlatform(t)
			if tt.health != nil {
				p.setHealth(tt.health)
			}
			if tt.unreachable {
				p.srv.Close()
			}
			env := newTestEnv(t)
			cfg := testConfig(p.srv.URL)
			cfg.ServerVersionCheck = tt.mode
			exp, err := newSvcExporter(cfg, env.settings)
			require.NoError(t, err)
			err = exp.start(context.Background(), componenttest.NewNopHost())
			t.Cleanup(func() { require.NoError(t, exp.shutdown(context.Background())) })

			if len(tt.wantErr) > 0 {
				require.Error(t, err)
				for _, part := range tt.wantErr {
					assert.Contains(t, err.Error(), part)
				}
				assert.NotContains(t, err.Error(), testSecretKey)
			} else {
				require.NoError(t, err)
			}
			warnings := env.logs.FilterLevelExact(zapcore.WarnLevel).All()
			if tt.wantWarn != "" {
				require.Len(t, warnings, 1)
				assert.Contains(t, warnings[0].Message, tt.wantWarn)
				assert.Equal(t, MinServerVersion, warnings[0].ContextMap()["required_version"])
			} else {
				assert.Empty(t, warnings)
			}
			if !tt.unreachable {
				calls := p.received(healthPath)
				if tt.wantNoCall {
					assert.Empty(t, calls)
				} else {
					require.Len(t, calls, 1)
					assert.Equal(t, http.MethodGet, calls[0].method)
					assert.True(t, strings.HasPrefix(calls[0].header.Get("User-Agent"), "svc-otelcol/"), "the gateway names itself")
					assert.Empty(t, calls[0].header.Values("X-Svc-Sdk-Name"), "the gateway is no SDK")
				}
			}
		})
	}
}

func TestServerVersionCheckWarnNamesBothVersions(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	p.setHealth(func(w http.ResponseWriter, _ *http.Request) { healthAnswer(w, "4.40.0") })
	env := newTestEnv(t)
	cfg := testConfig(p.srv.URL)
	cfg.ServerVersionCheck = VersionCheckWarn
	startExporter(t, env, cfg)
	warnings := env.logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warnings, 1)
	assert.Equal(t, "4.40.0", warnings[0].ContextMap()["found_version"])
	assert.Equal(t, "4.59.0", warnings[0].ContextMap()["required_version"])
}

// The collector builds a traces and a logs exporter from one `svc` config: the platform's
// version is asked once for both, and again only once both are gone (a config reload).
func TestServerVersionCheckRunsOncePerPlatformAndCredentials(t *testing.T) {
	clearCompressionEnv(t)
	tests := []struct {
		name string
		// second changes the config of the second exporter; nil: the same config.
		second    func(cfg *Config)
		wantCalls int
	}{
		{name: "same endpoint and credentials", wantCalls: 1},
		{name: "other credentials", second: func(cfg *Config) { cfg.SecretKey = "sk-lf-other" }, wantCalls: 2},
		{name: "other endpoint", second: func(cfg *Config) { cfg.ClientConfig.Endpoint += "/base" }, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newFakePlatform(t)
			p.setHealth(func(w http.ResponseWriter, _ *http.Request) { healthAnswer(w, "4.40.0") }) // older: warns
			env := newTestEnv(t)
			ctx := context.Background()
			newConfig := func() *Config {
				cfg := testConfig(p.srv.URL)
				cfg.ServerVersionCheck = VersionCheckWarn
				return cfg
			}
			secondCfg := newConfig()
			if tt.second != nil {
				tt.second(secondCfg)
			}
			traces, err := NewFactory().CreateTraces(ctx, env.settings, newConfig())
			require.NoError(t, err)
			logs, err := NewFactory().CreateLogs(ctx, env.settings, secondCfg)
			require.NoError(t, err)
			require.NoError(t, traces.Start(ctx, componenttest.NewNopHost()))
			require.NoError(t, logs.Start(ctx, componenttest.NewNopHost()))
			assert.Equal(t, tt.wantCalls, healthChecks(p))
			if tt.second == nil {
				assert.Len(t, env.logs.FilterMessageSnippet("older than the minimum").All(), 1, "warned once")
			}

			// A reload: both shut down, a new pair checks again, once.
			require.NoError(t, traces.Shutdown(ctx))
			require.NoError(t, logs.Shutdown(ctx))
			again, err := NewFactory().CreateTraces(ctx, env.settings, newConfig())
			require.NoError(t, err)
			require.NoError(t, again.Start(ctx, componenttest.NewNopHost()))
			require.NoError(t, again.Shutdown(ctx))
			assert.Equal(t, tt.wantCalls+1, healthChecks(p))
		})
	}
}

func TestServerVersionCheckEnforceFailsEveryExporterOfThePlatform(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	p.setHealth(func(w http.ResponseWriter, _ *http.Request) { healthAnswer(w, "4.40.0") })
	env := newTestEnv(t)
	ctx := context.Background()
	traces, err := NewFactory().CreateTraces(ctx, env.settings, testConfig(p.srv.URL))
	require.NoError(t, err)
	logs, err := NewFactory().CreateLogs(ctx, env.settings, testConfig(p.srv.URL))
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, traces.Shutdown(ctx))
		require.NoError(t, logs.Shutdown(ctx))
	})
	assert.ErrorContains(t, traces.Start(ctx, componenttest.NewNopHost()), "4.40.0")
	assert.ErrorContains(t, logs.Start(ctx, componenttest.NewNopHost()), "4.40.0")
	assert.Len(t, p.received(healthPath), 1)
}

// healthChecks counts the version checks the platform received, below any base path.
func healthChecks(p *fakePlatform) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.requests {
		if strings.HasSuffix(r.path, healthPath) {
			n++
		}
	}
	return n
}
