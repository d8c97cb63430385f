package e2e

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/workload"
)

// evaluatorTrace is one trace of the evaluator outcome workload and what its evaluators find.
type evaluatorTrace struct {
	id      pcommon.TraceID
	refusal bool // its answer, sent as a content log record, is a refusal: refusal = 1
	badJSON bool // its JSON answer does not parse: json_output = 0
}

func (tr evaluatorTrace) flagged() bool { return tr.refusal || tr.badJSON }

// evaluatorOutcomeWorkload: traces of an agent, a non-GenAI HTTP span under it (dropped by the
// span filter, ending late) and a generation under that, sent as an SDK exports them: first the
// generations, then their content log records, then the HTTP spans and roots. A quarter answer
// with a refusal (content as log records, as the official OpenAI instrumentations send it), a
// quarter with invalid JSON; a third are slow (slow_generation, whose comment names the
// observation, whose name carries an e-mail address that masking removes).
func evaluatorOutcomeWorkload(n int) ([]evaluatorTrace, []ptrace.Traces, []plog.Logs) {
	traces := make([]evaluatorTrace, n)
	children, late := ptrace.NewTraces(), ptrace.NewTraces()
	logs := plog.NewLogs()
	start := time.Now().Add(-time.Minute)
	ts := func(d time.Duration) pcommon.Timestamp { return pcommon.NewTimestampFromTime(start.Add(d)) }
	spanID := func(tid pcommon.TraceID, role string) pcommon.SpanID {
		h := fnv.New64a()
		_, _ = h.Write(tid[:])
		_, _ = h.Write([]byte(role))
		var sid pcommon.SpanID
		binary.BigEndian.PutUint64(sid[:], h.Sum64()|1)
		return sid
	}
	add := func(td ptrace.Traces, scope, name string, tid pcommon.TraceID, sid, parent pcommon.SpanID, d time.Duration) ptrace.Span {
		addLateSpanTestSpan(td, "travel-agent", scope, name, ptrace.SpanKindInternal, tid, sid, parent, false)
		s := td.ResourceSpans().At(td.ResourceSpans().Len() - 1).ScopeSpans().At(0).Spans().At(0)
		s.SetStartTimestamp(ts(0))
		s.SetEndTimestamp(ts(d))
		return s
	}
	for i := range traces {
		sum := sha256.Sum256(fmt.Appendf(nil, "evalwire trace %d", i))
		var tid pcommon.TraceID
		copy(tid[:], sum[:])
		tr := evaluatorTrace{id: tid, refusal: i%4 == 0, badJSON: i%4 == 1}
		traces[i] = tr
		root, http, chat := spanID(tid, "agent"), spanID(tid, "http"), spanID(tid, "chat")
		d := time.Second
		if i%3 == 0 {
			d = 6 * time.Second
		}
		if tr.refusal {
			// An official OpenAI instrumentation's span: its content comes as log records.
			s := add(children, contentScope, "chat "+contentModel, tid, chat, http, d)
			s.SetKind(ptrace.SpanKindClient)
			s.Attributes().PutStr("gen_ai.operation.name", "chat")
			s.Attributes().PutStr("gen_ai.system", "openai")
			s.Attributes().PutStr("gen_ai.request.model", contentModel)
			rl := logs.ResourceLogs().AppendEmpty()
			rl.Resource().Attributes().PutStr("service.name", "travel-agent")
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName(contentScope)
			r := sl.LogRecords().AppendEmpty()
			r.SetEventName("gen_ai.choice")
			r.SetTraceID(tid)
			r.SetSpanID(chat)
			r.SetTimestamp(ts(d))
			r.Attributes().PutStr("gen_ai.system", "openai")
			body := r.Body().SetEmptyMap()
			body.PutStr("finish_reason", "stop")
			body.PutInt("index", 0)
			body.PutEmptyMap("message").PutStr("content", "I'm sorry, I can't write to "+e2eEmail+".")
		} else {
			s := add(children, workload.ScopeApp, "chat", tid, chat, http, d)
			s.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
			s.Attributes().PutStr("logfire.msg", "chat for "+e2eEmail) // the observation's name: masked
			s.Attributes().PutStr("svc.observation.metadata.response_format", "json")
			out := `{"plan":["fly","hotel"],"contact":"` + e2eEmail + `"}`
			if tr.badJSON {
				out = `{"plan":["fly",`
			}
			s.Attributes().PutStr("svc.observation.output", out)
		}
		add(late, "io.opentelemetry.http", "POST /book", tid, http, root, 10*time.Second).SetKind(ptrace.SpanKindServer)
		add(late, workload.ScopeApp, workload.SpanAgent, tid, root, pcommon.SpanID{}, 11*time.Second).
			Attributes().PutStr("gen_ai.operation.name", "invoke_agent")
	}
	return traces, []ptrace.Traces{children, late}, []plog.Logs{logs}
}

