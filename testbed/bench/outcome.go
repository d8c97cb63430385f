package bench

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/workload"
)

// The gateway's outcome-sampling defaults (svcsamplingextension/README.md) and tail_sampling's
// in testbed/peer/tailsampling-config.yaml, divided by the run's time compression.
const (
	outcomeDecisionWait = 5 * time.Minute
	outcomeSettle       = 5 * time.Second
	// outcomeRestRate is "10% of the rest".
	outcomeRestRate = 0.1
)

// OutcomeConfig is the outcome-sampling comparison (issue 30): the outcome workload replayed at
// its export times, Compress times faster, through O (the gateway with outcome rules), A (the
// default gateway, the CPU baseline) and T (contrib tail_sampling), then O and T again with a
// SIGKILL and a restart halfway.
type OutcomeConfig struct {
	SVCOtelcol, Peer string
	Workload         workload.OutcomeOptions
	// Compress divides the workload's time: its export offsets and the collectors' waits
	// (decision_wait, settle_duration / decision_wait_after_root_received).
	Compress float64
	// Kill runs O and T once more with a SIGKILL halfway.
	Kill bool
	// Senders is the number of requests in flight.
	Senders int
	Pin     Pinning
	Log     io.Writer
}

// OutcomeRun is one build's run.
type OutcomeRun struct {
	Build, Title string
	Killed       bool
	Tally        OutcomeTally
	// Scores: whether the build delivers scores at all (T does not).
	Scores bool
	// CPU of the collector from its start to the end of the drain; PeakRSS its high-water mark.
	CPU     time.Duration
	PeakRSS int64
	// NotAcked counts requests the collector refused for good (never acknowledged), NotAckedLogs
	// those of them that carried evaluation log records (T has no logs pipeline).
	NotAcked, NotAckedLogs int
	// HeldAtKill is the gateway's held bytes waiting for a decision when it was killed.
	HeldAtKill float64
	// LostTraces, LostSpans: what the kill lost (KillLoss); Changed counts the traces delivered
	// that the run without the kill did not deliver and no rule names (a decision changed).
	LostTraces, LostSpans, Changed int
	Kill                           string
	delivered                      map[string]bool
}

// OutcomeReport is the comparison.
type OutcomeReport struct {
	Config                                OutcomeConfig
	Traces, Sessions, Exports, InputSpans int
	Runs                                  []OutcomeRun
	Elapsed                               time.Duration
}

func outcomeBuilds(c OutcomeConfig) (o, a, t Build) {
	wait := time.Duration(float64(outcomeDecisionWait) / c.Compress).Round(time.Millisecond)
	settle := time.Duration(float64(outcomeSettle) / c.Compress).Round(time.Millisecond)
	o = Gateway(c.SVCOtelcol)
	o.Name, o.Title = "O", fmt.Sprintf("svc-otelcol, outcome rules error + flagged + cost > %g, sample_rate %g", c.Workload.CostlyOver, outcomeRestRate)
	o.Env = []string{fmt.Sprintf("SVC_SAMPLE_RATE=%g", outcomeRestRate)}
	o.Configs = append(o.Configs, fmt.Sprintf(`yaml:
extensions:
  svcsampling:
    outcome:
      decision_wait: %s
      settle_duration: %s
      rules:
        - {name: failed, kind: error}
        - {name: flagged, kind: score, score_name: correctness, boolean: false}
        - {name: costly, kind: cost, cost_over: %g}
`, wait, settle, c.Workload.CostlyOver))
	a = Gateway(c.SVCOtelcol)
	t = Peer(c.Peer)
	t.Name, t.Title = "T", "contrib tail_sampling (testbed/peer/tailsampling-config.yaml) on the OTTL peer"
	t.Configs = append(t.Configs, filepath.Join(PeerDir(), "tailsampling-config.yaml"))
	t.Sets = []string{"processors::tail_sampling::decision_wait=" + wait.String(),
		"processors::tail_sampling::decision_wait_after_root_received=" + settle.String()}
	return o, a, t
}

