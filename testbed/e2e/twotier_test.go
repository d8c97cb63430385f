package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/svc/svc-collector/testbed/bench"
	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/loadgen"
	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/workload"
)

// Issue 12: two tiers. Routers (svc-otelcol with distribution/examples/two-tier/router.yaml:
// contrib's load_balancing exporter, routing_key traceID, for spans and log records) in front of
// gateways (svc-otelcol with the default config). The same input goes, at the same moments, to a
// single gateway in front of one platform (the reference) and to one router with three gateways in
// front of another: the second platform must hold what the first holds. The input is the load
// generator's agent traces over several connections (OTLP/HTTP and gRPC), a third of them
// long-running (children first, parents 2 s or 7 s later), each with a GenAI call whose prompt and
// answer come as log records (joined onto the span only by the gateway that holds it) and an
// evaluation sent as a log record. TestFaultTwoTierGatewayKill kills one gateway, then the router,
// with SIGKILL and restarts each on its storage, and measures what the router does meanwhile:
//
//	two-tier …: traces=N spans=N scores=N … | kill: … | router while down: client-errors=N … | recovery=…

// routerConfig is the router tier's configuration.
func routerConfig() string {
	return filepath.Join(collector.RepoRoot(), "distribution", "examples", "two-tier", "router.yaml")
}

const (
	tierGateways = 3
	// contentScope is the instrumentation of the GenAI calls whose content comes as log records
	// (OpenTelemetry's Python openai-v2 instrumentation: a content candidate of the span filter).
	contentScope = scopePythonOpenAI
	contentModel = "gpt-4o-mini"
)

// TestTwoTierMatchesOneGateway: one router and three gateways deliver exactly what one gateway
// delivers (spans, parents, scores, joined content), nothing twice, no orphans.
func TestTwoTierMatchesOneGateway(t *testing.T) {
	r := runTwoTier(t, false)
	r.requireSameHoldings(t, true)
	if r.ref.duplicates != 0 || r.tier.duplicates != 0 {
		t.Errorf("delivered twice: %d on the reference platform, %d on the two-tier platform", r.ref.duplicates, r.tier.duplicates)
	}
}

// TestFaultTwoTierGatewayKill: the same, with one gateway killed (SIGKILL) 40% into the run and
// restarted 3 s later on its storage, and the router killed 70% into it and restarted 1 s later on
// its own. Nothing the router acknowledged is lost: the platform holds the same spans, parents and
// scores as behind one gateway that was never killed. Deliveries twice (what a killed collector
// had stored but not answered, sent again) are counted.
// GenAI content whose span and records were split by the outage beyond the join's wait (5 s) is
// reported, and must belong to calls sent around the outage.
func TestFaultTwoTierGatewayKill(t *testing.T) {
	r := runTwoTier(t, true)
	r.requireSameHoldings(t, false)
	if r.ref.duplicates != 0 {
		t.Errorf("delivered twice on the reference platform: %d", r.ref.duplicates)
	}
	for _, k := range []killRecord{r.kill, r.routerKill} {
		if k.err != nil {
			t.Error(k.err)
		}
	}
	if n := r.tierSenders.errorsBetween(r.start, time.Now()); n != 0 {
		t.Logf("the router refused or failed %d requests (the clients retried them)", n)
	}
}

// twoTierRun is what a run sent and what the two platforms hold.
type twoTierRun struct {
	ref, tier     platformView
	contentCalls  map[[2]string]string // (trace, span) of each content call → the prompt's marker
	contentSentAt map[[2]string]time.Time
	wantSpans     int
	kill          killRecord
	routerKill    killRecord
	killed        bool
	start         time.Time
	tierSenders   *tierSenders
}