// scoreKeys are a trace's delivered scores, each as all a user reads of it.
func scoreKeys(p *platform.Platform, traceID string) []string {
	var keys []string
	for _, sc := range p.Scores(platform.ScoreFilter{TraceID: traceID}) {
		keys = append(keys, fmt.Sprintf("%s obs=%s %s=%v (%s) %q", sc.ID, sc.ObservationID, sc.Name, sc.Value, sc.DataType, sc.Comment))
	}
	sort.Strings(keys)
	return keys
}

// TestOutcomeEvaluatorScoresKeepTraces: the evaluators of distribution/examples/evaluators.yaml
// decide outcome sampling with distribution/examples/outcome-evaluators.yaml (rules on the
// refusal and json_output scores, SVC_SAMPLE_RATE 0.25 of the rest). The same workload goes to a
// gateway with today's wiring (evaluators.yaml alone, every trace kept) and to one with the
// outcome wiring. Every flagged trace is delivered whole by the outcome gateway, the others at the
// rate; every delivered trace has exactly the scores (ids, observations, values, comments) the
// gateway of today's wiring delivers for it; no score of a dropped trace is delivered; no score
// carries the masked e-mail address. "kill": the outcome gateway is SIGKILLed and restarted on
// its storage while the generations wait for their parents (the roots come after the restart):
// the evaluators' span filter recovers them, and the scores and decisions are the same.
func TestOutcomeEvaluatorScoresKeepTraces(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "no kill", true: "kill"}[kill], func(t *testing.T) {
			runOutcomeEvaluators(t, kill)
		})
	}
}

