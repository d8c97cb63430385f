package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
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

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/workload"
)

// Issue 25: trees that survive a SIGKILL. One router and three gateways on the shipped two-tier
// configs; agent runs spread over three services, each exporting on its own schedule, so that the
// dropped spans of one service (the HTTP root `POST /agent` and the tool endpoint's `GET /tool`)
// reach the gateway before the kept GenAI spans of the others below them:
//
//	POST /agent                  agent-api (HTTP server, dropped)    exported with GET /tool or after it
//	└─ invoke_agent              agent-runner (kept, svc.score)      exported last
//	   ├─ chat gpt-4o            agent-runner (kept, two evaluations)
//	   │  └─ POST api.openai.com agent-runner (HTTP client, dropped)
//	   └─ GET /tool              agent-api (HTTP server, dropped)    exported first
//	      └─ execute_tool        agent-tools (kept, an evaluation as a log record)
//	         ├─ chat gpt-4o-mini agent-tools (kept)
//	         └─ SELECT orders    agent-tools (database, dropped)
//
// Every span ends before its parent; each service exports what ended in its own requests, several
// traces per request. One gateway is killed with SIGKILL at ten random moments (seeded; the seed is
// printed, SVC_FAULTS_SEED replays it) and restarted on its storage 0–1 s later (0–3 s long). The platform must
// hold every kept span and every score the router acknowledged, each kept span below its nearest
// kept ancestor as the input says (invoke_agent the root, execute_tool below it), and no span
// pointing at a parent it never receives.
//
//	fault gateway-kills-trees: seed=N traces=N kept-spans=N scores=N kills=10 traces-split-by-a-kill=N | lost=N | orphans=N trees-differing=N | delivered again ...
//
// Deliveries twice are reported, not failed: a share the killed gateway had stored but not
// answered is sent again by the router (at least once), and the platform keeps one copy by id.

// Services of the spread agent run and the connection (one per service, as one SDK each) that
// carries their spans.
const (
	serviceAPI    = "agent-api"
	serviceTools  = "agent-tools"
	serviceRunner = "agent-runner"
	scopeTools    = "example.com/agent-tools"
)

var serviceConn = map[string]int{serviceAPI: 0, serviceTools: 1, serviceRunner: 2}

// TestFaultGatewayKillsKeepTrees: see above. Short: runs start over 20 s (about 30 s in all);
// SVC_FAULTS=long: over 90 s, twice as dense.
func TestFaultGatewayKillsKeepTrees(t *testing.T) {
	bin := collectorBinary(t)
	seed := faultSeed(t)
	rng := rand.New(rand.NewPCG(seed, 25))
	load := longer(20*time.Second, 90*time.Second)
	every := longer(150*time.Millisecond, 75*time.Millisecond)
	const kills = 10

	p := startPlatform(t, "")
	tiers := startTiers(t, bin, p)
	killed := tiers.gateways[rng.IntN(len(tiers.gateways))]

	// The input: a run starts every `every`; its services export at moments drawn from rng.
	base := time.Now()
	in := newSpreadInput(100 * time.Millisecond)
	for at := time.Duration(0); at < load; at += every {
		in.addAgentRun(rng, base, at)
	}
	plan := in.requests()
	end := plan[len(plan)-1].at
	// Kills: one at a random moment in each tenth of the sending, the gateway down 0–1 s (0–3 s)
	// each time.
	maxDown := longer(time.Second, 3*time.Second)
	killAt := make([]time.Duration, kills)
	downFor := make([]time.Duration, kills)
	for i := range killAt {
		slot := end / time.Duration(kills)
		killAt[i] = time.Duration(i)*slot + time.Duration(rng.Int64N(int64(slot)))
		downFor[i] = time.Duration(rng.Int64N(int64(maxDown)))
	}
	t.Logf("seed %d: %d runs, %d requests over %s; %s killed at %v", seed, in.runs, len(plan), end, killed.name, killAt)

	senders := newTierSenders(t, tiers.router.current(), len(serviceConn))
	start := time.Now()
	var records []killRecord
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, at := range killAt {
			time.Sleep(time.Until(start.Add(at)))
			records = append(records, killed.killAndRestart(downFor[i]))
		}
	})
	for _, r := range plan {
		time.Sleep(time.Until(start.Add(r.at)))
		body, err := r.body()
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { senders.sendUntilAcknowledged(t, r.conn, r.isLogs, body) })
	}
	wg.Wait()
	for _, k := range records {
		if k.err != nil {
			t.Fatal(k.err)
		}
	}

	// Everything sent was acknowledged (sendUntilAcknowledged fails the test otherwise): wait for
	// it on the platform, then for the tiers to hold nothing more, and compare.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := in.expectedTree()
	wantScores := in.scoreCount()
	complete := func() bool {
		st := p.Stats()
		return st.UniqueSpans >= len(want) && st.UniqueScores >= wantScores && len(in.missing(p)) == 0
	}
	if err := p.WaitUntil(ctx, complete); err != nil {
		t.Errorf("not everything acknowledged reached the platform within 2 minutes: %v", err)
	}
	if !eventually(30*time.Second, tiers.idle) {
		t.Errorf("the tiers still hold spans or queued items 30 s after the platform got everything")
	}
	got := holdings(p)
	spansAgain, scoresAgain := redeliveries(p)
	lost := in.missing(p)
	orphans := in.orphans(got)
	differing := diffMaps(want, got.parents)
	line := fmt.Sprintf("fault gateway-kills-trees: seed=%d traces=%d kept-spans=%d scores=%d kills=%d traces-split-by-a-kill=%d | lost=%d | orphans=%d trees-differing=%d | delivered again (at least once): spans=%d scores=%d",
		seed, in.runs, len(want), wantScores, len(records), in.splitByKills(records, start), len(lost), len(orphans), countDiffering(want, got.parents), spansAgain, scoresAgain)
	fmt.Println(line)
	t.Log(line)
	for i, k := range records {
		t.Logf("kill %d at %s: %s", i+1, k.at.Sub(start).Round(time.Millisecond), k)
	}
	if len(lost) != 0 {
		t.Errorf("acknowledged but not on the platform (%d):\n  %s", len(lost), strings.Join(firstN(lost, 10), "\n  "))
	}
	if len(orphans) != 0 {
		t.Errorf("%d spans on the platform point at a parent it never received:\n  %s", len(orphans), strings.Join(firstN(orphans, 10), "\n  "))
	}
	if differing != "" {
		t.Errorf("trees differ from the input's nearest-kept-ancestor trees (reference: input):\n%s", differing)
	}
}