func runTwoTier(t *testing.T, kill bool) *twoTierRun {
	bin := collectorBinary(t)
	load := longer(12*time.Second, 60*time.Second)
	const interval, connections = 120 * time.Millisecond, 4
	// The gateway is killed 40% into the run and down for 3 s; the router 70% into it (while it
	// may still hold the gateway's backlog) and down for 1 s.
	killAfter, downFor := load*2/5, 3*time.Second
	routerKillAfter, routerDownFor := load*7/10, time.Second
	run := &twoTierRun{killed: kill, contentSentAt: map[[2]string]time.Time{}}

	// The reference: one gateway, one platform.
	refPlatform := startPlatform(t, "")
	ref := startTierCollector(t, bin, refPlatform, collector.Options{Configs: []string{collector.DefaultConfig()}})
	t.Cleanup(func() {
		if err := ref.Stop(); err != nil {
			t.Errorf("reference gateway stop: %v", err)
		}
	})

	// The two tiers: three gateways (fixed gRPC addresses, the router's static list; storage of
	// their own, kept across a restart) and a router, in front of another platform.
	tierPlatform := startPlatform(t, "")
	grpcPorts, err := collector.FreePorts(tierGateways)
	if err != nil {
		t.Fatal(err)
	}
	gateways := make([]*restartable, tierGateways)
	var hostnames []string
	for i := range gateways {
		addr := fmt.Sprintf("127.0.0.1:%d", grpcPorts[i])
		gateways[i] = startRestartable(t, bin, tierPlatform, "gateway "+addr, collector.Options{
			Configs: gatewayConfigs(), OTLPGRPCEndpoint: addr, StorageDir: t.TempDir()})
		hostnames = append(hostnames, addr)
	}
	routerPorts, err := collector.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	router := startRestartable(t, bin, tierPlatform, "router", collector.Options{
		Configs:          []string{routerConfig()},
		Env:              []string{"SVC_GATEWAYS=[" + strings.Join(hostnames, ", ") + "]"},
		OTLPGRPCEndpoint: fmt.Sprintf("127.0.0.1:%d", routerPorts[0]),
		OTLPHTTPEndpoint: fmt.Sprintf("127.0.0.1:%d", routerPorts[1]),
		StorageDir:       t.TempDir(),
	})

	refSenders := newTierSenders(t, ref, connections)
	tierSenders := newTierSenders(t, router.current(), connections)

	// The plan: every interval a request of 1–3 whole traces on the next connection; a third of
	// the requests are long-running (parents later). Each trace has a content call: its span goes
	// with the children, its content and evaluation records at the same moment as log records.
	w := faultWorkload(t, loadgen.WorkloadOptions{})
	ledger := newAckLedger()
	var plan []tierSend
	var seq uint64
	contentCalls := map[[2]string]string{}
	contentAt := map[[2]string]time.Duration{}
	logScores := 0
	for i, at := 0, time.Duration(0); at < load; i, at = i+1, at+interval {
		req := w.NewRequest(seq, 1+i%3, 1<<20, 16<<20)
		full := ptrace.NewTraces()
		decoded := ptraceotlp.NewExportRequest()
		if err := decoded.UnmarshalProto(req.Body); err != nil {
			t.Fatal(err)
		}
		decoded.Traces().CopyTo(full)
		logs := plog.NewLogs()
		for s := seq; s < seq+uint64(req.Traces); s++ {
			tid := w.Trace(s).TraceID
			key, marker := addContentCall(t, full, logs, pcommon.TraceID(tid), s)
			contentCalls[key] = marker
			contentAt[key] = at
			logScores++
		}
		seq += uint64(req.Traces)
		conn := i % connections
		plan = append(plan, tierSend{at: at, conn: conn, logs: logs, isLogs: true})
		if i%3 != 0 {
			plan = append(plan, tierSend{at: at, conn: conn, traces: full, children: true})
			continue
		}
		children, parents := splitAgentTraces(t, mustMarshal(t, full), req.Traces)
		delay := 2 * time.Second // within the span filter's wait: the children wait for their parent
		if i%2 == 0 {
			delay = 7 * time.Second // beyond it: the children go on pointing at the parent to come
		}
		plan = append(plan, tierSend{at: at, conn: conn, traces: children, children: true},
			tierSend{at: at + delay, conn: (conn + 1) % connections, traces: parents})
	}
	sort.SliceStable(plan, func(i, j int) bool { return plan[i].at < plan[j].at })
	for _, p := range plan {
		if !p.isLogs {
			ledger.acknowledge(p.traces, p.children)
		}
	}
	t.Logf("%d traces in %d sends over %s on %d connections", seq, len(plan), plan[len(plan)-1].at, connections)

	// Send: each item to both sides at its moment, each retried until acknowledged, as an SDK does.
	start := time.Now()
	watch := newRouterWatch(func() string { return router.current().MetricsEndpoint }, tierPlatform)
	watchDone := make(chan struct{})
	var watchWG sync.WaitGroup
	watchWG.Go(func() { watch.run(watchDone) })
	var wg sync.WaitGroup
	if kill {
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(killAfter)))
			run.kill = gateways[1].killAndRestart(downFor)
		})
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(routerKillAfter)))
			run.routerKill = router.killAndRestart(routerDownFor)
		})
	}
	for _, p := range plan {
		time.Sleep(time.Until(start.Add(p.at)))
		var body []byte
		var err error
		if p.isLogs {
			body, err = plogotlp.NewExportRequestFromLogs(p.logs).MarshalProto()
		} else {
			if !p.children {
				stampEnd(p.traces, time.Now())
			}
			body, err = ptraceotlp.NewExportRequestFromTraces(p.traces).MarshalProto()
		}
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { refSenders.sendUntilAcknowledged(t, p.conn, p.isLogs, body) })
		wg.Go(func() { tierSenders.sendUntilAcknowledged(t, p.conn, p.isLogs, body) })
	}
	wg.Wait()
	sent := time.Since(start)

	// Settle: both platforms hold every GenAI span and every score that was sent.
	wantSpans := len(ledger.children) + len(ledger.parents)
	wantScores := logScores
	for _, n := range ledger.scores {
		wantScores += n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for name, p := range map[string]*platform.Platform{"reference": refPlatform, "two-tier": tierPlatform} {
		if err := p.WaitUntil(ctx, func() bool {
			st := p.Stats()
			return st.UniqueSpans >= wantSpans && st.UniqueScores >= wantScores
		}); err != nil {
			t.Fatalf("%s platform: %v (want %d spans and %d scores; has %+v)", name, err, wantSpans, wantScores, p.Stats())
		}
	}
	// What settles late (a duplicate in flight) has a moment to arrive before the counts are taken.
	time.Sleep(time.Second)
	close(watchDone)
	watchWG.Wait()

	run.ref, run.tier = holdings(refPlatform), holdings(tierPlatform)
	// CPU used so far, per 100k spans sent (all of them, GenAI or not): a rough same-run comparison
	// of a router with a gateway at this light load (idle use included).
	inputSpans := 0
	for _, p := range plan {
		if !p.isLogs {
			inputSpans += p.traces.SpanCount()
		}
	}
	cpuPer100k := func(procs ...*collector.Process) string {
		var total time.Duration
		for _, c := range procs {
			u, err := bench.ReadUsage(c.PID())
			if err != nil {
				return "n/a"
			}
			total += u.CPU
		}
		return fmt.Sprintf("%.1f", total.Seconds()*100000/float64(inputSpans))
	}
	var tierProcs []*collector.Process
	for _, g := range gateways {
		tierProcs = append(tierProcs, g.current())
	}
	cpuLine := fmt.Sprintf("CPU s per 100k input spans (%d spans): router=%s, three gateways together=%s, single gateway=%s",
		inputSpans, cpuPer100k(router.current()), cpuPer100k(tierProcs...), cpuPer100k(ref))
	run.contentCalls, run.wantSpans, run.start, run.tierSenders = contentCalls, wantSpans, start, tierSenders
	for key, at := range contentAt {
		run.contentSentAt[key] = start.Add(at)
	}
	line := fmt.Sprintf("two-tier: traces=%d spans=%d scores=%d content-calls=%d send=%s | reference duplicates=%d, two-tier duplicates=%d",
		seq, len(run.tier.parents), len(run.tier.scores), len(contentCalls), sent.Round(time.Millisecond), run.ref.duplicates, run.tier.duplicates)
	if !kill { // a restarted process has counted its CPU since its restart only
		line += " | " + cpuLine
	}
	if kill {
		k := run.kill
		rk := run.routerKill
		line = fmt.Sprintf("fault two-tier-gateway-kill: %s | gateway kill: %s | router while the gateway was down: client-errors=%d router-retry-logs=%d queue-peak-bytes=%d spans-delivered-while-down=%d (the %s before: %d) | recovery=%s | router kill: %s, client errors meanwhile=%d",
			line, k, tierSenders.errorsBetween(k.at, k.healthy), router.countLines("Exporting failed", hostnames[1]),
			watch.queuePeak(k.at, k.healthy), watch.deliveredBetween(k.at, k.healthy), k.healthy.Sub(k.at).Round(time.Millisecond),
			watch.deliveredBetween(k.at.Add(-k.healthy.Sub(k.at)), k.at), watch.recovery(k), rk, tierSenders.errorsBetween(rk.at, rk.healthy.Add(time.Second)))
	}
	fmt.Println(line)
	t.Log(line)
	return run
}

