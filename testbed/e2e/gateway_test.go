package e2e

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/readapi"
	"github.com/svc/svc-collector/testbed/workload"
)

// Tests of the distribution as a whole (issue 2): it holds our components, loads the default
// config, delivers GenAI traces compressed as the SDKs do, refuses bad credentials and old
// platforms clearly, and never prints the secret.

func TestComponentsListOurComponents(t *testing.T) {
	out, err := collector.Run(context.Background(), collectorBinary(t), nil, "components")
	if err != nil {
		t.Fatalf("components: %v\n%s", err, out)
	}
	for _, name := range []string{"name: svc\n", "name: svcspanfilter\n", "name: svcmetadata\n", "name: svcscore\n", "name: otlp\n", "name: file_storage\n", "name: svc_file_storage\n",
		"name: svcauth\n", "name: bearertokenauth\n", "name: filter\n"} {
		if !strings.Contains(out, name) {
			t.Errorf("`svc-otelcol components` does not list %q", strings.TrimSpace(name))
		}
	}
}

func TestDeliversGenAISpansOfAnAgentTrace(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tp := g.tracerProvider(t, "support-agent")
	sent := workload.EmitAgentTrace(context.Background(), tp, workload.AgentOptions{Seed: 1})
	flush(t, tp)
	g.waitForSpans(t, len(sent.GenAISpans))

	traceID := hex.EncodeToString(sent.TraceID[:])
	obs := withSpanNames(g.observations(t, traceID), sent.GenAISpans)
	byName := map[string]readapi.Observation{}
	for _, o := range obs {
		byName[o.Name] = o
	}
	for name, spanID := range sent.GenAISpans {
		o, ok := byName[name]
		if !ok {
			t.Errorf("GenAI span %q did not reach the platform", name)
			continue
		}
		if o.ID != hex.EncodeToString(spanID[:]) {
			t.Errorf("span %q arrived with id %s, sent %x", name, o.ID, spanID)
		}
	}
	if len(obs) != len(sent.GenAISpans) {
		t.Errorf("platform has %d observations of the trace, want only the %d GenAI spans of %d sent", len(obs), len(sent.GenAISpans), sent.TotalSpans)
	}
	if o := byName[workload.SpanAnswer]; o.Type != "GENERATION" || derefOrEmpty(o.Model) == "" {
		t.Errorf("LLM span arrived as type %q model %q, want a GENERATION with its model", o.Type, derefOrEmpty(o.Model))
	}
	for _, r := range g.platform.Requests(platform.EndpointTraces) {
		// The gateway is no SDK: it names none, and the spans it forwards (current SDK majors and
		// third-party instrumentations) are written at once by the ingestion-version header.
		if r.SDKName != "" || r.SDKVersion != "" || r.WritePath != platform.WritePathDirect || r.WritePathRule != platform.RuleHeaders {
			t.Errorf("traces request came as SDK %q %q, written %s by rule %d; want no SDK headers, written direct by the header (rule %d)",
				r.SDKName, r.SDKVersion, r.WritePath, r.WritePathRule, platform.RuleHeaders)
		}
	}
}

