package e2e

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/workload"
)

// outcomeOverlay turns outcome sampling on in the default config: "every failing trace, every
// trace an evaluation flagged, every call over 0.5 (cost), every run over 30 s, and sample_rate
// (10%) of the rest". settle_duration is longer than
// a restart, so that a SIGKILL mid-run decides on what the run without it sees.
const outcomeOverlay = `yaml:
extensions:
  svcsampling:
    outcome:
      decide_per: %s
      settle_duration: 15s
      decision_wait: 60s
      rules:
        - {name: failed, kind: error}
        - {name: flagged, kind: score, score_name: correctness, boolean: false}
        - {name: costly, kind: cost, cost_over: 0.5}
        - {name: slow, kind: latency, latency_over: 30s}
`

const outcomeRate = 0.1

// TestOutcomeSamplingErrorsAndTenPercent: the built gateway, default config plus an outcome
// section, the outcome workload (conversations of agent traces, 10% failing, 5% flagged by an
// evaluation sent as a span event or a log record, agent runs whose children come first) sent as
// its SDKs export it. Every trace a rule names (failing: error; flagged: score; a call over 0.5:
// cost; a run over 30 s: latency) reaches the platform whole; of the rest,
// exactly the traces the 10% trace-id rule keeps, whole; scores only of the delivered traces, and
// every score of them; the root carries the reason. "kill": SIGKILL and restart on the same
// storage halfway, while the traces sent so far wait for their decision: nothing acknowledged is
// lost and the decisions are the same.
func TestOutcomeSamplingErrorsAndTenPercent(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "no kill", true: "kill"}[kill], func(t *testing.T) {
			runOutcome(t, sampling.DecidePerTrace, kill)
		})
	}
}

// TestOutcomeSamplingSessions: decide_per: session keeps every conversation of a flagged session
// whole (the workload's turns arrive before their session's flag is decided), and samples the
// other sessions by their session id: whole conversations or none.
func TestOutcomeSamplingSessions(t *testing.T) {
	runOutcome(t, sampling.DecidePerSession, false)
}

