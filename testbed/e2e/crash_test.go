package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/svc/svc-collector/testbed/bench"
	"github.com/svc/svc-collector/testbed/loadgen"
	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/workload"
)

// parentDelay is how long after its children an agent's parent spans end and are sent.
const parentDelay = 20 * time.Second

// TestFaultAgentKills: agent traces whose children are sent first and whose parents
// (`invoke_agent` and the HTTP server span above it) end and are sent 20 s later, while the
// collector, with the default config, is killed with SIGKILL at random moments and restarted at
// once on the same storage directory; the platform is down for a third of the run (503), so
// that the exporter's queue holds data at the first kill. The sender behaves like an OTLP SDK: it retries a request
// until the collector acknowledges it. Every acknowledged span and score must reach the
// platform; duplicates (requests whose answer the kill swallowed, deliveries in flight) are
// reported. Short mode: 3 kills; SVC_FAULTS=long: 10 kills over a longer load.
//
// SVC_FAULTS_CONFIG, a comma-separated list of config files, replaces the default config (to
// measure the loss of another configuration).
func TestFaultAgentKills(t *testing.T) {
	build := bench.Gateway(collectorBinary(t))
	if cfg := os.Getenv("SVC_FAULTS_CONFIG"); cfg != "" {
		build.Configs = strings.Split(cfg, ",")
		t.Logf("config: %s", cfg)
	}
	rig := startFaultRigOf(t, build, bench.RigOptions{})
	w := faultWorkload(t, loadgen.WorkloadOptions{})
	load := longer(12*time.Second, 60*time.Second)
	kills := 3
	if faultsLong() {
		kills = 10
	}
	const interval, tracesPerRequest = 250 * time.Millisecond, 4

	s := newKillSafeSender(t, rig)
	defer s.close()
	ledger := newAckLedger()

	// Timeline: a children request every interval during load, each trace's parents parentDelay
	// later; kills at random moments from the first second to the last parent request.
	type send struct {
		at       time.Duration
		children bool
		traces   ptrace.Traces
	}
	var plan []send
	seq := uint64(0)
	for at := time.Duration(0); at < load; at += interval {
		req := w.NewRequest(seq, tracesPerRequest, 1<<20, 16<<20)
		seq += uint64(req.Traces)
		children, parents := splitAgentTraces(t, req.Body, req.Traces)
		plan = append(plan, send{at: at, traces: children, children: true}, send{at: at + parentDelay, traces: parents})
	}
	sort.SliceStable(plan, func(i, j int) bool { return plan[i].at < plan[j].at })
	end := plan[len(plan)-1].at
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))
	// The platform is down for a third of the run, so that the exporter's queue holds data when
	// a kill comes: the first kill falls in the outage, the others anywhere.
	outageFrom, outageTo := end/4, end/4+end/3
	killAt := make([]time.Duration, kills)
	killAt[0] = outageFrom + time.Second + time.Duration(rng.Int64N(int64(outageTo-outageFrom-2*time.Second)))
	for i := 1; i < len(killAt); i++ {
		killAt[i] = time.Second + time.Duration(rng.Int64N(int64(end-time.Second)))
	}
	sort.Slice(killAt, func(i, j int) bool { return killAt[i] < killAt[j] })
	t.Logf("%d requests over %s, platform down from %s to %s, kills at %v", len(plan), end, outageFrom, outageTo, killAt)

	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, at := range killAt {
			time.Sleep(time.Until(start.Add(at)))
			s.kill(t, rig)
		}
	})
	wg.Go(func() {
		time.Sleep(time.Until(start.Add(outageFrom)))
		if err := rig.Platform.SetDown(platform.DownRefuse); err != nil {
			t.Error(err)
		}
		time.Sleep(time.Until(start.Add(outageTo)))
		if err := rig.Platform.SetDown(platform.Up); err != nil {
			t.Error(err)
		}
	})
	for _, p := range plan {
		time.Sleep(time.Until(start.Add(p.at)))
		if !p.children {
			stampEnd(p.traces, time.Now()) // the parents end now, parentDelay after their children
		}
		body, err := ptraceotlp.NewExportRequestFromTraces(p.traces).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		s.sendUntilAcknowledged(t, body)
		ledger.acknowledge(p.traces, p.children)
	}
	wg.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	report := ledger.settle(ctx, rig)
	line := fmt.Sprintf("fault agent-kills-%d: %s | kills=%d send-retries=%d", kills, report, kills, s.retries)
	fmt.Println(line)
	t.Log(line)
	if report.children.acked == 0 || report.parents.acked == 0 || report.scores.acked == 0 {
		t.Fatalf("nothing to account for: %s", report)
	}
	if report.parents.lost != 0 || report.scores.lost != 0 {
		t.Errorf("lost %d parent spans and %d scores the collector acknowledged", report.parents.lost, report.scores.lost)
	}
	if report.children.lost != 0 {
		t.Errorf("lost %d child spans the collector acknowledged (held by svcspanfilter while waiting for their parent)", report.children.lost)
	}
}