// requireSameHoldings compares the two platforms: the same spans with the same parents, the same
// scores, no orphans; and the same joined content, exactly when exactContent, else every content
// call missing its content on the two tiers was sent around the outage.
func (r *twoTierRun) requireSameHoldings(t *testing.T, exactContent bool) {
	t.Helper()
	if len(r.ref.parents) != r.wantSpans {
		t.Errorf("the reference platform holds %d spans, want the %d GenAI spans sent", len(r.ref.parents), r.wantSpans)
	}
	if d := diffMaps(r.ref.parents, r.tier.parents); d != "" {
		t.Errorf("spans and parents differ between one gateway and two tiers:\n%s", d)
	}
	if d := diffMaps(r.ref.scores, r.tier.scores); d != "" {
		t.Errorf("scores differ between one gateway and two tiers:\n%s", d)
	}
	if n := r.tier.orphans(); n != 0 {
		t.Errorf("%d spans on the two-tier platform point at a parent it does not hold", n)
	}
	if n := r.ref.orphans(); n != 0 {
		t.Errorf("%d spans on the reference platform point at a parent it does not hold", n)
	}
	// Every content call got its prompt and answer on the reference, masked.
	missed := 0
	for key, marker := range r.contentCalls {
		ref := r.ref.content[key[0]+"/"+key[1]]
		if !strings.Contains(ref, marker) || !strings.Contains(ref, "[EMAIL]") || strings.Contains(ref, e2eEmail) {
			t.Errorf("content call %s/%s on the reference: input/output %q, want the prompt %q masked and its answer", key[0], key[1], ref, marker)
			return
		}
		if r.tier.content[key[0]+"/"+key[1]] == ref {
			continue
		}
		missed++
		at := r.contentSentAt[key]
		// Around the outage: sent from a content wait before the kill to a content wait after
		// the gateway was back, plus the router's retry interval.
		around := func(k killRecord) bool {
			return at.After(k.at.Add(-5*time.Second)) && at.Before(k.healthy.Add(7*time.Second))
		}
		aroundOutage := r.killed && (around(r.kill) || around(r.routerKill))
		if exactContent || !aroundOutage {
			t.Errorf("content call %s/%s (sent %s into the run): two tiers show %q, one gateway %q", key[0], key[1],
				at.Sub(r.start).Round(time.Millisecond), r.tier.content[key[0]+"/"+key[1]], ref)
		}
	}
	if r.killed {
		t.Logf("content calls without their content on the two tiers (split by the outage beyond the join's wait): %d of %d", missed, len(r.contentCalls))
	}
}

