package e2e

import (
	"context"
	"net/url"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/readapi"
)

// The end-to-end tests run the built binary (SVC_OTELCOL_BIN) with the distribution's default
// configuration, distribution/config.yaml, against the local platform: what a user of the gateway
// gets. `make test` builds the binary and sets the variable.

const (
	testPublicKey = "pk-svc-e2e-public"
	// testSecretKey is long and distinctive so that a leak into any output is found by a search.
	testSecretKey = "sk-svc-e2e-8c1d4f0b9a7e4c2d"
)

// collectorBinary is the binary under test; the test is skipped when none was built.
func collectorBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("SVC_OTELCOL_BIN")
	if bin == "" {
		t.Skip("SVC_OTELCOL_BIN is not set: no collector binary to test (run `make e2e-test`)")
	}
	return bin
}

// gatewayOptions vary the default setup.
type gatewayOptions struct {
	// platformVersion is what the platform's health endpoint reports; default the minimum.
	platformVersion string
	// secretKey is the secret the collector is given; default the one the platform accepts.
	secretKey string
	// env is added to the collector's environment; sets are --set overrides of its config.
	env  []string
	sets []string
	// configs replace the default config file list.
	configs []string
	// platform reuses a running platform instead of starting one.
	platform *platform.Platform
}

// gateway is a local platform and a collector in front of it.
type gateway struct {
	platform  *platform.Platform
	collector *collector.Process
}

func startPlatform(t *testing.T, version string) *platform.Platform {
	t.Helper()
	p, err := platform.Start(platform.Options{PublicKey: testPublicKey, SecretKey: testSecretKey, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// collectorOptions are the collector.Options of a gateway in front of p.
func (o gatewayOptions) collectorOptions(t *testing.T, p *platform.Platform) collector.Options {
	secret := o.secretKey
	if secret == "" {
		secret = testSecretKey
	}
	configs := o.configs
	if len(configs) == 0 {
		configs = []string{collector.DefaultConfig()}
	}
	return collector.Options{
		Binary:  collectorBinary(t),
		Configs: configs,
		Sets:    o.sets,
		Env: append([]string{
			"SVC_ENDPOINT=" + p.URL(),
			"SVC_PUBLIC_KEY=" + testPublicKey,
			"SVC_SECRET_KEY=" + secret,
		}, o.env...),
	}
}

// startGateway starts the platform and the collector, and stops both when the test ends (the
// collector with SIGTERM, so that its queue drains; its output is logged if the test failed).
func startGateway(t *testing.T, o gatewayOptions) *gateway {
	t.Helper()
	p := o.platform
	if p == nil {
		p = startPlatform(t, o.platformVersion)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := collector.Start(ctx, o.collectorOptions(t, p))
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{platform: p, collector: c}
	t.Cleanup(func() { g.stop(t) })
	return g
}

func (g *gateway) stop(t *testing.T) {
	t.Helper()
	if err := g.collector.Stop(); err != nil {
		t.Errorf("collector stop: %v", err)
	}
	if t.Failed() {
		t.Logf("collector output:\n%s", g.collector.Logs())
	}
}

// tracerProvider sends spans to the collector over OTLP/HTTP, as an instrumented Go service
// would. Spans are exported when the caller flushes (ForceFlush), in requests of up to 512 spans.
func (g *gateway) tracerProvider(t *testing.T, serviceName string) *sdktrace.TracerProvider {
	t.Helper()
	return g.tracerProviderFor(t, resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(serviceName),
		semconv.TelemetrySDKLanguageGo, semconv.TelemetrySDKName("opentelemetry")))
}

// tracerProviderFor is tracerProvider with the given resource, e.g. one that says which SDK
// language sent the spans.
func (g *gateway) tracerProviderFor(t *testing.T, res *resource.Resource) *sdktrace.TracerProvider {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpoint(g.collector.OTLPHTTPEndpoint), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp,
		sdktrace.WithBatchTimeout(time.Hour), sdktrace.WithMaxExportBatchSize(512), sdktrace.WithMaxQueueSize(8192)))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// loggerProvider sends log records to the collector over OTLP/HTTP.
func (g *gateway) loggerProvider(t *testing.T) *sdklog.LoggerProvider {
	t.Helper()
	exp, err := otlploghttp.New(context.Background(),
		otlploghttp.WithEndpoint(g.collector.OTLPHTTPEndpoint), otlploghttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(exp, sdklog.WithExportInterval(time.Hour))))
	t.Cleanup(func() { _ = lp.Shutdown(context.Background()) })
	return lp
}

// flush exports what tp holds, failing the test when the collector refused it.
func flush(t *testing.T, tp interface{ ForceFlush(context.Context) error }) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatalf("export to the collector: %v", err)
	}
}

// readAPI is a client of the platform's read APIs with the project's keys.
func (g *gateway) readAPI() readapi.Client {
	return readapi.Client{BaseURL: g.platform.URL(), PublicKey: testPublicKey, SecretKey: testSecretKey}
}

// observations reads a trace's observations through the v2 observations API.
func (g *gateway) observations(t *testing.T, traceID string) []readapi.Observation {
	t.Helper()
	obs, err := g.readAPI().Observations(context.Background(), traceID, "")
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

// readScores reads scores through the v3 scores API.
func (g *gateway) readScores(t *testing.T, query url.Values) []readapi.Score {
	t.Helper()
	scores, err := g.readAPI().Scores(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	return scores
}

// waitForSpans waits until the platform holds n distinct spans, and until the requests that
// delivered them are in its request log.
func (g *gateway) waitForSpans(t *testing.T, n int) {
	t.Helper()
	g.waitStoredAndLogged(t, n, "spans", g.platform.WaitForSpans, platform.EndpointTraces,
		func(r platform.RequestRecord) int { return r.Spans })
}

// waitForScores waits until the platform holds n distinct scores, and until the requests that
// delivered them are in its request log.
func (g *gateway) waitForScores(t *testing.T, n int) {
	t.Helper()
	g.waitStoredAndLogged(t, n, "scores", g.platform.WaitForScores, platform.EndpointScores,
		func(r platform.RequestRecord) int { return r.Scores })
}

// waitStoredAndLogged waits for n stored items, then for the request log to account for them:
// the platform logs a request once it has answered it, just after storing what it carried.
func (g *gateway) waitStoredAndLogged(t *testing.T, n int, what string, waitStored func(context.Context, int) error,
	endpoint platform.Endpoint, items func(platform.RequestRecord) int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := waitStored(ctx, n); err != nil {
		t.Fatalf("%v (platform stats: %+v)", err, g.platform.Stats())
	}
	logged := func() bool {
		total := 0
		for _, r := range g.platform.Requests(endpoint) {
			total += items(r)
		}
		return total >= n
	}
	if !eventually(10*time.Second, logged) {
		t.Fatalf("the platform stored %d %s but did not log the requests that delivered them", n, what)
	}
}

// eventually polls cond until it holds or the timeout passes, for conditions that are not
// platform state (which WaitUntil watches), such as the collector's output.
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cond()
}

func derefOrEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