func runOutcome(t *testing.T, per string, kill bool) {
	bin := collectorBinary(t)
	p := startPlatform(t, "")
	ports, err := collector.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	gw := startRestartable(t, bin, p, "gateway", collector.Options{
		Configs:          []string{collector.DefaultConfig(), fmt.Sprintf(outcomeOverlay, per)},
		Env:              []string{fmt.Sprintf("SVC_SAMPLE_RATE=%v", outcomeRate)},
		OTLPHTTPEndpoint: fmt.Sprintf("127.0.0.1:%d", ports[0]), StorageDir: t.TempDir()})
	senders := newTierSenders(t, gw.current(), 1)

	w := workload.NewOutcomeWorkload(workload.OutcomeOptions{Seed: 30, Sessions: 40, FailingShare: 0.1,
		FlaggedShare: 0.05, EvaluatedShare: 0.3, Epoch: time.Now().Add(-time.Hour)})
	var droppedBefore pcommon.TraceID // decided dropped before the kill; a failing span of it comes after
	if kill {
		droppedBefore = sendDecidedDropped(t, senders, gw.current().MetricsEndpoint)
	}
	for i, e := range w.Exports {
		if kill && i == len(w.Exports)/2 {
			held, err := scrapeSum("http://"+gw.current().MetricsEndpoint+"/metrics", "otelcol_processor_svcspanfilter_decision_held_bytes")
			if err != nil || held == 0 {
				t.Fatalf("nothing waits for a decision at the kill (%v bytes, %v): the kill tests nothing", held, err)
			}
			k := gw.killAndRestart(0)
			if k.err != nil {
				t.Fatal(k.err)
			}
			t.Logf("%s, %d of %d exports sent, %.0f bytes waiting for their decision", k, i, len(w.Exports), held)
			late := ptrace.NewTraces()
			addLateSpanTestSpan(late, "agent", workload.ScopeApp, "chat late", ptrace.SpanKindClient, droppedBefore,
				pcommon.SpanID{0x39, 7: 3}, pcommon.SpanID{0x39, 7: 1}, true)
			late.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
			senders.sendUntilAcknowledged(t, 0, false, mustMarshal(t, late))
		}
		if e.Logs.LogRecordCount() > 0 {
			body, err := plogotlp.NewExportRequestFromLogs(e.Logs).MarshalProto()
			if err != nil {
				t.Fatal(err)
			}
			senders.sendUntilAcknowledged(t, 0, true, body)
			continue
		}
		senders.sendUntilAcknowledged(t, 0, false, mustMarshal(t, e.Spans))
	}

	// What the rules and the rate keep, computed apart from the gateway.
	ratio := sampling.NewRatio(outcomeRate)
	flaggedSession := map[string]bool{}
	ruled := func(tr workload.OutcomeTrace) bool { return tr.Failing || tr.Flagged || tr.Costly || tr.AgentRun }
	for _, tr := range w.Traces {
		if ruled(tr) {
			flaggedSession[tr.SessionID] = true
		}
	}
	want := func(tr workload.OutcomeTrace) (bool, string) {
		switch {
		case tr.Failing:
			return true, "failed"
		case tr.Flagged:
			return true, "flagged"
		case tr.Costly:
			return true, "costly"
		case tr.AgentRun: // the agent span lasts over a minute
			return true, "slow"
		case per == sampling.DecidePerSession && flaggedSession[tr.SessionID]:
			return true, "session"
		case per == sampling.DecidePerSession:
			var id pcommon.TraceID // the session's key where the rate reads a trace id
			binary.BigEndian.PutUint64(id[8:], uint64(sampling.SessionKeyOf(tr.SessionID)))
			return ratio.Keep(id), "sample"
		}
		return ratio.Keep(tr.TraceID), "sample"
	}
	wantSpans, wantScores, rest, restKept := 0, 0, 0, 0
	for _, tr := range w.Traces {
		keep, _ := want(tr)
		if keep {
			wantSpans += tr.GenAISpans
			if tr.Evaluated {
				wantScores++
			}
		}
		if !ruled(tr) {
			rest++
			if keep {
				restKept++
			}
		}
	}
	// Decided within settle_duration of the last export (decision_wait for a trace whose root
	// never came); then what a wrong decision would deliver has time to arrive too.
	if !eventually(90*time.Second, func() bool {
		st := p.Stats()
		return st.UniqueSpans >= wantSpans && st.UniqueScores >= wantScores
	}) {
		t.Errorf("after 90 s the platform has %+v; want %d spans and %d scores", p.Stats(), wantSpans, wantScores)
	}
	time.Sleep(5 * time.Second)

	var failing, flagged, costly, slow, torn, extra, missingScores, strayScores int
	for _, tr := range w.Traces {
		id := tr.TraceID.String()
		keep, reason := want(tr)
		unique := spanIDs(p.ObservationsByTrace(id))
		scores := len(p.Scores(platform.ScoreFilter{TraceID: id, Name: "correctness"}))
		switch {
		case keep && len(unique) != tr.GenAISpans:
			torn++
			t.Errorf("trace %s (failing %v, flagged %v, agent run %v): %d of its %d spans delivered", id, tr.Failing, tr.Flagged, tr.AgentRun, len(unique), tr.GenAISpans)
		case !keep && len(unique) > 0:
			extra++
			t.Errorf("trace %s: dropped by the rules and the rate, yet %d spans delivered", id, len(unique))
		}
		switch {
		case keep && tr.Evaluated && scores == 0:
			missingScores++
			t.Errorf("trace %s: delivered, its evaluation score is not", id)
		case !keep && scores > 0:
			strayScores++
			t.Errorf("trace %s: dropped, yet its score reached the platform", id)
		}
		if keep {
			if tr.Failing {
				failing++
			}
			if tr.Flagged {
				flagged++
			}
			if tr.Costly {
				costly++
			}
			if tr.AgentRun {
				slow++
			}
			if trace, ok := p.Trace(id); !ok || trace.Metadata["sampling_reason"] != reason {
				t.Errorf("trace %s: metadata sampling_reason %v, want %q", id, trace.Metadata["sampling_reason"], reason)
			}
		}
	}
	if n := len(spanIDs(p.ObservationsByTrace(droppedBefore.String()))); kill && n > 0 {
		t.Errorf("trace %s, decided dropped before the kill: %d spans delivered (its failing span after the restart "+
			"was decided again, alone)", droppedBefore, n)
	}
	t.Logf("%d traces (%d spans): %d failing, %d flagged, %d costly, %d runs over 30 s delivered whole; of the other %d, "+
		"%d kept (%.1f%%, rate %v); %d torn, %d delivered wrongly; %d scores, %d missing, %d stray",
		len(w.Traces), wantSpans, failing, flagged, costly, slow, rest, restKept, 100*float64(restKept)/float64(rest), outcomeRate,
		torn, extra, wantScores, missingScores, strayScores)
	if failing == 0 || flagged == 0 || costly == 0 || slow == 0 || restKept == 0 || restKept == rest {
		t.Errorf("the workload gives no mix to test: %d failing, %d flagged, %d costly, %d slow, %d of %d kept by the rate",
			failing, flagged, costly, slow, restKept, rest)
	}
}