// tierSend is one request of the plan: spans or log records on one connection.
type tierSend struct {
	at       time.Duration
	conn     int
	traces   ptrace.Traces
	children bool // spans sent as they are (parents are stamped to end when sent)
	logs     plog.Logs
	isLogs   bool
}

func mustMarshal(t *testing.T, td ptrace.Traces) []byte {
	t.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// addContentCall adds to the trace seq of td an inference span under its agent span whose content
// comes as log records, and to logs its prompt (with an e-mail address to mask), its answer and an
// evaluation of it. It returns the span's (trace, span) key and a marker of its prompt.
func addContentCall(t *testing.T, td ptrace.Traces, logs plog.Logs, tid pcommon.TraceID, seq uint64) ([2]string, string) {
	t.Helper()
	var agent ptrace.Span
	found := false
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				if s.TraceID() == tid && s.Name() == workload.SpanAgent {
					agent, found = s, true
				}
			}
		}
	}
	if !found {
		t.Fatalf("trace %s has no agent span", hex.EncodeToString(tid[:]))
	}
	h := fnv.New64a()
	_, _ = h.Write(tid[:])
	_, _ = h.Write([]byte("content call"))
	var sid pcommon.SpanID
	binary.BigEndian.PutUint64(sid[:], h.Sum64()|1)

	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "support-agent")
	rs.Resource().Attributes().PutStr("telemetry.sdk.language", "python")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(contentScope)
	ss.Scope().SetVersion("2.1b0")
	span := ss.Spans().AppendEmpty()
	span.SetTraceID(tid)
	span.SetSpanID(sid)
	span.SetParentSpanID(agent.SpanID())
	span.SetName("chat " + contentModel)
	span.SetKind(ptrace.SpanKindClient)
	span.SetStartTimestamp(agent.StartTimestamp())
	span.SetEndTimestamp(agent.StartTimestamp() + 1)
	span.Attributes().PutStr("gen_ai.operation.name", "chat")
	span.Attributes().PutStr("gen_ai.system", "openai")
	span.Attributes().PutStr("gen_ai.request.model", contentModel)

	marker := fmt.Sprintf("order A-%06d", seq)
	lrs := logs.ResourceLogs().AppendEmpty()
	rs.Resource().CopyTo(lrs.Resource())
	sl := lrs.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(contentScope)
	record := func(event string) plog.LogRecord {
		r := sl.LogRecords().AppendEmpty()
		r.SetEventName(event)
		r.SetTraceID(tid)
		r.SetSpanID(sid)
		r.SetTimestamp(agent.StartTimestamp() + 1)
		r.SetSeverityNumber(plog.SeverityNumberInfo)
		return r
	}
	user := record("gen_ai.user.message")
	user.Attributes().PutStr("gen_ai.system", "openai")
	user.Body().SetEmptyMap().PutStr("content", "Where is "+marker+"? Write to "+e2eEmail)
	choice := record("gen_ai.choice")
	choice.Attributes().PutStr("gen_ai.system", "openai")
	body := choice.Body().SetEmptyMap()
	body.PutStr("finish_reason", "stop")
	body.PutInt("index", 0)
	body.PutEmptyMap("message").PutStr("content", marker+" ships tomorrow.")
	eval := record("gen_ai.evaluation.result")
	eval.Attributes().PutStr("gen_ai.evaluation.name", "answer_relevance")
	eval.Attributes().PutDouble("gen_ai.evaluation.score.value", float64(seq%10)/10)
	return [2]string{hex.EncodeToString(tid[:]), hex.EncodeToString(sid[:])}, marker
}