// RunOutcome runs the comparison.
func RunOutcome(ctx context.Context, c OutcomeConfig) (OutcomeReport, error) {
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Compress <= 0 {
		c.Compress = 1
	}
	if c.Senders <= 0 {
		c.Senders = 4
	}
	if c.Workload.CostlyOver == 0 {
		c.Workload.CostlyOver = 0.5
	}
	start := time.Now()
	rep := OutcomeReport{Config: c}
	// Span times in the past: the whole workload ends before the run starts.
	c.Workload.Epoch = start.Add(-time.Hour)
	w := workload.NewOutcomeWorkload(c.Workload)
	sessions := map[string]bool{}
	for _, tr := range w.Traces {
		sessions[tr.SessionID] = true
		rep.InputSpans += tr.Spans
	}
	rep.Traces, rep.Sessions, rep.Exports = len(w.Traces), len(sessions), len(w.Exports)
	o, a, t := outcomeBuilds(c)
	fmt.Fprintf(c.Log, "outcome: %d traces, %d sessions, %d exports, %d spans over %s, replayed %g× faster\n",
		rep.Traces, rep.Sessions, rep.Exports, rep.InputSpans, w.Exports[len(w.Exports)-1].At, c.Compress)
	type step struct {
		b    Build
		kill bool
	}
	plan := []step{{o, false}, {a, false}, {t, false}}
	if c.Kill {
		plan = append(plan, step{o, true}, step{t, true})
	}
	baseline := map[string]map[string]bool{}
	for _, p := range plan {
		run, err := runOutcomeBuild(ctx, c, &w, p.b, p.kill)
		if err != nil {
			rep.Elapsed = time.Since(start)
			return rep, fmt.Errorf("build %s: %w", p.b.Name, err)
		}
		if p.kill {
			run.LostTraces, run.LostSpans = KillLoss(run.truth(&w), baseline[p.b.Name], run.deliveries)
			for _, tr := range run.truth(&w) {
				if run.delivered[tr.TraceID] && !baseline[p.b.Name][tr.TraceID] && !tr.Named() {
					run.Changed++
				}
			}
		} else {
			baseline[p.b.Name] = run.delivered
		}
		fmt.Fprintf(c.Log, "outcome %s%s: %s\n", p.b.Name, map[bool]string{true: " (kill)"}[p.kill], run.summary())
		rep.Runs = append(rep.Runs, run.OutcomeRun)
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// outcomeRunState is a run with what the accounting needs and the report does not keep.
type outcomeRunState struct {
	OutcomeRun
	acked      map[int]int // trace index → acknowledged GenAI spans
	deliveries map[string]OutcomeDelivery
}

func (r *outcomeRunState) truth(w *workload.OutcomeWorkload) []OutcomeTruth {
	out := make([]OutcomeTruth, len(w.Traces))
	for i, tr := range w.Traces {
		out[i] = OutcomeTruth{TraceID: tr.TraceID.String(), SessionID: tr.SessionID,
			Failing: tr.Failing, Flagged: tr.Flagged, Costly: tr.Costly, AckedGenAISpans: r.acked[i]}
	}
	return out
}

func (r *outcomeRunState) summary() string {
	t := r.Tally
	s := fmt.Sprintf("failing %s, flagged %s, costly %s whole; torn %d; sessions with holes %d/%d; spans %d/%d; stray scores %d; CPU %s, peak RSS %d MiB",
		shareOf(t.FailingWhole, t.Failing), shareOf(t.FlaggedWhole, t.Flagged), shareOf(t.CostlyWhole, t.Costly),
		t.Torn, t.SessionsWithHoles, t.Sessions, t.DeliveredSpans, t.InputSpans, t.ScoresOfUndelivered, r.CPU, r.PeakRSS>>20)
	if r.Killed {
		s += fmt.Sprintf("; %s; lost %d spans of %d traces; %d traces delivered that the run without the kill dropped", r.Kill, r.LostSpans, r.LostTraces, r.Changed)
	}
	return s
}

// isGenAIScope: the scopes whose spans every build's GenAI filter keeps (the workload's own
// count, OutcomeTrace.GenAISpans).
func isGenAIScope(scope string) bool {
	return scope != workload.ScopeHTTPServer && scope != workload.ScopeHTTPClient
}

func runOutcomeBuild(ctx context.Context, c OutcomeConfig, w *workload.OutcomeWorkload, b Build, kill bool) (*outcomeRunState, error) {
	run := &outcomeRunState{OutcomeRun: OutcomeRun{Build: b.Name, Title: b.Title, Killed: kill, Scores: b.Delivers == GenAISpansAndScores},
		acked: map[int]int{}}
	rig, err := StartRig(ctx, c.Pin.apply(b), RigOptions{})
	if err != nil {
		return nil, err
	}
	defer func() { _ = rig.Close() }()

	var cpuBefore time.Duration // CPU of the collectors killed before the last one
	half := len(w.Exports) / 2
	phases := [][2]int{{0, len(w.Exports)}}
	if kill {
		phases = [][2]int{{0, half}, {half, len(w.Exports)}}
	}
	origin := time.Now()
	var mu sync.Mutex
	for pi, ph := range phases {
		if pi > 0 {
			if g, ok := scrapeGauges(ctx, rig.Collector.MetricsEndpoint); ok {
				run.HeldAtKill = g["otelcol_processor_svcspanfilter_decision_held_bytes"]
			}
			u, _ := rig.Usage()
			cpuBefore += u.CPU
			at := time.Now()
			rig.Collector.Kill()
			if err := rig.StartCollector(ctx); err != nil {
				return nil, err
			}
			run.Kill = fmt.Sprintf("SIGKILL at %s of the replay (%d of %d exports sent), %.0f bytes held for a decision, restarted in %s",
				at.Sub(origin).Round(time.Second), ph[0], len(w.Exports), run.HeldAtKill, time.Since(at).Round(100*time.Millisecond))
		}
		endpoint := rig.Collector.OTLPHTTPEndpoint
		next := make(chan int)
		var wg sync.WaitGroup
		for range c.Senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					e := w.Exports[i]
					ok := sendOutcomeExport(ctx, endpoint, e)
					mu.Lock()
					if ok {
						run.acked[e.Trace] += genAISpans(e)
					} else {
						run.NotAcked++
						if e.Logs.LogRecordCount() > 0 {
							run.NotAckedLogs++
						}
					}
					mu.Unlock()
				}
			}()
		}
		for i := ph[0]; i < ph[1]; i++ {
			due := origin.Add(time.Duration(float64(w.Exports[i].At) / c.Compress))
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
			if ctx.Err() != nil {
				break
			}
			next <- i
		}
		close(next)
		wg.Wait()
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// Drain: the last traces wait settle_duration (after their root) or decision_wait.
	wait := time.Duration(float64(outcomeDecisionWait) / c.Compress)
	drainOutcome(ctx, rig.Platform, wait+15*time.Second, max(5*time.Second, 3*time.Duration(float64(outcomeSettle)/c.Compress)))
	u, err := rig.Usage()
	if err != nil {
		return nil, err
	}
	run.CPU, run.PeakRSS = cpuBefore+u.CPU, u.PeakRSS
	run.deliveries = readOutcomeDeliveries(rig.Platform, w, b.Delivers == GenAISpansAndScores)
	run.delivered = map[string]bool{}
	for id, d := range run.deliveries {
		if d.Spans > 0 {
			run.delivered[id] = true
		}
	}
	inputSpans := 0
	for _, tr := range w.Traces {
		inputSpans += tr.Spans
	}
	run.Tally = TallyOutcome(run.truth(w), run.deliveries, inputSpans)
	return run, nil
}