// faultSeed is SVC_FAULTS_SEED, else a new seed; either way logged, so that a failure replays.
func faultSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("SVC_FAULTS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SVC_FAULTS_SEED=%q: %v", s, err)
		}
		return seed
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (replay with SVC_FAULTS_SEED=%d)", seed, seed)
	return seed
}

// redeliveries counts the deliveries of spans and of scores beyond the first.
func redeliveries(p *platform.Platform) (spans, scores int) {
	for _, o := range p.Observations(platform.ObservationFilter{}) {
		spans += o.Deliveries - 1
	}
	for _, sc := range p.Scores(platform.ScoreFilter{}) {
		scores += sc.Deliveries - 1
	}
	return spans, scores
}

// countDiffering counts the keys whose values differ or that only one of want and got has.
func countDiffering(want, got map[string]string) int {
	n := 0
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			n++
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			n++
		}
	}
	return n
}

func firstN(s []string, n int) []string {
	sort.Strings(s)
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... %d more", len(s)-n))
	}
	return s
}

// twoTiers are one router and three gateways in front of one platform, as distribution/examples/
// two-tier ships them: the gateways on fixed gRPC addresses (the router's static list) with a
// storage directory each, kept across restarts.
type twoTiers struct {
	router   *restartable
	gateways []*restartable
}

func startTiers(t *testing.T, bin string, p *platform.Platform) *twoTiers {
	t.Helper()
	ports, err := collector.FreePorts(tierGateways + 2)
	if err != nil {
		t.Fatal(err)
	}
	tiers := &twoTiers{}
	var hostnames []string
	for i := range tierGateways {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		tiers.gateways = append(tiers.gateways, startRestartable(t, bin, p, "gateway "+addr, collector.Options{
			Configs: gatewayConfigs(), OTLPGRPCEndpoint: addr, StorageDir: t.TempDir()}))
		hostnames = append(hostnames, addr)
	}
	tiers.router = startRestartable(t, bin, p, "router", collector.Options{
		Configs:          []string{routerConfig()},
		Env:              []string{"SVC_GATEWAYS=[" + strings.Join(hostnames, ", ") + "]"},
		OTLPGRPCEndpoint: fmt.Sprintf("127.0.0.1:%d", ports[tierGateways]),
		OTLPHTTPEndpoint: fmt.Sprintf("127.0.0.1:%d", ports[tierGateways+1]),
		StorageDir:       t.TempDir(),
	})
	return tiers
}