// startTierCollector starts svc-otelcol in front of p with opts (binary and keys filled in); the
// caller stops it.
func startTierCollector(t *testing.T, bin string, p *platform.Platform, opts collector.Options) *collector.Process {
	t.Helper()
	return startRestartable(t, bin, p, "", opts).current()
}

// restartable is a collector of the two tiers that a test kills and restarts on the same addresses
// and storage directory.
type restartable struct {
	name string
	opts collector.Options // complete: binary, environment
	mu   sync.Mutex
	proc *collector.Process
	past []*collector.Process // killed
}

// startRestartable starts svc-otelcol in front of p with opts (binary and keys filled in). A named
// one is stopped when the test ends, its output logged if the test failed.
func startRestartable(t *testing.T, bin string, p *platform.Platform, name string, opts collector.Options) *restartable {
	t.Helper()
	opts.Binary = bin
	opts.Env = append([]string{"SVC_ENDPOINT=" + p.URL(), "SVC_PUBLIC_KEY=" + testPublicKey, "SVC_SECRET_KEY=" + testSecretKey}, opts.Env...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := collector.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &restartable{name: name, opts: opts, proc: c}
	if name != "" {
		t.Cleanup(func() { r.stop(t) })
	}
	return r
}

func (r *restartable) current() *collector.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

func (r *restartable) stop(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.proc.Stop(); err != nil {
		t.Errorf("%s stop: %v", r.name, err)
	}
	if t.Failed() {
		t.Logf("%s output:\n%s", r.name, r.proc.Logs())
	}
}

// countLines counts the log lines with every one of substrings, over every run of the collector.
func (r *restartable) countLines(substrings ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.proc.CountLines(substrings...)
	for _, p := range r.past {
		n += p.CountLines(substrings...)
	}
	return n
}

// killRecord is what happened to a killed collector.
type killRecord struct {
	at, restarted, healthy time.Time
	err                    error
}

func (k killRecord) String() string {
	return fmt.Sprintf("SIGKILL, restarted after %s, healthy %s after the kill", k.restarted.Sub(k.at).Round(time.Millisecond), k.healthy.Sub(k.at).Round(time.Millisecond))
}

// killAndRestart SIGKILLs the collector, leaves it down for downFor, and starts it again on the same
// addresses and storage directory.
func (r *restartable) killAndRestart(downFor time.Duration) killRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var k killRecord
	k.at = time.Now()
	r.proc.Kill()
	time.Sleep(downFor)
	k.restarted = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	proc, err := collector.Start(ctx, r.opts)
	k.healthy = time.Now()
	if err != nil {
		k.err = fmt.Errorf("restart of the killed %s: %w", r.name, err)
		return k
	}
	r.past = append(r.past, r.proc)
	r.proc = proc
	return k
}