// sendDecidedDropped sends a trace of an agent span and a call, of an id the rate drops, and waits for
// the gateway to decide it dropped (settle_duration); it returns its id.
func sendDecidedDropped(t *testing.T, senders *tierSenders, metrics string) pcommon.TraceID {
	tid := pcommon.TraceID{0x39, 0xd0}
	for i := 0; sampling.NewRatio(outcomeRate).Keep(tid); i++ {
		binary.BigEndian.PutUint64(tid[8:], uint64(i)*0x9e3779b97f4a7c15)
	}
	td := ptrace.NewTraces()
	addLateSpanTestSpan(td, "agent", workload.ScopeApp, workload.SpanAgent, ptrace.SpanKindInternal, tid,
		pcommon.SpanID{0x39, 7: 1}, pcommon.SpanID{}, true)
	addLateSpanTestSpan(td, "agent", workload.ScopeApp, "chat", ptrace.SpanKindClient, tid, pcommon.SpanID{0x39, 7: 2},
		pcommon.SpanID{0x39, 7: 1}, true)
	senders.sendUntilAcknowledged(t, 0, false, mustMarshal(t, td))
	if !eventually(time.Minute, func() bool {
		v, err := scrapeSum("http://"+metrics+"/metrics", "otelcol_processor_svcspanfilter_traces_decided", `decision="dropped"`)
		return err == nil && v >= 1
	}) {
		t.Fatal("the trace the rate drops was not decided within a minute")
	}
	return tid
}

// TestOutcomeSamplingAgentRunLongerThanTheWait: agent runs whose spans come over 6 s, children
// first and the root last, with decision_wait 3s: each run is decided on its beginning and its
// later spans follow, also a failing call that arrives after the decision; so each run is on the
// platform whole (the 50% trace-id rule kept it, with its reason on the root) or not at all.
func TestOutcomeSamplingAgentRunLongerThanTheWait(t *testing.T) {
	const overlay = `yaml:
extensions:
  svcsampling:
    outcome:
      settle_duration: 1s
      decision_wait: 3s
      rules:
        - {name: failed, kind: error}
`
	g := startGateway(t, gatewayOptions{env: []string{"SVC_SAMPLE_RATE=0.5"}, configs: []string{collector.DefaultConfig(), overlay}})
	senders := newTierSenders(t, g.collector, 1)
	const runs, steps = 24, 4
	tids := make([]pcommon.TraceID, runs)
	for i := range tids {
		tids[i] = pcommon.TraceID{0x30, 0xa6, byte(i), 15: byte(i)}
		binary.BigEndian.PutUint64(tids[i][8:], uint64(i)*0x9e3779b97f4a7c15) // spread over the rate's bound
	}
	span := func(i, n int) pcommon.SpanID { return pcommon.SpanID{0x30, byte(i), 7: byte(n + 1)} }
	start := time.Now()
	for step := range steps + 1 {
		time.Sleep(time.Until(start.Add(time.Duration(step) * 1500 * time.Millisecond)))
		td := ptrace.NewTraces()
		for i, tid := range tids {
			if step == steps { // the root ends last
				addLateSpanTestSpan(td, "agent", workload.ScopeApp, workload.SpanAgent, ptrace.SpanKindInternal, tid, span(i, steps), pcommon.SpanID{}, true)
				continue
			}
			addLateSpanTestSpan(td, "agent", workload.ScopeApp, fmt.Sprintf("chat %d", step), ptrace.SpanKindClient, tid, span(i, step), span(i, steps), true)
			if step == steps-1 && i%4 == 0 { // a call fails after the run was decided
				rs := td.ResourceSpans()
				rs.At(rs.Len() - 1).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
			}
		}
		senders.sendUntilAcknowledged(t, 0, false, mustMarshal(t, td))
	}
	ratio, kept := sampling.NewRatio(0.5), 0
	for _, tid := range tids {
		if ratio.Keep(tid) {
			kept++
		}
	}
	if kept == 0 || kept == runs {
		t.Fatalf("%d of %d runs kept by the rate: no mix to test", kept, runs)
	}
	g.waitForSpans(t, kept*(steps+1))
	time.Sleep(3 * time.Second) // what a torn decision would deliver has time to arrive too
	for i, tid := range tids {
		got := len(spanIDs(g.platform.ObservationsByTrace(tid.String())))
		want := 0
		if ratio.Keep(tid) {
			want = steps + 1
			if tr, ok := g.platform.Trace(tid.String()); !ok || tr.Metadata["sampling_reason"] != "sample" {
				t.Errorf("run %d: sampling_reason %v, want sample", i, tr.Metadata["sampling_reason"])
			}
		}
		if got != want {
			t.Errorf("run %d (failing call after the decision: %v): %d of its %d spans delivered, want %d", i, i%4 == 0, got, steps+1, want)
		}
	}
	t.Logf("%d runs of %d spans over %s, decision_wait 3s: %d kept whole by the rate, %d dropped whole", runs, steps+1,
		time.Duration(steps)*1500*time.Millisecond, kept, runs-kept)
}

// spanIDs are the distinct span ids of observations (a span delivered again is one).
func spanIDs(observations []platform.Observation) map[string]bool {
	ids := map[string]bool{}
	for _, o := range observations {
		ids[o.ID] = true
	}
	return ids
}