// idle: no gateway holds a span for its parent or content or has anything in its queue, and the
// router's queue is empty (from their own metrics).
func (tt *twoTiers) idle() bool {
	zero := func(c *collector.Process, metric string, labels ...string) bool {
		v, err := scrapeSum("http://"+c.MetricsEndpoint+"/metrics", metric, labels...)
		return err == nil && v == 0
	}
	for _, g := range tt.gateways {
		c := g.current()
		if !zero(c, "otelcol_processor_svcspanfilter_spans_held") || !zero(c, "otelcol_exporter_queue_size", `exporter="svc"`) {
			return false
		}
	}
	return zero(tt.router.current(), "otelcol_exporter_queue_size", `exporter="load_balancing"`)
}

// spreadInput is what the test sends: requests by (export moment, service), and what they carry.
type spreadInput struct {
	tick   time.Duration
	traces map[spreadBatch]ptrace.Traces
	logs   map[spreadBatch]plog.Logs
	// spans by trace/span hex; scores sent by trace hex.
	spans  map[string]inputSpan
	scores map[string]int
	runs   int
	// sent is when each trace's first and last requests go (trace hex → from, to).
	sent map[string][2]time.Duration
}

type spreadBatch struct {
	tick    int64
	service string
}

type inputSpan struct {
	name, parent string // parent span id hex, "" for a root
	kept         bool
}

func newSpreadInput(tick time.Duration) *spreadInput {
	return &spreadInput{tick: tick, traces: map[spreadBatch]ptrace.Traces{}, logs: map[spreadBatch]plog.Logs{},
		spans: map[string]inputSpan{}, scores: map[string]int{}, sent: map[string][2]time.Duration{}}
}