// tierSenders are an application's connections to one collector: OTLP/HTTP and gRPC for spans
// alternately, OTLP/HTTP for log records. They count the answers that were not a success.
type tierSenders struct {
	traces   []loadgen.Sender
	logsURL  string
	client   *http.Client
	mu       sync.Mutex
	failures []time.Time
}

func newTierSenders(t *testing.T, c *collector.Process, n int) *tierSenders {
	t.Helper()
	s := &tierSenders{logsURL: "http://" + c.OTLPHTTPEndpoint + "/v1/logs", client: &http.Client{Timeout: 10 * time.Second}}
	for i := range n {
		protocol, endpoint := loadgen.ProtocolHTTP, c.OTLPHTTPEndpoint
		if i%2 == 1 {
			protocol, endpoint = loadgen.ProtocolGRPC, c.OTLPGRPCEndpoint
		}
		snd, err := loadgen.NewSender(loadgen.SenderOptions{Protocol: protocol, Endpoint: endpoint, Timeout: 10 * time.Second, Connections: 2})
		if err != nil {
			t.Fatal(err)
		}
		s.traces = append(s.traces, snd)
		t.Cleanup(func() { _ = snd.Close() })
	}
	return s
}

// sendUntilAcknowledged sends body (spans, or log records when logs) on connection conn until the
// collector answers success, retrying every 200 ms.
func (s *tierSenders) sendUntilAcknowledged(t *testing.T, conn int, logs bool, body []byte) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok, status := false, ""
		if logs {
			ok, status = s.postLogs(body)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out := s.traces[conn].Send(ctx, body)
			cancel()
			ok, status = out.Verdict == loadgen.Accepted, out.Status
			if out.Verdict == loadgen.Rejected {
				t.Errorf("the collector rejected a request for good: %s", out.Status)
				return
			}
		}
		if ok {
			return
		}
		s.mu.Lock()
		s.failures = append(s.failures, time.Now())
		s.mu.Unlock()
		if time.Now().After(deadline) {
			t.Errorf("the collector did not acknowledge a request for 2 minutes (last answer %s)", status)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *tierSenders) postLogs(body []byte) (bool, string) {
	resp, err := s.client.Post(s.logsURL, "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status
}

// errorsBetween counts the answers other than success between from and to.
func (s *tierSenders) errorsBetween(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.failures {
		if !at.Before(from) && !at.After(to) {
			n++
		}
	}
	return n
}

// routerWatch samples the router's own metrics and the platform's span count every 100 ms.
type routerWatch struct {
	metricsURL func() string
	platform   *platform.Platform
	mu         sync.Mutex
	samples    []routerSample
}

type routerSample struct {
	at     time.Time
	queue  float64 // bytes in the load_balancing exporter's queues (spans and log records; sizer: bytes)
	stored int     // distinct spans on the platform
}

func newRouterWatch(metricsEndpoint func() string, p *platform.Platform) *routerWatch {
	return &routerWatch{metricsURL: func() string { return "http://" + metricsEndpoint() + "/metrics" }, platform: p}
}

func (w *routerWatch) run(done <-chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		q, err := scrapeSum(w.metricsURL(), "otelcol_exporter_queue_size", `exporter="load_balancing"`)
		if err != nil {
			continue
		}
		w.mu.Lock()
		w.samples = append(w.samples, routerSample{at: time.Now(), queue: q, stored: w.platform.Stats().UniqueSpans})
		w.mu.Unlock()
	}
}

