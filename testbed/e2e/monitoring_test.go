package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
)

// The monitoring of distribution/monitoring, tested as an operator runs it: a real Prometheus
// (Debian's prometheus package, `make prometheus`) scrapes the built gateway and evaluates the
// shipped alert rules while the local platform refuses, then recovers, then refuses the
// credentials. The rules run as shipped except their durations: every minute of a window, an
// offset or a `for` is two seconds here, so that the test takes about two minutes. The storage
// alerts are driven the same way by a full disk (storage_fulldisk_test.go).

// monitoringMinute is what one minute of the rules' durations lasts in this test.
const monitoringMinute = 2 * time.Second

// TestMonitoringAlertsFireAndResolve: while the platform answers 503 and clients keep sending,
// SvcPlatformUnavailable, SvcExporterQueueNearlyFull and SvcGatewayRefusingData fire, and the
// alert for data refused for good does not; when the platform is back they resolve. Then the
// platform refuses the credentials: SvcCredentialsRefused fires, and resolves once it stops.
func TestMonitoringAlertsFireAndResolve(t *testing.T) {
	collectorBinary(t) // skips without a built gateway
	promBin := os.Getenv("SVC_PROMETHEUS_BIN")
	if promBin == "" {
		promBin, _ = exec.LookPath("prometheus")
	}
	if promBin == "" {
		t.Skip("no prometheus binary (run `make prometheus`, or set SVC_PROMETHEUS_BIN)")
	}
	// A small queue (256 KiB per signal) that a few requests fill while the platform refuses.
	g := startGateway(t, gatewayOptions{env: []string{"SVC_QUEUE_BYTES=262144"}})
	prom := startPrometheus(t, promBin, g.collector.MetricsEndpoint)
	prom.waitScraped(t)

	var mu sync.Mutex
	seen := map[string]bool{}
	watch := func(phase string, wantFiring []string, wantResolved []string, mustNot []string, timeout time.Duration, work func()) {
		t.Helper()
		start := time.Now()
		deadline := start.Add(timeout)
		fired := map[string]time.Time{}
		for {
			if work != nil {
				work()
			}
			firing := prom.firing(t)
			mu.Lock()
			for name := range firing {
				seen[name] = true
			}
			mu.Unlock()
			for _, name := range mustNot {
				if firing[name] {
					t.Errorf("%s: %s fired", phase, name)
				}
			}
			done := true
			for _, name := range wantFiring {
				if firing[name] {
					if _, ok := fired[name]; !ok {
						fired[name] = time.Now()
						t.Logf("%s: %s firing at %s (%.1fs into the phase)", phase, name, time.Now().UTC().Format(time.RFC3339), time.Since(start).Seconds())
					}
				} else {
					done = false
				}
			}
			for _, name := range wantResolved {
				if firing[name] {
					done = false
				} else if _, ok := fired["resolved "+name]; !ok {
					fired["resolved "+name] = time.Now()
					t.Logf("%s: %s resolved at %s (%.1fs into the phase)", phase, name, time.Now().UTC().Format(time.RFC3339), time.Since(start).Seconds())
				}
			}
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: after %s, firing %v; want firing %v and resolved %v\ncollector output:\n%s", phase, timeout, keys(firing), wantFiring, wantResolved, lastLines(g.collector.Logs(), 30))
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	sender := &spanSender{endpoint: "http://" + g.collector.OTLPHTTPEndpoint + "/v1/traces"}
	outageAlerts := []string{"SvcPlatformUnavailable", "SvcExporterQueueNearlyFull", "SvcGatewayRefusingData"}

	if err := g.platform.SetDown(platform.DownRefuse); err != nil {
		t.Fatal(err)
	}
	t.Logf("platform refusing (503) from %s", time.Now().UTC().Format(time.RFC3339))
	watch("platform refusing", outageAlerts, nil, []string{"SvcPlatformRejectingData", "SvcCredentialsRefused"}, 90*time.Second, func() { sender.send(t) })
	t.Logf("clients sent %d requests, %d refused by the gateway", sender.sent, sender.refused)

	if err := g.platform.SetDown(platform.Up); err != nil {
		t.Fatal(err)
	}
	t.Logf("platform up again from %s", time.Now().UTC().Format(time.RFC3339))
	watch("platform recovered", nil, outageAlerts, []string{"SvcPlatformRejectingData", "SvcCredentialsRefused"}, 90*time.Second, nil)
	if got := g.platform.Stats().UniqueSpans; got == 0 {
		t.Errorf("the platform received no spans after it recovered")
	}

	if err := g.platform.SetFault(platform.EndpointTraces, platform.Fault{Status: http.StatusUnauthorized, Times: 3}); err != nil {
		t.Fatal(err)
	}
	t.Logf("platform refusing the credentials (401, 3 requests) from %s", time.Now().UTC().Format(time.RFC3339))
	watch("credentials refused", []string{"SvcCredentialsRefused"}, nil, nil, 60*time.Second, func() { sender.sendOne(t) })
	watch("credentials accepted again", nil, []string{"SvcCredentialsRefused"}, nil, 60*time.Second, nil)

	mu.Lock()
	t.Logf("alerts seen: %v", keys(seen))
	mu.Unlock()

	checkMonitoringNames(t, g.collector.MetricsEndpoint, prom)
}

// checkMonitoringNames: every metric the rules and the dashboard read is one the gateway
// publishes (a metric of a component's metadata.yaml, or one its /metrics shows now; the core's
// log-record twin of a span metric counts), and every dashboard query is valid PromQL.
func checkMonitoringNames(t *testing.T, metricsEndpoint string, prom *prometheusProcess) {
	t.Helper()
	root := collector.RepoRoot()
	known := map[string]bool{"up": true}
	metadataFiles, _ := filepath.Glob(filepath.Join(root, "*", "metadata.yaml"))
	metricKey := regexp.MustCompile(`(?m)^    ([a-z0-9_]+):\s*$`)
	for _, f := range metadataFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, metrics, ok := bytes.Cut(b, []byte("\n  metrics:\n")); ok {
			for _, m := range metricKey.FindAllSubmatch(metrics, -1) {
				known["otelcol_"+string(m[1])] = true
			}
		}
	}
	resp, err := http.Get("http://" + metricsEndpoint + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scraped := new(bytes.Buffer)
	_, _ = scraped.ReadFrom(resp.Body)
	resp.Body.Close()
	for _, m := range regexp.MustCompile(`(?m)^(otelcol_[a-z0-9_]+)[{ ]`).FindAllStringSubmatch(scraped.String(), -1) {
		known[m[1]] = true
	}
	rules, err := os.ReadFile(filepath.Join(root, "distribution", "monitoring", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dashboard, err := os.ReadFile(filepath.Join(root, "distribution", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	used := regexp.MustCompile(`\b(otelcol_[a-z0-9_]+|up)\b`)
	for _, file := range []struct {
		name string
		text []byte
	}{{"alerts.yaml", rules}, {"dashboard.json", dashboard}} {
		for _, m := range used.FindAllString(string(file.text), -1) {
			if !known[m] && !known[strings.Replace(m, "_log_records", "_spans", 1)] {
				t.Errorf("%s reads %s, which the gateway does not publish", file.name, m)
			}
		}
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	queries := 0
	vars := strings.NewReplacer("$job", ".*", "$instance", ".*", "$__rate_interval", "1m")
	for _, panel := range dash.Panels {
		for _, target := range panel.Targets {
			var res struct {
				Status string `json:"status"`
			}
			if err := prom.get("/api/v1/query?query="+url.QueryEscape(vars.Replace(target.Expr)), &res); err != nil || res.Status != "success" {
				t.Errorf("dashboard panel %q: query %q: %v %s", panel.Title, target.Expr, err, res.Status)
			}
			queries++
		}
	}
	t.Logf("the rules and %d dashboard queries read only metrics the gateway publishes; Prometheus runs every query", queries)
}

// spanSender posts OTLP/HTTP requests of GenAI spans (each a root, about 2 KB) to the gateway,
// as an application's exporter would, counting the refusals (503 from a full queue).
type spanSender struct {
	endpoint      string
	sent, refused int
}

func (s *spanSender) send(t *testing.T) {
	for range 4 {
		s.sendOne(t)
	}
}

func (s *spanSender) sendOne(t *testing.T) {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "monitoring-e2e")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	prompt := strings.Repeat("What is the capital of France? ", 64)
	now := time.Now()
	for range 50 {
		span := spans.AppendEmpty()
		var tid [16]byte
		var sid [8]byte
		_, _ = rand.Read(tid[:])
		_, _ = rand.Read(sid[:])
		span.SetTraceID(tid)
		span.SetSpanID(sid)
		span.SetName("chat gpt-4o")
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Second)))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
		span.Attributes().PutStr("gen_ai.operation.name", "chat")
		span.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
		span.Attributes().PutStr("gen_ai.prompt", prompt)
	}
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(s.endpoint, "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("send to the gateway: %v", err)
	}
	resp.Body.Close()
	s.sent++
	if resp.StatusCode != http.StatusOK {
		s.refused++
	}
}

// prometheusProcess is a Prometheus on loopback with its data in a temporary directory.
type prometheusProcess struct {
	url string
	cmd *exec.Cmd
	out *bytes.Buffer
}

// startPrometheus runs Prometheus scraping the gateway's metrics every second, as job
// svc-otelcol, with the shipped alert rules at test speed (monitoringMinute).
func startPrometheus(t *testing.T, bin, metricsEndpoint string) *prometheusProcess {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile(filepath.Join(collector.RepoRoot(), "distribution", "monitoring", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rulesFile := filepath.Join(dir, "alerts.yaml")
	if err := os.WriteFile(rulesFile, fastRules(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: svc-otelcol
    static_configs:
      - targets: [%q]
`, rulesFile, metricsEndpoint)
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ports, err := collector.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	p := &prometheusProcess{url: "http://" + addr, out: &bytes.Buffer{}}
	p.cmd = exec.Command(bin, "--config.file="+configFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", p.out.String())
		}
	})
	if !eventually(30*time.Second, func() bool {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("prometheus not ready:\n%s", p.out.String())
	}
	return p
}

// fastRules rewrites every duration of the rules in minutes (range windows, offsets, `for`)
// to monitoringMinute per minute; the expressions are otherwise the shipped ones.
func fastRules(rules []byte) []byte {
	minutes := regexp.MustCompile(`(\[|offset |for: )(\d+)m\b`)
	return minutes.ReplaceAllFunc(rules, func(m []byte) []byte {
		parts := minutes.FindSubmatch(m)
		n, _ := strconv.Atoi(string(parts[2]))
		return []byte(fmt.Sprintf("%s%ds", parts[1], n*int(monitoringMinute/time.Second)))
	})
}

// waitScraped waits until Prometheus has scraped the gateway.
func (p *prometheusProcess) waitScraped(t *testing.T) {
	t.Helper()
	if !eventually(30*time.Second, func() bool {
		var res struct {
			Data struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		return p.get(`/api/v1/query?query=up{job="svc-otelcol"}==1`, &res) == nil && len(res.Data.Result) > 0
	}) {
		t.Fatalf("prometheus does not scrape the gateway:\n%s", p.out.String())
	}
}

// firing is the names of the alerts in state firing.
func (p *prometheusProcess) firing(t *testing.T) map[string]bool {
	t.Helper()
	var res struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := p.get("/api/v1/alerts", &res); err != nil {
		t.Fatalf("prometheus alerts: %v", err)
	}
	firing := map[string]bool{}
	for _, a := range res.Data.Alerts {
		if a.State == "firing" {
			firing[a.Labels["alertname"]] = true
		}
	}
	return firing
}

func (p *prometheusProcess) get(path string, into any) error {
	resp, err := http.Get(p.url + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