// span appends a span to the request service exports at `at`, in the scope of that name.
func (in *spreadInput) span(at time.Duration, service, scope string) ptrace.Span {
	key := spreadBatch{int64(at / in.tick), service}
	td, ok := in.traces[key]
	if !ok {
		td = ptrace.NewTraces()
		serviceResource(td.ResourceSpans().AppendEmpty().Resource(), service)
		in.traces[key] = td
	}
	rs := td.ResourceSpans().At(0)
	for _, ss := range rs.ScopeSpans().All() {
		if ss.Scope().Name() == scope {
			return ss.Spans().AppendEmpty()
		}
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(scope)
	return ss.Spans().AppendEmpty()
}

// logRecord appends a log record to the logs request service exports at `at`.
func (in *spreadInput) logRecord(at time.Duration, service, scope string) plog.LogRecord {
	key := spreadBatch{int64(at / in.tick), service}
	ld, ok := in.logs[key]
	if !ok {
		ld = plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		serviceResource(rl.Resource(), service)
		rl.ScopeLogs().AppendEmpty().Scope().SetName(scope)
		in.logs[key] = ld
	}
	return ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty()
}

func serviceResource(r pcommon.Resource, service string) {
	r.Attributes().PutStr("service.name", service)
	r.Attributes().PutStr("telemetry.sdk.name", "opentelemetry")
	r.Attributes().PutStr("telemetry.sdk.language", "python")
}

// addAgentRun adds one spread agent run that starts `at` into the sending (see the tree above):
// every span ends before its parent; agent-api exports its two spans first, agent-tools then,
// agent-runner its LLM call and last its agent span.
func (in *spreadInput) addAgentRun(rng *rand.Rand, base time.Time, at time.Duration) {
	var tid pcommon.TraceID
	for i := range tid {
		tid[i] = byte(rng.Uint32())
	}
	newID := func() pcommon.SpanID {
		var id pcommon.SpanID
		for i := range id {
			id[i] = byte(rng.Uint32())
		}
		id[0] |= 1 // never the empty id
		return id
	}
	root, agent, chat, openai, tool, execute, mini, orders := newID(), newID(), newID(), newID(), newID(), newID(), newID(), newID()
	jitter := func(from, to time.Duration) time.Duration { return from + time.Duration(rng.Int64N(int64(to-from))) }
	// agent-api exports GET /tool when it ends and POST /agent, which ends later, in the same
	// request or a later one (then alone: a call with nothing of the trace but its dropped root).
	apiAt := at + jitter(1100*time.Millisecond, 1400*time.Millisecond)
	rootAt := apiAt + jitter(0, 500*time.Millisecond)
	toolsAt := apiAt + jitter(200*time.Millisecond, 1200*time.Millisecond)
	executeAt := toolsAt + jitter(0, 600*time.Millisecond)
	chatAt := apiAt + jitter(200*time.Millisecond, 1500*time.Millisecond)
	agentAt := max(chatAt, executeAt) + jitter(300*time.Millisecond, 1500*time.Millisecond)

	started := base.Add(at)
	add := func(exportAt time.Duration, service, scope, name string, kind ptrace.SpanKind, id, parent pcommon.SpanID, from, to int) ptrace.Span {
		s := in.span(exportAt, service, scope)
		s.SetTraceID(tid)
		s.SetSpanID(id)
		s.SetParentSpanID(parent)
		s.SetName(name)
		s.SetKind(kind)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(started.Add(time.Duration(from) * time.Millisecond)))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(started.Add(time.Duration(to) * time.Millisecond)))
		return s
	}
	s := add(rootAt, serviceAPI, workload.ScopeHTTPServer, "POST /agent", ptrace.SpanKindServer, root, pcommon.SpanID{}, 0, 1000)
	s.Attributes().PutStr("http.request.method", "POST")
	s.Attributes().PutStr("http.route", "/agent")
	s.Attributes().PutInt("http.response.status_code", 200)
	s = add(apiAt, serviceAPI, workload.ScopeHTTPServer, "GET /tool", ptrace.SpanKindServer, tool, agent, 350, 700)
	s.Attributes().PutStr("http.request.method", "GET")
	s.Attributes().PutStr("http.route", "/tool")

	s = add(toolsAt, serviceTools, workload.ScopeOpenAI, "chat gpt-4o-mini", ptrace.SpanKindClient, mini, execute, 400, 550)
	s.Attributes().PutStr("gen_ai.operation.name", "chat")
	s.Attributes().PutStr("gen_ai.request.model", "gpt-4o-mini")
	s = add(toolsAt, serviceTools, workload.ScopeDatabase, "SELECT orders", ptrace.SpanKindClient, orders, execute, 560, 600)
	s.Attributes().PutStr("db.system.name", "postgresql")
	s = add(executeAt, serviceTools, scopeTools, "execute_tool lookup_order", ptrace.SpanKindInternal, execute, tool, 380, 650)
	s.Attributes().PutStr("gen_ai.operation.name", "execute_tool")
	s.Attributes().PutStr("gen_ai.tool.name", "lookup_order")
	r := in.logRecord(executeAt, serviceTools, scopeTools)
	r.SetEventName("gen_ai.evaluation.result")
	r.SetTraceID(tid)
	r.SetSpanID(execute)
	r.SetTimestamp(pcommon.NewTimestampFromTime(started.Add(650 * time.Millisecond)))
	r.Attributes().PutStr("gen_ai.evaluation.name", "tool_correct")
	r.Attributes().PutDouble("gen_ai.evaluation.score.value", float64(rng.IntN(10))/10)

	s = add(chatAt, serviceRunner, workload.ScopeHTTPClient, "POST api.openai.com", ptrace.SpanKindClient, openai, chat, 120, 300)
	s.Attributes().PutStr("http.request.method", "POST")
	s = add(chatAt, serviceRunner, workload.ScopeOpenAI, "chat gpt-4o", ptrace.SpanKindClient, chat, agent, 100, 320)
	s.Attributes().PutStr("gen_ai.operation.name", "chat")
	s.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
	e := s.Events().AppendEmpty()
	e.SetName("gen_ai.evaluation.result")
	e.Attributes().PutStr("gen_ai.evaluation.name", "relevance")
	e.Attributes().PutDouble("gen_ai.evaluation.score.value", float64(rng.IntN(10))/10)
	e = s.Events().AppendEmpty()
	e.SetName("gen_ai.evaluation.result")
	e.Attributes().PutStr("gen_ai.evaluation.name", "tone")
	e.Attributes().PutStr("gen_ai.evaluation.score.label", "friendly")
	s = add(agentAt, serviceRunner, workload.ScopeApp, workload.SpanAgent, ptrace.SpanKindInternal, agent, root, 50, 950)
	s.Attributes().PutStr("gen_ai.operation.name", "invoke_agent")
	s.Attributes().PutStr("gen_ai.agent.name", "support-agent")
	e = s.Events().AppendEmpty()
	e.SetName("svc.score")
	e.Attributes().PutStr("svc.score.name", "resolved")
	e.Attributes().PutInt("svc.score.value", 1)
	e.Attributes().PutStr("svc.score.data_type", "BOOLEAN")
	e.Attributes().PutStr("svc.score.target", "trace")
	in.scores[hex.EncodeToString(tid[:])] = 4
	in.sent[hex.EncodeToString(tid[:])] = [2]time.Duration{apiAt, agentAt}
	in.runs++
}