// queuePeak is the most the router's queues held between from and to, in bytes (sizer: bytes).
func (w *routerWatch) queuePeak(from, to time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	peak := 0.0
	for _, s := range w.samples {
		if !s.at.Before(from) && !s.at.After(to) {
			peak = math.Max(peak, s.queue)
		}
	}
	return int(peak)
}

// deliveredBetween is how many spans reached the platform between from and to.
func (w *routerWatch) deliveredBetween(from, to time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	first, last := -1, -1
	for _, s := range w.samples {
		if s.at.Before(from) || s.at.After(to) {
			continue
		}
		if first < 0 {
			first = s.stored
		}
		last = s.stored
	}
	if first < 0 {
		return 0
	}
	return last - first
}

// recovery is how long after the killed gateway was healthy again the router's queue went back to
// what it held before the kill (the largest of its last second), i.e. until the backlog of the
// outage was delivered.
func (w *routerWatch) recovery(k killRecord) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	before := 0.0
	for _, s := range w.samples {
		if s.at.Before(k.at) && s.at.After(k.at.Add(-time.Second)) {
			before = math.Max(before, s.queue)
		}
	}
	for _, s := range w.samples {
		if s.at.After(k.healthy) && s.queue <= before {
			return fmt.Sprintf("%s after the restart (queue back to %d)", s.at.Sub(k.healthy).Round(100*time.Millisecond), int(before))
		}
	}
	return "not seen"
}

// scrapeSum adds up the values of the Prometheus samples of metric whose labels contain every one
// of labels.
func scrapeSum(url, metric string, labels ...string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric) || strings.HasPrefix(line, "#") {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(line, l)
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}

// platformView is what a platform holds, in comparable form.
type platformView struct {
	parents    map[string]string // trace/span → name and parent
	scores     map[string]string // score id → trace, observation, name, value
	content    map[string]string // trace/span → input and output, for spans with either
	byTrace    map[string]map[string]string
	duplicates int
}

func holdings(p *platform.Platform) platformView {
	v := platformView{parents: map[string]string{}, scores: map[string]string{}, content: map[string]string{}, byTrace: map[string]map[string]string{}}
	for _, o := range p.Observations(platform.ObservationFilter{}) {
		key := o.TraceID + "/" + o.ID
		v.parents[key] = o.Name + " ← " + o.ParentObservationID
		if v.byTrace[o.TraceID] == nil {
			v.byTrace[o.TraceID] = map[string]string{}
		}
		v.byTrace[o.TraceID][o.ID] = o.ParentObservationID
		if o.Input != "" || o.Output != "" {
			v.content[key] = o.Input + " → " + o.Output
		}
		v.duplicates += o.Deliveries - 1
	}
	for _, sc := range p.Scores(platform.ScoreFilter{}) {
		v.scores[sc.ID] = fmt.Sprintf("%s/%s %s=%v", sc.TraceID, sc.ObservationID, sc.Name, sc.Value)
		v.duplicates += sc.Deliveries - 1
	}
	return v
}