// TestCompression: span batches are gzip-compressed unless the config or, when the config does
// not say, the environment (SVC_OTEL_COMPRESSION, then OTEL_EXPORTER_OTLP_TRACES_COMPRESSION,
// then OTEL_EXPORTER_OTLP_COMPRESSION) says none (docs/contract.md §4).
func TestCompression(t *testing.T) {
	tests := []struct {
		name     string
		env      []string
		sets     []string
		wantGzip bool
	}{
		{name: "default is gzip", wantGzip: true},
		{name: "config none", sets: []string{"exporters::svc::compression=none"}, wantGzip: false},
		{name: "SVC_OTEL_COMPRESSION none", env: []string{"SVC_OTEL_COMPRESSION=none"}, wantGzip: false},
		{name: "traces variable none", env: []string{"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=none"}, wantGzip: false},
		{name: "generic variable none", env: []string{"OTEL_EXPORTER_OTLP_COMPRESSION=none"}, wantGzip: false},
		{
			name:     "SVC_OTEL_COMPRESSION wins over the OTLP variables",
			env:      []string{"SVC_OTEL_COMPRESSION=gzip", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=none", "OTEL_EXPORTER_OTLP_COMPRESSION=none"},
			wantGzip: true,
		},
		{
			name:     "traces variable wins over the generic one",
			env:      []string{"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=none", "OTEL_EXPORTER_OTLP_COMPRESSION=gzip"},
			wantGzip: false,
		},
		{
			name:     "config wins over the environment",
			env:      []string{"SVC_OTEL_COMPRESSION=none"},
			sets:     []string{"exporters::svc::compression=gzip"},
			wantGzip: true,
		},
	}
	p := startPlatform(t, "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.Reset()
			g := startGateway(t, gatewayOptions{platform: p, env: tt.env, sets: tt.sets})
			tp := g.tracerProvider(t, "support-agent")
			sent := workload.EmitAgentTrace(context.Background(), tp, workload.AgentOptions{Seed: 2, IOBytes: 8 << 10})
			flush(t, tp)
			g.waitForSpans(t, len(sent.GenAISpans))
			requests := p.Requests(platform.EndpointTraces)
			if len(requests) == 0 {
				t.Fatal("no traces request reached the platform")
			}
			for _, r := range requests {
				if r.Gzip != tt.wantGzip {
					t.Errorf("traces request gzip=%v (Content-Encoding %q, %d bytes sent, %d decoded), want gzip=%v",
						r.Gzip, r.ContentEncoding, r.BodyBytes, r.DecodedBytes, tt.wantGzip)
				}
			}
		})
	}
}

// TestBadCredentialsGiveAClearErrorWithoutTheSecret: the platform answers 401; the collector
// says the credentials were refused, names the public key, and prints the secret nowhere, even
// at debug level.
func TestBadCredentialsGiveAClearErrorWithoutTheSecret(t *testing.T) {
	const wrongSecret = "sk-svc-e2e-wrong-5f2a9c7d"
	g := startGateway(t, gatewayOptions{
		secretKey: wrongSecret,
		sets:      []string{"service::telemetry::logs::level=debug"},
	})
	tp := g.tracerProvider(t, "support-agent")
	workload.EmitAgentTrace(context.Background(), tp, workload.AgentOptions{Seed: 3})
	flush(t, tp)

	if !eventually(30*time.Second, func() bool { return strings.Contains(g.collector.Logs(), "refused the credentials") }) {
		t.Fatal("collector never said the credentials were refused")
	}
	if got := g.platform.Stats().UniqueSpans; got != 0 {
		t.Errorf("platform stored %d spans sent with a wrong secret", got)
	}
	logs := g.collector.Logs()
	if !strings.Contains(logs, testPublicKey) {
		t.Errorf("the credentials error does not name the public key %q", testPublicKey)
	}
	if strings.Contains(logs, wrongSecret) {
		t.Errorf("the collector's output contains the secret key")
	}
}

// TestOldPlatform: a platform older than 4.59.0 is refused at start with a message that names
// both versions, unless server_version_check says warn.
func TestOldPlatform(t *testing.T) {
	p := startPlatform(t, "4.58.3")
	opts := gatewayOptions{platform: p}.collectorOptions(t, p)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"--config", collector.DefaultConfig(),
		"--set", "receivers::otlp::protocols::grpc::endpoint=127.0.0.1:0",
		"--set", "receivers::otlp::protocols::http::endpoint=127.0.0.1:0",
		"--set", "extensions::health_check::endpoint=127.0.0.1:0"}
	env := append(opts.Env, "SVC_METRICS_HOST=127.0.0.1", "SVC_METRICS_PORT=0")
	out, err := collector.Run(ctx, opts.Binary, env, args...)
	if err == nil {
		t.Fatalf("collector started against platform 4.58.3; output:\n%s", out)
	}
	if ctx.Err() != nil {
		t.Fatalf("collector did not stop by itself against platform 4.58.3")
	}
	for _, want := range []string{"4.58.3", "4.59.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("start failure does not name version %s:\n%s", want, out)
		}
	}

	t.Run("warn starts anyway", func(t *testing.T) {
		g := startGateway(t, gatewayOptions{platform: p, sets: []string{"exporters::svc::server_version_check=warn"}})
		if !strings.Contains(g.collector.Logs(), "4.58.3") {
			t.Errorf("no warning naming the old version in:\n%s", g.collector.Logs())
		}
	})
}