func runOutcomeEvaluators(t *testing.T, kill bool) {
	const rate = 0.25
	examples := filepath.Join(collector.RepoRoot(), "distribution", "examples")
	evaluators := filepath.Join(examples, "evaluators.yaml")
	today := startGateway(t, gatewayOptions{configs: []string{collector.DefaultConfig(), evaluators}})
	ports, err := collector.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	outcome := &gateway{platform: startPlatform(t, "")}
	gw := startRestartable(t, collectorBinary(t), outcome.platform, "gateway", collector.Options{
		Configs: []string{collector.DefaultConfig(), evaluators, filepath.Join(examples, "outcome-evaluators.yaml"),
			"yaml:extensions::svcsampling::outcome::settle_duration: 2s"},
		Env:              []string{fmt.Sprintf("SVC_SAMPLE_RATE=%v", rate)},
		OTLPHTTPEndpoint: fmt.Sprintf("127.0.0.1:%d", ports[0]), StorageDir: t.TempDir()})

	traces, spanBatches, logBatches := evaluatorOutcomeWorkload(40)
	logsBody, err := plogotlp.NewExportRequestFromLogs(logBatches[0]).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*collector.Process{today.collector, gw.current()} {
		senders := newTierSenders(t, c, 1)
		senders.sendUntilAcknowledged(t, 0, false, mustMarshal(t, spanBatches[0]))
		senders.sendUntilAcknowledged(t, 0, true, logsBody)
		if kill && c == gw.current() {
			k := gw.killAndRestart(0)
			if k.err != nil {
				t.Fatal(k.err)
			}
			t.Logf("%s, before the roots", k)
		}
		senders.sendUntilAcknowledged(t, 0, false, mustMarshal(t, spanBatches[1]))
	}

	// Today's wiring delivers every trace (no sampling): the reference.
	const spansPerTrace = 2 // the agent and its generation; the HTTP span is not GenAI
	today.waitForSpans(t, len(traces)*spansPerTrace)
	todayScores := 0 // json_output or refusal on every generation, slow_generation on the slow ones
	for i := range traces {
		todayScores++
		if i%3 == 0 {
			todayScores++
		}
	}
	today.waitForScores(t, todayScores)
	ratio := sampling.NewRatio(rate)
	wantSpans := 0
	for _, tr := range traces {
		if tr.flagged() || ratio.Keep(tr.id) {
			wantSpans += spansPerTrace
		}
	}
	outcome.waitForSpans(t, wantSpans)
	if !eventually(60*time.Second, func() bool {
		for _, tr := range traces {
			id := tr.id.String()
			if len(spanIDs(outcome.platform.ObservationsByTrace(id))) > 0 &&
				len(scoreKeys(outcome.platform, id)) < len(scoreKeys(today.platform, id)) {
				return false
			}
		}
		return true
	}) {
		t.Errorf("after 60 s the outcome gateway has not delivered every score of its kept traces")
	}
	time.Sleep(5 * time.Second) // what a wrong decision would deliver has time to arrive too

	var flagged, flaggedKept, rest, restKept, torn, wrong, strayScores, scores int
	for _, tr := range traces {
		id := tr.id.String()
		want := tr.flagged() || ratio.Keep(tr.id)
		got := len(spanIDs(outcome.platform.ObservationsByTrace(id)))
		reference, delivered := scoreKeys(today.platform, id), scoreKeys(outcome.platform, id)
		if tr.flagged() {
			flagged++
		} else {
			rest++
		}
		switch {
		case want && got != spansPerTrace:
			torn++
			t.Errorf("trace %s (refusal %v, bad JSON %v): %d of its %d spans delivered", id, tr.refusal, tr.badJSON, got, spansPerTrace)
		case !want && got > 0:
			wrong++
			t.Errorf("trace %s: neither flagged nor sampled, yet %d spans delivered", id, got)
		case want && tr.flagged():
			flaggedKept++
		case want:
			restKept++
		}
		if tr.flagged() && len(reference) == 0 {
			t.Errorf("trace %s: flagged, but today's wiring delivers no score for it: the workload tests nothing", id)
		}
		switch {
		case !want && len(delivered) > 0:
			strayScores += len(delivered)
			t.Errorf("trace %s: dropped, yet scores delivered: %v", id, delivered)
		case want && fmt.Sprint(delivered) != fmt.Sprint(reference):
			t.Errorf("trace %s: scores differ from today's wiring\noutcome %v\n  today %v", id, delivered, reference)
		case want:
			scores += len(delivered)
		}
	}
	commented := 0
	for _, p := range []*platform.Platform{today.platform, outcome.platform} {
		for _, sc := range p.Scores(platform.ScoreFilter{}) {
			if strings.Contains(sc.Comment, e2eEmail) || strings.Contains(sc.Comment, "@example.com") {
				t.Errorf("score %s %s: the comment carries masked data: %q", sc.ID, sc.Name, sc.Comment)
			}
			if strings.Contains(sc.Comment, " for ") {
				commented++ // a comment that names the observation (masked)
			}
		}
	}
	if commented == 0 {
		t.Errorf("no score comment names the model: the masking check tests nothing")
	}
	if restKept == 0 || restKept == rest {
		t.Errorf("%d of %d unflagged traces kept by the rate: no mix to test", restKept, rest)
	}
	t.Logf("%d traces: %d of %d flagged delivered whole; of the other %d, %d kept (%.1f%%, rate %v); "+
		"%d torn, %d delivered wrongly; %d scores delivered, all equal to today's wiring's; %d stray scores",
		len(traces), flaggedKept, flagged, rest, restKept, 100*float64(restKept)/float64(rest), rate,
		torn, wrong, scores, strayScores)
}