// orphans counts spans whose parent id names no span of their trace.
func (v platformView) orphans() int {
	n := 0
	for _, spans := range v.byTrace {
		for _, parent := range spans {
			if _, ok := spans[parent]; parent != "" && !ok {
				n++
			}
		}
	}
	return n
}

// diffMaps lists (up to 10) keys whose values differ or that only one side has.
func diffMaps(want, got map[string]string) string {
	var out []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("  %s: only on the reference: %q", k, w))
		} else if g != w {
			out = append(out, fmt.Sprintf("  %s: reference %q, two tiers %q", k, w, g))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("  %s: only on the two tiers: %q", k, g))
		}
	}
	sort.Strings(out)
	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("  ... %d more", len(out)-10))
	}
	return strings.Join(out, "\n")
}

// gatewayConfigs are the configs of a gateway behind routers: the default config and the two-tier
// gateway overlay.
func gatewayConfigs() []string {
	return []string{collector.DefaultConfig(), filepath.Join(collector.RepoRoot(), "distribution", "examples", "two-tier", "gateway.yaml")}
}

// TestTwoTierCarriesLargeRequests: a 6 MiB request that an application sends a router over
// OTLP/HTTP (its receiver takes up to 20 MiB) reaches the platform. The router passes it on to the
// gateway as one gRPC message, above gRPC's default limit of 4 MiB, which the gateway overlay
// raises (without it the gateway answers RESOURCE_EXHAUSTED, which the router does not retry).
func TestTwoTierCarriesLargeRequests(t *testing.T) {
	bin := collectorBinary(t)
	p := startPlatform(t, "")
	ports, err := collector.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	gw := startTierCollector(t, bin, p, collector.Options{Configs: gatewayConfigs(), OTLPGRPCEndpoint: addr})
	router := startTierCollector(t, bin, p, collector.Options{Configs: []string{routerConfig()}, Env: []string{"SVC_GATEWAYS=[" + addr + "]"}})
	t.Cleanup(func() {
		for _, c := range []*collector.Process{router, gw} {
			if err := c.Stop(); err != nil {
				t.Errorf("stop: %v", err)
			}
			if t.Failed() {
				t.Logf("output:\n%s", c.Logs())
			}
		}
	})

	// One LLM call whose prompt is 6 MiB of text (a long document pasted into a chat).
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "support-agent")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(workload.ScopeOpenAI)
	span := ss.Spans().AppendEmpty()
	tid := pcommon.TraceID{0x12, 0x34, 0x56, 0x78, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	span.SetTraceID(tid)
	span.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	span.SetName("chat gpt-4o")
	now := time.Now()
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Second)))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
	span.Attributes().PutStr("gen_ai.operation.name", "chat")
	const promptBytes = 6 << 20
	var prompt strings.Builder
	for i := 0; prompt.Len() < promptBytes; i++ {
		fmt.Fprintf(&prompt, "clause %d of the contract under review. ", i)
	}
	span.Attributes().PutStr("gen_ai.prompt", prompt.String())
	body := mustMarshal(t, td)

	s, err := loadgen.NewSender(loadgen.SenderOptions{Protocol: loadgen.ProtocolHTTP, Endpoint: router.OTLPHTTPEndpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := s.Send(context.Background(), body)
	if out.Verdict != loadgen.Accepted {
		t.Fatalf("the router did not accept a %d-byte request: %s", len(body), out.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.WaitForSpans(ctx, 1); err != nil {
		t.Fatalf("the %d-byte request the router accepted did not reach the platform: %v", len(body), err)
	}
	o, _ := p.Observation(hex.EncodeToString(tid[:]), "0102030405060708")
	if got, _ := o.Attributes["gen_ai.prompt"].(string); len(got) < promptBytes {
		t.Errorf("the platform holds a prompt of %d bytes, want %d", len(got), prompt.Len())
	}
}
