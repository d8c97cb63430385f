package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/readapi"
	"github.com/svc/svc-collector/testbed/workload"
)

// Tests of the multi-tenant gateway (issue 11): distribution/examples/multi-tenant.yaml, where
// each client sends its own project's keys and the gateway holds none (pass-through).

// Projects of the tests. The secrets are distinctive, so that a leak into any log line is found.
var (
	teamA = platform.ProjectKeys{PublicKey: "pk-svc-e2e-team-a", SecretKey: "sk-svc-e2e-A-3f9b1c7d2e"}
	teamB = platform.ProjectKeys{PublicKey: "pk-svc-e2e-team-b", SecretKey: "sk-svc-e2e-B-8a2d6e4f1c"}
	teamC = platform.ProjectKeys{PublicKey: "pk-svc-e2e-team-c", SecretKey: "sk-svc-e2e-C-5c7e9a1b3d"}
)

func basicAuth(k platform.ProjectKeys) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(k.PublicKey+":"+k.SecretKey))
}

// secretsOf are the forms in which a project's secret could leak: the secret, and the encoded
// credentials that carry it.
func secretsOf(keys ...platform.ProjectKeys) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.SecretKey, strings.TrimPrefix(basicAuth(k), "Basic "))
	}
	return out
}

func multiTenantConfig() string {
	return filepath.Join(collector.RepoRoot(), "distribution", "examples", "multi-tenant.yaml")
}

func startProjects(t *testing.T, keys ...platform.ProjectKeys) *platform.Projects {
	t.Helper()
	ps, err := platform.StartProjects(platform.ProjectsOptions{Projects: keys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Close() })
	return ps
}

// startMultiTenantGateway starts the example config at debug level (so that the secret check
// covers every level) with only SVC_ENDPOINT set; storageDir "" is a fresh directory. Stopped at
// the end of the test; its output is checked for secrets and logged if the test failed.
func startMultiTenantGateway(t *testing.T, ps *platform.Projects, storageDir string, sets ...string) *collector.Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := collector.Start(ctx, collector.Options{
		Binary:     collectorBinary(t),
		Configs:    []string{multiTenantConfig()},
		Sets:       append([]string{"service::telemetry::logs::level=debug"}, sets...),
		Env:        []string{"SVC_ENDPOINT=" + ps.URL()},
		StorageDir: storageDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Stop()
		assertNoSecrets(t, c.Logs(), teamA, teamB, teamC)
		if t.Failed() {
			t.Logf("collector output:\n%s", c.Logs())
		}
	})
	return c
}

// assertNoSecrets fails the test for every line of logs that holds a secret of keys.
func assertNoSecrets(t *testing.T, logs string, keys ...platform.ProjectKeys) {
	t.Helper()
	for i, line := range strings.Split(logs, "\n") {
		for _, s := range secretsOf(keys...) {
			if strings.Contains(line, s) {
				t.Errorf("collector log line %d holds a secret: %.200s", i+1, line)
			}
		}
	}
}

// tenantApp is one team's instrumented service, sending to the gateway with its own keys.
type tenantApp struct {
	keys platform.ProjectKeys
	tp   *sdktrace.TracerProvider
}

// newTenantApp sends over OTLP/HTTP, or OTLP/gRPC when grpc is set, with keys' credentials
// (none when keys is zero).
func newTenantApp(t *testing.T, c *collector.Process, keys platform.ProjectKeys, grpc bool) *tenantApp {
	t.Helper()
	headers := map[string]string{}
	if keys.PublicKey != "" {
		headers["Authorization"] = basicAuth(keys)
	}
	return newAppWithHeaders(t, c, keys, headers, grpc)
}

// newAppWithHeaders is an app that sends headers with every export (keys only name its service).
func newAppWithHeaders(t *testing.T, c *collector.Process, keys platform.ProjectKeys, headers map[string]string, grpc bool, resAttrs ...attribute.KeyValue) *tenantApp {
	t.Helper()
	var exp sdktrace.SpanExporter
	var err error
	if grpc {
		exp, err = otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(c.OTLPGRPCEndpoint),
			otlptracegrpc.WithInsecure(), otlptracegrpc.WithHeaders(headers), otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	} else {
		exp, err = otlptracehttp.New(context.Background(), otlptracehttp.WithEndpoint(c.OTLPHTTPEndpoint),
			otlptracehttp.WithInsecure(), otlptracehttp.WithHeaders(headers), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	}
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, append([]attribute.KeyValue{semconv.ServiceName("agent-of-" + keys.PublicKey),
		semconv.TelemetrySDKLanguageGo, semconv.TelemetrySDKName("opentelemetry")}, resAttrs...)...)
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp,
		sdktrace.WithBatchTimeout(time.Hour), sdktrace.WithMaxExportBatchSize(512), sdktrace.WithMaxQueueSize(8192)))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &tenantApp{keys: keys, tp: tp}
}