// TestConfigErrorsNameTheKey: a config with an unknown or invalid key fails to load, and the
// message says which key.
func TestConfigErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name string
		set  string
		want string
	}{
		{name: "unknown exporter key", set: "exporters::svc::secret_kye=x", want: "secret_kye"},
		{name: "unknown filter key", set: "processors::svcspanfilter::sample_ratio=0.5", want: "sample_ratio"},
		{name: "unknown metadata key", set: "processors::svcmetadata::encodings=all", want: "encodings"},
		{name: "unknown connector key", set: "connectors::svcscore::rate=1", want: "rate"},
		{name: "invalid version check", set: "exporters::svc::server_version_check=sometimes", want: "server_version_check"},
		{name: "invalid sample rate", set: "processors::svcspanfilter::sample_rate=1.5", want: "sample_rate"},
	}
	p := startPlatform(t, "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := gatewayOptions{platform: p}.collectorOptions(t, p)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, err := collector.Run(ctx, opts.Binary, opts.Env, "validate", "--config", collector.DefaultConfig(), "--set", tt.set)
			if err == nil {
				t.Fatalf("config with %s loaded; output:\n%s", tt.set, out)
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("error does not name %q:\n%s", tt.want, out)
			}
			if strings.Contains(out, testSecretKey) {
				t.Errorf("config error output contains the secret key")
			}
		})
	}
}

// TestDistributionConfigsLoad: the default config and every example overlay in distribution/
// load in the built binary, so the documented commands work as written.
// wholeConfig reports whether an example is a complete configuration (it defines its own
// receivers and pipelines) rather than an overlay on distribution/config.yaml (which may add
// receivers, as receiver-token.yaml does, or pipelines, as evaluators.yaml does, but not both).
func wholeConfig(t *testing.T, path string) bool {
	if path == "" {
		return false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := "\n" + string(b)
	return strings.Contains(text, "\nreceivers:") && strings.Contains(text, "\n  pipelines:")
}

func TestDistributionConfigsLoad(t *testing.T) {
	bin := collectorBinary(t)
	overlays, err := filepath.Glob(filepath.Join(collector.RepoRoot(), "distribution", "examples", "*.yaml"))
	if err != nil || len(overlays) == 0 {
		t.Fatalf("no example overlays found: %v", err)
	}
	env := []string{"SVC_ENDPOINT=http://127.0.0.1:1", "SVC_PUBLIC_KEY=" + testPublicKey,
		"SVC_SECRET_KEY=" + testSecretKey, "SVC_STORAGE_DIR=" + t.TempDir(),
		// What the multi-team examples need besides (issue 11); validate reads no files.
		"SVC_GATEWAY_TOKEN=gw-token", "SVC_TLS_CERT_FILE=/dev/null", "SVC_TLS_KEY_FILE=/dev/null",
		"SVC_TEAM_A_PUBLIC_KEY=pk-a", "SVC_TEAM_A_SECRET_KEY=sk-a", "SVC_TEAM_B_PUBLIC_KEY=pk-b", "SVC_TEAM_B_SECRET_KEY=sk-b"}
	for _, overlay := range append([]string{""}, overlays...) {
		name := filepath.Base(overlay)
		if overlay == "" {
			name = "config.yaml"
		}
		t.Run(name, func(t *testing.T) {
			args := []string{"validate", "--config", collector.DefaultConfig()}
			if overlay != "" {
				args = append(args, "--config", overlay)
			}
			if wholeConfig(t, overlay) {
				// A complete gateway (it has its own pipelines): loaded alone.
				args = []string{"validate", "--config", overlay}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if out, err := collector.Run(ctx, bin, env, args...); err != nil {
				t.Errorf("%s does not load: %v\n%s", name, err, out)
			}
		})
	}
}