func genAISpans(e workload.Export) int {
	n := 0
	rss := e.Spans.ResourceSpans()
	for i := range rss.Len() {
		for _, ss := range rss.At(i).ScopeSpans().All() {
			if isGenAIScope(ss.Scope().Name()) {
				n += ss.Spans().Len()
			}
		}
	}
	return n
}

// sendOutcomeExport sends one export until the collector acknowledges it (an SDK retries
// refusals and unanswered requests); false when it refuses it for good or ctx ends.
func sendOutcomeExport(ctx context.Context, endpoint string, e workload.Export) bool {
	var body []byte
	var err error
	path := "/v1/traces"
	if e.Logs.LogRecordCount() > 0 {
		path = "/v1/logs"
		body, err = plogotlp.NewExportRequestFromLogs(e.Logs).MarshalProto()
	} else {
		body, err = ptraceotlp.NewExportRequestFromTraces(e.Spans).MarshalProto()
	}
	if err != nil {
		return false
	}
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+endpoint+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK:
				return true
			case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests:
				return false
			}
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	return false
}

// drainOutcome waits until the platform has received nothing new for quiet, at most limit.
func drainOutcome(ctx context.Context, p *platform.Platform, limit, quiet time.Duration) {
	deadline := time.Now().Add(limit)
	last, lastChange := -1, time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		st := p.Stats()
		if n := st.SpansReceived + st.ScoresReceived; n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) >= quiet {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// readOutcomeDeliveries reads, per trace, the distinct GenAI spans the platform holds (by the
// ids the workload sent) and its scores.
func readOutcomeDeliveries(p *platform.Platform, w *workload.OutcomeWorkload, scores bool) map[string]OutcomeDelivery {
	out := map[string]OutcomeDelivery{}
	var span [16]byte
	for _, e := range w.Exports {
		id := w.Traces[e.Trace].TraceID.String()
		rss := e.Spans.ResourceSpans()
		for i := range rss.Len() {
			for _, ss := range rss.At(i).ScopeSpans().All() {
				if !isGenAIScope(ss.Scope().Name()) {
					continue
				}
				for _, s := range ss.Spans().All() {
					sid := s.SpanID()
					hex.Encode(span[:], sid[:])
					if p.SpanDeliveries(id, string(span[:])) > 0 {
						d := out[id]
						d.Spans++
						out[id] = d
					}
				}
			}
		}
	}
	if scores {
		for _, sc := range p.Scores(platform.ScoreFilter{}) {
			d := out[sc.TraceID]
			d.Scores++
			out[sc.TraceID] = d
		}
	}
	return out
}

// Markdown is the comparison table and how it was run.
func (r OutcomeReport) Markdown() string {
	var b strings.Builder
	c := r.Config
	wait := time.Duration(float64(outcomeDecisionWait) / c.Compress).Round(time.Millisecond)
	settle := time.Duration(float64(outcomeSettle) / c.Compress).Round(time.Millisecond)
	fmt.Fprintf(&b, "## Outcome sampling against contrib tail_sampling (issue 30)\n\n")
	fmt.Fprintf(&b, "Workload (testbed/workload/outcome.go, seed %d): %d traces in %d sessions, %d spans in %d exports; 2%% failing, 1%% flagged (`correctness` = false, half as span events, half as log records), cost > %g costly, 5%% agent runs of 1–5 min exported before their root. "+
		"Replayed at the exports' offsets **%g× faster**, so every wait is divided by %g too: O's `decision_wait` %s and `settle_duration` %s, T's `decision_wait` %s and `decision_wait_after_root_received` %s (5m and 5s unscaled). %s. Run took %s.\n\n",
		c.Workload.Seed, r.Traces, r.Sessions, r.InputSpans, r.Exports, c.Workload.CostlyOver, c.Compress, c.Compress, wait, settle, wait, settle, c.Pin.Describe(), r.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "- **O**: %s, storage as shipped\n- **A**: svc-otelcol, default config (no outcome sampling, sample_rate 1): the CPU baseline\n- **T**: %s\n\n", r.find("O", false).Title, r.find("T", false).Title)
	b.WriteString("| build | failing delivered whole | flagged delivered whole | costly delivered whole | rest delivered whole | traces torn | sessions with holes | spans delivered / input span | scores of undelivered traces | CPU µs / input span | peak RSS MiB |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range r.Runs {
		if run.Killed {
			continue
		}
		t := run.Tally
		stray := fmt.Sprint(t.ScoresOfUndelivered)
		if !run.Scores {
			stray = "n/a (no scores)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %.3f | %s | %.1f | %d |\n", run.Build,
			shareOf(t.FailingWhole, t.Failing), shareOf(t.FlaggedWhole, t.Flagged), shareOf(t.CostlyWhole, t.Costly), shareOf(t.RestWhole, t.Rest),
			shareOf(t.Torn, t.Traces), shareOf(t.SessionsWithHoles, t.Sessions), ratio(float64(t.DeliveredSpans), float64(t.InputSpans)),
			stray, cpuPerSpan(run.CPU, t.InputSpans), run.PeakRSS>>20)
	}
	if o, a := r.find("O", false), r.find("A", false); o.Build != "" && a.Build != "" {
		fmt.Fprintf(&b, "\nCPU per input span O/A: **%.2f** (target ≤ 1.2); T/A: %.2f. CPU from the collector's start to the end of the drain, same run.\n",
			ratio(float64(o.CPU), float64(a.CPU)), ratio(float64(r.find("T", false).CPU), float64(a.CPU)))
	}
	if r.find("O", true).Build != "" || r.find("T", true).Build != "" {
		b.WriteString("\n**SIGKILL mid-run** (once, halfway through the exports, then restarted; O on its storage). Lost: acknowledged GenAI spans of the traces the build should deliver (the rules' traces, and those its run without the kill delivered) that the platform does not hold.\n\n")
		b.WriteString("| build | kill | lost spans (traces) | delivered, dropped without the kill | failing / flagged / costly delivered whole | torn |\n|---|---|---|---|---|---|\n")
		for _, run := range r.Runs {
			if !run.Killed {
				continue
			}
			t := run.Tally
			fmt.Fprintf(&b, "| %s | %s | %d (%d) | %d | %s / %s / %s | %d |\n", run.Build, run.Kill, run.LostSpans, run.LostTraces, run.Changed,
				shareOf(t.FailingWhole, t.Failing), shareOf(t.FlaggedWhole, t.Flagged), shareOf(t.CostlyWhole, t.Costly), t.Torn)
		}
	}
	b.WriteString("\nTraces the rules name that were not delivered whole, torn traces, and scores of undelivered traces (first ten of each):\n\n")
	for _, run := range r.Runs {
		kill := map[bool]string{true: " (kill)"}[run.Killed]
		for _, l := range []struct {
			what string
			ids  []string
		}{{"named, not whole", run.Tally.MissedNamedIDs}, {"torn", run.Tally.TornIDs}, {"scores, trace undelivered", run.Tally.StrayScoreIDs}} {
			if len(l.ids) > 0 {
				fmt.Fprintf(&b, "- %s%s %s: %s\n", run.Build, kill, l.what, strings.Join(l.ids, ", "))
			}
		}
		if run.NotAcked > 0 {
			fmt.Fprintf(&b, "- %s%s: %d requests refused for good (%d of them evaluation log records)\n", run.Build, kill, run.NotAcked, run.NotAckedLogs)
		}
	}
	return b.String()
}

func (r OutcomeReport) find(build string, killed bool) OutcomeRun {
	for _, run := range r.Runs {
		if run.Build == build && run.Killed == killed {
			return run
		}
	}
	return OutcomeRun{}
}

func cpuPerSpan(cpu time.Duration, spans int) float64 {
	if spans == 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / float64(spans)
}

// WriteOutcome writes bench-outcome.md into dir.
func (r OutcomeReport) WriteOutcome(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "bench-outcome.md"), []byte(r.Markdown()), 0o644)
}