// sent is what one team sent: the GenAI span ids by trace, and the number of scores.
type sent struct {
	spans  map[string][]string // trace id -> GenAI span ids
	scores int
}

func (s sent) spanCount() int {
	n := 0
	for _, ids := range s.spans {
		n += len(ids)
	}
	return n
}

// emit sends n agent traces with evaluation events and flushes them to the gateway.
func (a *tenantApp) emit(t *testing.T, seed uint64, n int) (sent, error) {
	t.Helper()
	s := sent{spans: map[string][]string{}}
	for i := range uint64(n) {
		at := workload.EmitAgentTrace(context.Background(), a.tp, workload.AgentOptions{Seed: seed + i, Evaluations: true})
		tid := hex.EncodeToString(at.TraceID[:])
		for _, id := range at.GenAISpans {
			s.spans[tid] = append(s.spans[tid], hex.EncodeToString(id[:]))
		}
		s.scores += at.Scores
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s, a.tp.ForceFlush(ctx)
}

// waitDelivered waits until project p holds want's spans and scores (counts), or fails.
func waitDelivered(t *testing.T, p *platform.Platform, want sent, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := p.WaitForSpans(ctx, want.spanCount()); err != nil {
		t.Fatalf("spans: %v (stats %+v)", err, p.Stats())
	}
	if err := p.WaitForScores(ctx, want.scores); err != nil {
		t.Fatalf("scores: %v (stats %+v)", err, p.Stats())
	}
}

// assertHoldsExactly checks that project p holds exactly want's spans, and scores of want's
// traces only, through the project's own read APIs and its store.
func assertHoldsExactly(t *testing.T, ps *platform.Projects, keys platform.ProjectKeys, want sent) {
	t.Helper()
	p := ps.Project(keys.PublicKey)
	gotTraces := p.TraceIDs()
	var wantTraces []string
	for tid := range want.spans {
		wantTraces = append(wantTraces, tid)
	}
	sort.Strings(gotTraces)
	sort.Strings(wantTraces)
	if !slices.Equal(gotTraces, wantTraces) {
		t.Errorf("project %s holds traces %v, want exactly %v", keys.PublicKey, gotTraces, wantTraces)
	}
	if st := p.Stats(); st.UniqueSpans != want.spanCount() || st.UniqueScores != want.scores {
		t.Errorf("project %s holds %d spans and %d scores, want %d and %d", keys.PublicKey, st.UniqueSpans, st.UniqueScores, want.spanCount(), want.scores)
	}
	for _, sc := range p.Scores(platform.ScoreFilter{}) {
		if _, ok := want.spans[sc.TraceID]; !ok {
			t.Errorf("project %s holds score %s of trace %s, which it did not send", keys.PublicKey, sc.ID, sc.TraceID)
		}
	}
	// What the project's keys read back through the public API (one trace is enough).
	api := readapi.Client{BaseURL: ps.URL(), PublicKey: keys.PublicKey, SecretKey: keys.SecretKey}
	for tid, ids := range want.spans {
		obs, err := api.Observations(context.Background(), tid, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(obs) != len(ids) {
			t.Errorf("project %s reads %d observations of its trace %s, want %d", keys.PublicKey, len(obs), tid, len(ids))
		}
		break
	}
}

// TestMultiTenantKeepsEachTeamsDataInItsProject: two teams send at once, one over OTLP/HTTP and
// one over OTLP/gRPC, through one pass-through gateway; each project holds exactly its own spans
// and scores, and neither team's keys read the other's data.
func TestMultiTenantKeepsEachTeamsDataInItsProject(t *testing.T) {
	ps := startProjects(t, teamA, teamB)
	c := startMultiTenantGateway(t, ps, "")
	apps := map[string]*tenantApp{
		teamA.PublicKey: newTenantApp(t, c, teamA, false),
		teamB.PublicKey: newTenantApp(t, c, teamB, true),
	}
	var mu sync.Mutex
	got := map[string]sent{}
	var wg sync.WaitGroup
	for i, keys := range []platform.ProjectKeys{teamA, teamB} {
		wg.Go(func() {
			all := sent{spans: map[string][]string{}}
			for round := range 5 { // several requests each, interleaved with the other team's
				s, err := apps[keys.PublicKey].emit(t, uint64(1000*(i+1)+10*round), 4)
				if err != nil {
					t.Errorf("team %s: export: %v", keys.PublicKey, err)
					return
				}
				for tid, ids := range s.spans {
					all.spans[tid] = ids
				}
				all.scores += s.scores
			}
			mu.Lock()
			got[keys.PublicKey] = all
			mu.Unlock()
		})
	}
	wg.Wait()
	// An evaluator of each team reports one result as a log event about one of its spans: the
	// score goes with the credentials of that logs request.
	for _, keys := range []platform.ProjectKeys{teamA, teamB} {
		s := got[keys.PublicKey]
		for tid, ids := range s.spans {
			emitEvaluationLog(t, c, map[string]string{"Authorization": basicAuth(keys)}, tid, ids[0])
			break
		}
		s.scores++
		got[keys.PublicKey] = s
	}
	for _, keys := range []platform.ProjectKeys{teamA, teamB} {
		waitDelivered(t, ps.Project(keys.PublicKey), got[keys.PublicKey], 60*time.Second)
	}
	time.Sleep(500 * time.Millisecond) // anything misrouted would have arrived by now
	for _, keys := range []platform.ProjectKeys{teamA, teamB} {
		assertHoldsExactly(t, ps, keys, got[keys.PublicKey])
		for _, r := range ps.Project(keys.PublicKey).Requests(platform.EndpointTraces) {
			if r.SDKName != "" || r.WritePath != platform.WritePathDirect {
				t.Errorf("a traces request reached project %s as SDK %q, written %s; want no SDK headers, written direct", keys.PublicKey, r.SDKName, r.WritePath)
			}
		}
	}
	// Neither team's keys read the other's traces.
	for _, pair := range [][2]platform.ProjectKeys{{teamA, teamB}, {teamB, teamA}} {
		reader, owner := pair[0], pair[1]
		api := readapi.Client{BaseURL: ps.URL(), PublicKey: reader.PublicKey, SecretKey: reader.SecretKey}
		for tid := range got[owner.PublicKey].spans {
			obs, err := api.Observations(context.Background(), tid, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(obs) != 0 {
				t.Errorf("team %s reads %d observations of team %s's trace %s", reader.PublicKey, len(obs), owner.PublicKey, tid)
			}
		}
	}
}

// TestMultiTenantRefusesRequestsWithoutCredentials: a request without well-formed credentials is
// refused at the receiver (HTTP 401, gRPC Unauthenticated) and nothing of it reaches any project.
func TestMultiTenantRefusesRequestsWithoutCredentials(t *testing.T) {
	ps := startProjects(t, teamA)
	c := startMultiTenantGateway(t, ps, "")
	body := otlpTracesBody(t)
	tests := []struct {
		name   string
		header string
	}{
		{name: "no Authorization", header: ""},
		{name: "bearer token", header: "Bearer " + teamA.SecretKey},
		{name: "Basic without a secret", header: "Basic " + base64.StdEncoding.EncodeToString([]byte(teamA.PublicKey+":"))},
		{name: "Basic not base64", header: "Basic %%%"},
	}
	for _, tt := range tests {
		t.Run("HTTP "+tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://"+c.OTLPHTTPEndpoint+"/v1/traces", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-protobuf")
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d (%s), want 401", resp.StatusCode, msg)
			}
			if strings.Contains(string(msg), teamA.SecretKey) {
				t.Fatalf("the 401 answer quotes the secret: %s", msg)
			}
		})
	}
	t.Run("gRPC no credentials", func(t *testing.T) {
		app := newTenantApp(t, c, platform.ProjectKeys{}, true)
		_, err := app.emit(t, 7, 1)
		if err == nil || !strings.Contains(err.Error(), "Unauthenticated") {
			t.Fatalf("export without credentials over gRPC: %v, want Unauthenticated", err)
		}
	})
	t.Run("HTTP SDK no credentials", func(t *testing.T) {
		app := newTenantApp(t, c, platform.ProjectKeys{}, false)
		_, err := app.emit(t, 8, 1)
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("export without credentials over HTTP: %v, want 401", err)
		}
	})
	time.Sleep(time.Second) // anything accepted would have been delivered by now
	if st := ps.Project(teamA.PublicKey).Stats(); st.SpansReceived != 0 || st.ScoresReceived != 0 {
		t.Fatalf("the platform stored %d spans and %d scores of refused requests", st.SpansReceived, st.ScoresReceived)
	}
	if n := c.CountLines("Exporting failed"); n != 0 {
		t.Errorf("refused requests reached the exporter (%d export failures logged)", n)
	}
}