// splitAgentTraces splits a request of whole agent traces into the children (every span below
// the agent span) and the parents (the agent span and the HTTP server root).
func splitAgentTraces(t *testing.T, body []byte, traces int) (children, parents ptrace.Traces) {
	t.Helper()
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		t.Fatal(err)
	}
	isParent := func(s ptrace.Span) bool { return s.Name() == workload.SpanAgent || s.ParentSpanID().IsEmpty() }
	children, parents = ptrace.NewTraces(), ptrace.NewTraces()
	req.Traces().CopyTo(children)
	req.Traces().CopyTo(parents)
	keep := func(td ptrace.Traces, want bool) {
		td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
			rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
				ss.Spans().RemoveIf(func(s ptrace.Span) bool { return isParent(s) != want })
				return ss.Spans().Len() == 0
			})
			return rs.ScopeSpans().Len() == 0
		})
	}
	keep(children, false)
	keep(parents, true)
	if n := parents.SpanCount(); n != 2*traces {
		t.Fatalf("%d parent spans in a request of %d traces, want 2 each", n, traces)
	}
	return children, parents
}

// stampEnd makes every span of td end at now.
func stampEnd(td ptrace.Traces, now time.Time) {
	ts := pcommon.NewTimestampFromTime(now)
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				s.SetEndTimestamp(ts)
			}
		}
	}
}

// restart starts the rig's collector again on the same storage directory.
func restart(t *testing.T, rig *bench.Rig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := rig.StartCollector(ctx); err != nil {
		t.Fatal(err)
	}
}

// killSafeSender sends over OTLP/HTTP to whichever collector process is running, and retries
// like an SDK when the collector refuses, fails or is being restarted.
type killSafeSender struct {
	mu      sync.Mutex // held by a kill and restart, and by each send attempt
	sender  loadgen.Sender
	retries int
}

func newKillSafeSender(t *testing.T, rig *bench.Rig) *killSafeSender {
	t.Helper()
	s, err := rig.Sender(loadgen.ProtocolHTTP)
	if err != nil {
		t.Fatal(err)
	}
	return &killSafeSender{sender: s}
}

// kill SIGKILLs the collector, wherever it is in a request, and restarts it on the same storage;
// sends wait for the restart.
func (s *killSafeSender) kill(t *testing.T, rig *bench.Rig) {
	rig.Collector.Kill()
	s.mu.Lock()
	defer s.mu.Unlock()
	restart(t, rig)
	_ = s.sender.Close()
	next, err := rig.Sender(loadgen.ProtocolHTTP)
	if err != nil {
		t.Error(err)
		return
	}
	s.sender = next
}

func (s *killSafeSender) sendUntilAcknowledged(t *testing.T, body []byte) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		s.mu.Lock()
		sender := s.sender
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out := sender.Send(ctx, body)
		cancel()
		switch out.Verdict {
		case loadgen.Accepted:
			return
		case loadgen.Rejected:
			t.Fatalf("the collector rejected a request for good: %s", out.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector did not acknowledge a request for 3 minutes (last answer %s)", out.Status)
		}
		s.mu.Lock()
		s.retries++
		s.mu.Unlock()
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *killSafeSender) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.sender.Close()
}