// requests are the input's requests in sending order, spans and log records of one service at
// one moment apart; it records the spans they carry (in.spans).
func (in *spreadInput) requests() []tierSend {
	var out []tierSend
	for k, td := range in.traces {
		out = append(out, tierSend{at: time.Duration(k.tick) * in.tick, conn: serviceConn[k.service], traces: td})
		for _, ss := range td.ResourceSpans().At(0).ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				tid, sid, parent := s.TraceID(), s.SpanID(), s.ParentSpanID()
				p := ""
				if !parent.IsEmpty() {
					p = hex.EncodeToString(parent[:])
				}
				in.spans[hex.EncodeToString(tid[:])+"/"+hex.EncodeToString(sid[:])] = inputSpan{name: shownName(s), parent: p, kept: isKeptByDefault(ss.Scope().Name(), s)}
			}
		}
	}
	for k, ld := range in.logs {
		out = append(out, tierSend{at: time.Duration(k.tick) * in.tick, conn: serviceConn[k.service], logs: ld, isLogs: true})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].at != out[j].at {
			return out[i].at < out[j].at
		}
		return out[i].conn < out[j].conn
	})
	return out
}

// body is the request's OTLP protobuf.
func (r tierSend) body() ([]byte, error) {
	if r.isLogs {
		return plogotlp.NewExportRequestFromLogs(r.logs).MarshalProto()
	}
	return ptraceotlp.NewExportRequestFromTraces(r.traces).MarshalProto()
}

// splitByKills counts the traces with a kill between their first request (the dropped spans) and
// their last (the agent span): about a third of them went to the killed gateway.
func (in *spreadInput) splitByKills(kills []killRecord, start time.Time) int {
	n := 0
	for _, window := range in.sent {
		for _, k := range kills {
			if at := k.at.Sub(start); at > window[0] && at < window[1] {
				n++
				break
			}
		}
	}
	return n
}

func (in *spreadInput) scoreCount() int {
	n := 0
	for _, c := range in.scores {
		n += c
	}
	return n
}

// expectedTree is each kept span of the input below its nearest kept ancestor (or a root when
// every ancestor is dropped), in the form of platformView.parents.
func (in *spreadInput) expectedTree() map[string]string {
	out := map[string]string{}
	for key, s := range in.spans {
		if !s.kept {
			continue
		}
		trace := key[:strings.IndexByte(key, '/')]
		parent := s.parent
		for parent != "" {
			p, ok := in.spans[trace+"/"+parent]
			if !ok || p.kept {
				break
			}
			parent = p.parent
		}
		out[key] = s.name + " ← " + parent
	}
	return out
}

// missing lists the kept spans and the traces' scores the platform does not hold.
func (in *spreadInput) missing(p *platform.Platform) []string {
	var out []string
	for key, s := range in.spans {
		if s.kept {
			trace, span, _ := strings.Cut(key, "/")
			if p.SpanDeliveries(trace, span) == 0 {
				out = append(out, "span "+key+" "+s.name)
			}
		}
	}
	got := map[string]int{}
	for _, sc := range p.Scores(platform.ScoreFilter{}) {
		got[sc.TraceID]++
	}
	for trace, want := range in.scores {
		if got[trace] < want {
			out = append(out, fmt.Sprintf("scores of trace %s: %d of %d", trace, got[trace], want))
		}
	}
	return out
}

// orphans lists the platform's spans whose parent it does not hold, with what the input says
// the parent is.
func (in *spreadInput) orphans(v platformView) []string {
	var out []string
	for trace, spans := range v.byTrace {
		for id, parent := range spans {
			if _, ok := spans[parent]; parent == "" || ok {
				continue
			}
			what := "not in the input"
			if p, ok := in.spans[trace+"/"+parent]; ok {
				what = fmt.Sprintf("%q, kept=%t", p.name, p.kept)
			}
			out = append(out, fmt.Sprintf("%s/%s %q → parent %s (%s)", trace, id, in.spans[trace+"/"+id].name, parent, what))
		}
	}
	return out
}

// shownName is the observation name the platform gives a span: a tool span is named after its
// gen_ai.tool.name (docs/contract.md §14.1), any other after the span.
func shownName(s ptrace.Span) string {
	if v, ok := s.Attributes().Get("gen_ai.tool.name"); ok && v.Str() != "" {
		return v.Str()
	}
	return s.Name()
}