// otlpTracesBody is an OTLP/protobuf request with one GenAI span: one that would be delivered if
// it were authenticated.
func otlpTracesBody(t *testing.T) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	ss.Scope().SetName("svc-sdk")
	span := ss.Spans().AppendEmpty()
	span.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	span.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	span.SetName("chat gpt-4o")
	span.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMultiTenantRevokedTeamDoesNotDelayOthers: the platform refuses team C's keys (403) while
// C sends as much as A. A's delivery time is measured with and without C in interleaved rounds;
// C's refusals are logged with C's public key (never a secret) and counted per public key.
func TestMultiTenantRevokedTeamDoesNotDelayOthers(t *testing.T) {
	tests := []struct {
		name   string
		status int
		sets   []string
	}{
		// The example as shipped: queue batches flushed every 200ms, which bounds the delivery time.
		{name: "403, example batching", status: http.StatusForbidden},
		// Batches flushed every 10ms: the delivery time is then the gateway's own work.
		{name: "401, 10ms batches", status: http.StatusUnauthorized, sets: []string{"exporters::svc::sending_queue::batch::flush_timeout=10ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testRevokedTeam(t, tt.status, tt.sets) })
	}
}

// testRevokedTeam measures team A's delivery time in interleaved rounds: A alone, A while a
// healthy team B sends as much (the cost of another team's load), and A while the revoked team C
// sends as much. Revocation costs A nothing when the last two are alike.
func testRevokedTeam(t *testing.T, status int, sets []string) {
	ps := startProjects(t, teamA, teamB, teamC)
	ps.Revoke(teamC.PublicKey, status)
	c := startMultiTenantGateway(t, ps, "", sets...)
	a := newTenantApp(t, c, teamA, false)
	others := []*tenantApp{nil, newTenantApp(t, c, teamB, false), newTenantApp(t, c, teamC, false)}
	conditions := []string{"alone", "with healthy team B", "with revoked team C"}

	const rounds, traces = 4, 10
	took := make([][]time.Duration, len(conditions))
	total := sent{spans: map[string][]string{}}
	for round := range len(conditions) * rounds {
		cond := round % len(conditions)
		var wg sync.WaitGroup
		if other := others[cond]; other != nil {
			wg.Go(func() {
				// Errors are not expected: the gateway accepts C's data, the platform refuses it.
				if _, err := other.emit(t, uint64(50000+100*round), traces); err != nil {
					t.Errorf("team %s's export: %v", other.keys.PublicKey, err)
				}
			})
		}
		start := time.Now()
		s, err := a.emit(t, uint64(10000+100*round), traces)
		if err != nil {
			t.Fatal(err)
		}
		for tid, ids := range s.spans {
			total.spans[tid] = ids
		}
		total.scores += s.scores
		waitDelivered(t, ps.Project(teamA.PublicKey), total, 60*time.Second)
		took[cond] = append(took[cond], time.Since(start))
		wg.Wait()
	}
	medAlone, medHealthy, medRevoked := median(took[0]), median(took[1]), median(took[2])
	report := fmt.Sprintf("team A delivery of %d traces (%d spans, %d scores) per round, medians: alone %v, %s %v, %s %v; revoked/healthy %.2f, revoked/alone %.2f; rounds %v",
		traces, total.spanCount()/(len(conditions)*rounds), total.scores/(len(conditions)*rounds),
		medAlone, conditions[1], medHealthy, conditions[2], medRevoked,
		float64(medRevoked)/float64(medHealthy), float64(medRevoked)/float64(medAlone), took)
	t.Log(report)
	writeMeasurement(t, "revoked-tenant "+t.Name(), report)
	// A stall (C's refusals retried, or blocking the queue) would cost seconds per round: the
	// retry's first interval is 5s. The bound leaves room for a busy two-core machine.
	if medRevoked > 3*medHealthy+2*time.Second {
		t.Errorf("team A's delivery took %v with the revoked team sending against %v with a healthy one", medRevoked, medHealthy)
	}
	assertHoldsExactly(t, ps, teamA, total)

	if !eventually(20*time.Second, func() bool { return c.CountLines("refused the credentials", teamC.PublicKey) > 0 }) {
		t.Fatal("the collector never logged team C's refused credentials with its public key")
	}
	for _, k := range []platform.ProjectKeys{teamA, teamB} {
		if n := c.CountLines("refused the credentials", k.PublicKey); n != 0 {
			t.Errorf("team %s's credentials reported refused %d times", k.PublicKey, n)
		}
	}
	if ps.Refused(teamC.PublicKey) == 0 {
		t.Error("the platform never saw team C's requests")
	}
	metrics := scrapeMetrics(t, c)
	var line string
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, "otelcol_exporter_svc_credentials_refused") && strings.Contains(l, `public_key="`+teamC.PublicKey+`"`) {
			line = l
		}
		if strings.HasPrefix(l, "otelcol_exporter_svc_credentials_refused") && (strings.Contains(l, teamA.PublicKey) || strings.Contains(l, teamB.PublicKey)) {
			t.Errorf("a healthy team counted as refused: %s", l)
		}
	}
	if want := fmt.Sprintf(`http_response_status_code="%d"`, status); line == "" || !strings.Contains(line, want) {
		t.Errorf("no otelcol_exporter_svc_credentials_refused series for team C with %s; got %q", want, line)
	}
	assertNoSecrets(t, metrics, teamA, teamB, teamC)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// writeMeasurement appends a figure to $SVC_E2E_MEASUREMENTS when set (the report's source).
func writeMeasurement(t *testing.T, name, text string) {
	path := os.Getenv("SVC_E2E_MEASUREMENTS")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("measurement file: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s: %s\n", time.Now().UTC().Format(time.RFC3339), name, text)
}

func scrapeMetrics(t *testing.T, c *collector.Process) string {
	t.Helper()
	resp, err := http.Get("http://" + c.MetricsEndpoint + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestMultiTenantRestartDeliversQueuedItemsWithTheirCredentials: both projects are down while two
// teams send; the gateway acknowledges and queues on disk, is killed (SIGKILL), and after the
// restart every queued span and score goes to its own team's project.
func TestMultiTenantRestartDeliversQueuedItemsWithTheirCredentials(t *testing.T) {
	ps := startProjects(t, teamA, teamB)
	for _, k := range []platform.ProjectKeys{teamA, teamB} {
		if err := ps.Project(k.PublicKey).SetDown(platform.DownRefuse); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	first := startMultiTenantGateway(t, ps, dir)
	want := map[string]sent{}
	for i, k := range []platform.ProjectKeys{teamA, teamB} {
		s, err := newTenantApp(t, first, k, i == 1).emit(t, uint64(700+100*i), 5)
		if err != nil {
			t.Fatalf("team %s: %v", k.PublicKey, err)
		}
		want[k.PublicKey] = s
	}
	// The exporter has tried (and met the outage) at least once: the items are queued on disk.
	if !eventually(30*time.Second, func() bool {
		return ps.Project(teamA.PublicKey).Stats().Requests[platform.EndpointTraces][http.StatusServiceUnavailable] > 0 &&
			ps.Project(teamB.PublicKey).Stats().Requests[platform.EndpointTraces][http.StatusServiceUnavailable] > 0
	}) {
		t.Fatal("the exporter never tried to deliver")
	}
	first.Kill()
	<-first.Exited()
	for _, k := range []platform.ProjectKeys{teamA, teamB} {
		if err := ps.Project(k.PublicKey).SetDown(platform.Up); err != nil {
			t.Fatal(err)
		}
	}
	startMultiTenantGateway(t, ps, dir)
	for _, k := range []platform.ProjectKeys{teamA, teamB} {
		waitDelivered(t, ps.Project(k.PublicKey), want[k.PublicKey], 90*time.Second)
	}
	time.Sleep(500 * time.Millisecond)
	for _, k := range []platform.ProjectKeys{teamA, teamB} {
		assertHoldsExactly(t, ps, k, want[k.PublicKey])
	}
}

// postTraces sends td over OTLP/HTTP with keys' credentials and returns the status.
func postTraces(t *testing.T, c *collector.Process, keys platform.ProjectKeys, td ptrace.Traces) int {
	t.Helper()
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return postOTLP(t, c, keys, "/v1/traces", body)
}

// postOTLP posts an OTLP protobuf body to the collector's HTTP receiver with keys' credentials and
// returns the status.
func postOTLP(t *testing.T, c *collector.Process, keys platform.ProjectKeys, path string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+c.OTLPHTTPEndpoint+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Authorization", basicAuth(keys))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// genAISpan is one span of scope svc-sdk with the given ids (parent zero: a root).
func genAISpan(traceByte, spanByte, parentByte byte, name string) ptrace.Traces {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	ss.Scope().SetName("svc-sdk")
	span := ss.Spans().AppendEmpty()
	var tid pcommon.TraceID
	for i := range tid {
		tid[i] = traceByte
	}
	span.SetTraceID(tid)
	span.SetSpanID(pcommon.SpanID{spanByte, spanByte, spanByte, spanByte, spanByte, spanByte, spanByte, spanByte})
	if parentByte != 0 {
		span.SetParentSpanID(pcommon.SpanID{parentByte, parentByte, parentByte, parentByte, parentByte, parentByte, parentByte, parentByte})
	}
	span.SetName(name)
	now := time.Now()
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Second)))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
	return td
}

// TestMultiTenantRestartKeepsHeldSpansTenant: spans the span filter holds (their parent has not
// arrived) are journaled with their request's credentials; after a SIGKILL and a restart each is
// released to its own team's project, next to its parent sent after the restart.
func TestMultiTenantRestartKeepsHeldSpansTenant(t *testing.T) {
	ps := startProjects(t, teamA, teamB)
	dir := t.TempDir()
	// Long waits: the held spans are still held when the first process is killed.
	waits := []string{"processors::svcspanfilter::trace_integrity::wait_duration=20s"}
	first := startMultiTenantGateway(t, ps, dir, waits...)
	teams := []struct {
		keys  platform.ProjectKeys
		trace byte
	}{{teamA, 0xa1}, {teamB, 0xb1}}
	for _, tm := range teams {
		if status := postTraces(t, first, tm.keys, genAISpan(tm.trace, 2, 1, "chat gpt-4o")); status != http.StatusOK {
			t.Fatalf("team %s: status %d", tm.keys.PublicKey, status)
		}
	}
	time.Sleep(300 * time.Millisecond)
	for _, tm := range teams {
		if n := ps.Project(tm.keys.PublicKey).Stats().SpansReceived; n != 0 {
			t.Fatalf("team %s's child span was delivered before its parent (%d spans): nothing held to test", tm.keys.PublicKey, n)
		}
	}
	first.Kill()
	<-first.Exited()

	second := startMultiTenantGateway(t, ps, dir, waits...)
	for _, tm := range teams {
		if status := postTraces(t, second, tm.keys, genAISpan(tm.trace, 1, 0, "invoke_agent support")); status != http.StatusOK {
			t.Fatalf("team %s: status %d", tm.keys.PublicKey, status)
		}
	}
	for _, tm := range teams {
		p := ps.Project(tm.keys.PublicKey)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := p.WaitForSpans(ctx, 2)
		cancel()
		if err != nil {
			t.Fatalf("team %s: %v", tm.keys.PublicKey, err)
		}
		tid := strings.Repeat(fmt.Sprintf("%02x", tm.trace), 16)
		if got := p.TraceIDs(); !slices.Equal(got, []string{tid}) {
			t.Errorf("project %s holds traces %v, want only %s", tm.keys.PublicKey, got, tid)
		}
		child, ok := p.Observation(tid, strings.Repeat("02", 8))
		if !ok || child.ParentObservationID != strings.Repeat("01", 8) {
			t.Errorf("project %s: held child span %+v, want it under its parent", tm.keys.PublicKey, child)
		}
	}
}

// postContent sends one GenAI call's content log records (user message and choice) for span sid of
// trace tid over OTLP/HTTP with keys' credentials and returns the status.
func postContent(t *testing.T, c *collector.Process, keys platform.ProjectKeys, tid pcommon.TraceID, sid pcommon.SpanID, prompt string) int {
	t.Helper()
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	sl.Scope().SetName(contentScope)
	record := func(event string) plog.LogRecord {
		r := sl.LogRecords().AppendEmpty()
		r.SetEventName(event)
		r.SetTraceID(tid)
		r.SetSpanID(sid)
		r.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		r.Attributes().PutStr("gen_ai.system", "openai")
		return r
	}
	record("gen_ai.user.message").Body().SetEmptyMap().PutStr("content", prompt)
	choice := record("gen_ai.choice").Body().SetEmptyMap()
	choice.PutStr("finish_reason", "stop")
	choice.PutInt("index", 0)
	choice.PutEmptyMap("message").PutStr("content", "answer to "+prompt)
	body, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return postOTLP(t, c, keys, "/v1/logs", body)
}

// TestMultiTenantContentJoinsOnlyItsOwnTeam: team A's GenAI content log records wait for their span;
// team B then sends a span with the same trace and span ids. A's prompt must not reach B's project
// on B's span; A's own span with A's content (another trace) still gets it.
func TestMultiTenantContentJoinsOnlyItsOwnTeam(t *testing.T) {
	ps := startProjects(t, teamA, teamB)
	c := startMultiTenantGateway(t, ps, t.TempDir())
	const promptA = "team A's private prompt about order A-7731"
	shared := genAISpan(0xd1, 2, 0, "chat gpt-4o")
	own := genAISpan(0xd2, 2, 0, "chat gpt-4o")
	sharedSpan := shared.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	ownSpan := own.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	for _, s := range []ptrace.Span{sharedSpan, ownSpan} {
		s.Attributes().PutStr("gen_ai.operation.name", "chat")
		s.Attributes().PutStr("gen_ai.system", "openai")
	}
	if status := postContent(t, c, teamA, sharedSpan.TraceID(), sharedSpan.SpanID(), promptA); status != http.StatusOK {
		t.Fatalf("team A content: status %d", status)
	}
	if status := postContent(t, c, teamA, ownSpan.TraceID(), ownSpan.SpanID(), promptA); status != http.StatusOK {
		t.Fatalf("team A content: status %d", status)
	}
	if status := postTraces(t, c, teamB, shared); status != http.StatusOK {
		t.Fatalf("team B span: status %d", status)
	}
	if status := postTraces(t, c, teamA, own); status != http.StatusOK {
		t.Fatalf("team A span: status %d", status)
	}
	for _, k := range []platform.ProjectKeys{teamA, teamB} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := ps.Project(k.PublicKey).WaitForSpans(ctx, 1)
		cancel()
		if err != nil {
			t.Fatalf("project %s: %v", k.PublicKey, err)
		}
	}
	hexID := func(s ptrace.Span) (string, string) {
		tid, sid := s.TraceID(), s.SpanID()
		return hex.EncodeToString(tid[:]), hex.EncodeToString(sid[:])
	}
	for _, p := range []*platform.Platform{ps.Project(teamA.PublicKey), ps.Project(teamB.PublicKey)} {
		for _, o := range p.Observations(platform.ObservationFilter{}) {
			if p == ps.Project(teamB.PublicKey) && (strings.Contains(o.Input, "A-7731") || strings.Contains(o.Output, "A-7731")) {
				t.Errorf("team B's project holds team A's content on observation %s: input %q output %q", o.ID, o.Input, o.Output)
			}
		}
	}
	tid, sid := hexID(ownSpan)
	o, ok := ps.Project(teamA.PublicKey).Observation(tid, sid)
	if !ok || !strings.Contains(o.Input, "A-7731") {
		t.Errorf("team A's own span did not get its content: %+v", o)
	}
	tid, sid = hexID(sharedSpan)
	if _, ok := ps.Project(teamA.PublicKey).Observation(tid, sid); ok {
		t.Errorf("team B's span reached team A's project")
	}
}