// ackLedger is what the collector acknowledged: GenAI spans by category, scores by trace.
type ackLedger struct {
	children, parents map[[2]string]bool // (trace, span) hex
	scores            map[string]int     // trace hex -> score events acknowledged
	scoredParts       map[string]bool    // trace hex + part: counted once however often resent
}

func newAckLedger() *ackLedger {
	return &ackLedger{children: map[[2]string]bool{}, parents: map[[2]string]bool{}, scores: map[string]int{}, scoredParts: map[string]bool{}}
}

func (l *ackLedger) acknowledge(td ptrace.Traces, children bool) {
	spans := l.parents
	part := "/parents"
	if children {
		spans, part = l.children, "/children"
	}
	counted := map[string]bool{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				tid, sid := s.TraceID(), s.SpanID()
				traceHex := hex.EncodeToString(tid[:])
				if isKeptByDefault(ss.Scope().Name(), s) {
					spans[[2]string{traceHex, hex.EncodeToString(sid[:])}] = true
				}
				if !l.scoredParts[traceHex+part] {
					counted[traceHex] = true
					for _, e := range s.Events().All() {
						if e.Name() == "gen_ai.evaluation.result" || e.Name() == "svc.score" {
							l.scores[traceHex]++
						}
					}
				}
			}
		}
	}
	for traceHex := range counted {
		l.scoredParts[traceHex+part] = true
	}
}

// isKeptByDefault is the workload's own knowledge of its GenAI spans: the scopes of its LLM and
// retrieval tracers, and the spans its app tracer marks with gen_ai attributes.
func isKeptByDefault(scope string, s ptrace.Span) bool {
	if scope == workload.ScopeOpenAI || scope == workload.ScopeRetrieval {
		return true
	}
	for k := range s.Attributes().All() {
		if strings.HasPrefix(k, "gen_ai.") {
			return true
		}
	}
	return false
}

type tally struct{ acked, delivered, lost, duplicated int }

func (c tally) String() string {
	return fmt.Sprintf("acked=%d delivered=%d lost=%d duplicated=%d", c.acked, c.delivered, c.lost, c.duplicated)
}

type killReport struct{ children, parents, scores tally }

func (r killReport) String() string {
	return fmt.Sprintf("child spans (held for their parent) %s | parent spans %s | scores %s", r.children, r.parents, r.scores)
}

// settle waits until everything acknowledged arrived or ctx ends, and reports.
func (l *ackLedger) settle(ctx context.Context, rig *bench.Rig) killReport {
	for {
		r := l.reckon(rig)
		if r.children.lost+r.parents.lost+r.scores.lost == 0 {
			return r
		}
		select {
		case <-ctx.Done():
			return r
		case <-time.After(time.Second):
		}
	}
}

func (l *ackLedger) reckon(rig *bench.Rig) killReport {
	var r killReport
	count := func(spans map[[2]string]bool, c *tally) {
		for k := range spans {
			c.acked++
			switch n := rig.Platform.SpanDeliveries(k[0], k[1]); n {
			case 0:
				c.lost++
			default:
				c.delivered++
				c.duplicated += n - 1
			}
		}
	}
	count(l.children, &r.children)
	count(l.parents, &r.parents)
	got := map[string][2]int{}
	for _, sc := range rig.Platform.Scores(platform.ScoreFilter{}) {
		n := got[sc.TraceID]
		n[0]++
		n[1] += sc.Deliveries - 1
		got[sc.TraceID] = n
	}
	for traceHex, want := range l.scores {
		r.scores.acked += want
		r.scores.delivered += min(want, got[traceHex][0])
		r.scores.lost += max(0, want-got[traceHex][0])
		r.scores.duplicated += got[traceHex][1]
	}
	return r
}
