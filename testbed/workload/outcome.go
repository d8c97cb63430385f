package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
)

// OutcomeOptions shape the workload of the outcome-sampling benchmark (docs/outcome-sampling.md):
// conversations of several turns, each turn an agent trace whose LLM calls take the shapes of the
// real instrumentations (Shapes), a fixed share of them failing or flagged by an evaluator, costs
// with a heavy tail, and agent runs of minutes whose children are exported long before their
// root. Zero values take the defaults.
type OutcomeOptions struct {
	Seed uint64
	// Sessions is the number of conversations; each has SessionTurnsMin..SessionTurnsMax traces
	// (default 2..6), one every TurnGap (default 20s); a session starts every SessionEvery
	// (default 200ms).
	Sessions                         int
	SessionTurnsMin, SessionTurnsMax int
	TurnGap, SessionEvery            time.Duration
	// FailingShare of the traces (default 0.02) have an LLM call that fails (status ERROR, and
	// the HTTP root answers 500); FlaggedShare (default 0.01, none of them failing) carry an
	// evaluation `correctness` = false. Both are exact: round(share × traces).
	FailingShare, FlaggedShare float64
	// EvaluatedShare of the other traces (default 0.2) carry an evaluation `correctness` = true.
	// Half the evaluations are span events on the answer's span, half log records.
	EvaluatedShare float64
	// AgentRunShare of the traces (default 0.05) are agent runs of 1 to 5 minutes with 10 to 30
	// LLM calls; the others last seconds with 1 to 4 calls.
	AgentRunShare float64
	// CostlyOver is the call cost that makes a trace costly (default 0.5, the rule of the
	// benchmark's gateway and peer configs). Call costs are Pareto distributed: median about
	// 0.005, about one call in 280 over 0.5.
	CostlyOver float64
	// PromptBytes is the size of each prompt and answer (default 200).
	PromptBytes int
	// Epoch is the time the workload starts at (default 2026-01-01 UTC): span times are Epoch
	// plus their offsets, so a replay that sends the exports at their offsets from now sets it
	// to now.
	Epoch time.Time
}

func (o *OutcomeOptions) defaults() {
	setIfZero := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	setIfZero(&o.FailingShare, 0.02)
	setIfZero(&o.FlaggedShare, 0.01)
	setIfZero(&o.EvaluatedShare, 0.2)
	setIfZero(&o.AgentRunShare, 0.05)
	setIfZero(&o.CostlyOver, 0.5)
	if o.SessionTurnsMin <= 0 {
		o.SessionTurnsMin = 2
	}
	if o.SessionTurnsMax < o.SessionTurnsMin {
		o.SessionTurnsMax = max(6, o.SessionTurnsMin)
	}
	if o.TurnGap <= 0 {
		o.TurnGap = 20 * time.Second
	}
	if o.SessionEvery <= 0 {
		o.SessionEvery = 200 * time.Millisecond
	}
	if o.PromptBytes <= 0 {
		o.PromptBytes = 200
	}
	if o.Epoch.IsZero() {
		o.Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
}

// OutcomeTrace is what one trace of the workload is, for the benchmark's verdicts: which traces
// the rules must deliver whole, and which traces make a session.
type OutcomeTrace struct {
	TraceID   pcommon.TraceID
	SessionID string
	// Failing: an LLM call failed. Flagged: an evaluation said correctness = false. Costly: a
	// call cost more than CostlyOver. AgentRun: a run of minutes.
	Failing, Flagged, Costly, AgentRun bool
	// Evaluated tells that the trace carries an evaluation, EvaluationLog that it is a log record.
	Evaluated, EvaluationLog bool
	// Spans counts every span, GenAISpans those the GenAI filter keeps.
	Spans, GenAISpans int
	// Start and End are offsets from the workload's start; the root ends at End.
	Start, End time.Duration
}

// Export is one export request of the application: the spans (or log records) an SDK's batch
// processor sends at At, an offset from the workload's start.
type Export struct {
	At    time.Duration
	Trace int // index in OutcomeWorkload.Traces
	Spans ptrace.Traces
	Logs  plog.Logs // evaluation log records; empty when the export carries spans
}

// OutcomeWorkload is the generated workload: its traces and their exports in time order.
type OutcomeWorkload struct {
	Traces  []OutcomeTrace
	Exports []Export
}

// Call costs: Pareto with scale costScale and tail index costAlpha, so P(cost > x) =
// (costScale/x)^costAlpha: about 0.0035 over 0.5, a tenth of that over 4.
const (
	costScale = 0.003
	costAlpha = 1.1
	// Price per token that turns a cost into a token count (80% input).
	costPerToken = 5e-6
	// exportInterval is the BatchSpanProcessor's default schedule delay: a span goes out at most
	// this long after it ended.
	exportInterval = 5 * time.Second
)

// NewOutcomeWorkload generates the workload; the same options give the same workload.
func NewOutcomeWorkload(opts OutcomeOptions) OutcomeWorkload {
	opts.defaults()
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5851f42d4c957f2d))
	var w OutcomeWorkload
	for s := range opts.Sessions {
		session := fmt.Sprintf("conv-%d-%06d", opts.Seed, s)
		turns := opts.SessionTurnsMin + rng.IntN(opts.SessionTurnsMax-opts.SessionTurnsMin+1)
		for turn := range turns {
			start := time.Duration(s)*opts.SessionEvery + time.Duration(turn)*opts.TurnGap
			w.Traces = append(w.Traces, OutcomeTrace{TraceID: randomTraceID(rng), SessionID: session, Start: start})
		}
	}
	// Exact shares: failing and flagged traces are disjoint, drawn by one permutation.
	n := len(w.Traces)
	perm := rng.Perm(n)
	nFailing := int(math.Round(opts.FailingShare * float64(n)))
	nFlagged := int(math.Round(opts.FlaggedShare * float64(n)))
	for i, idx := range perm {
		switch {
		case i < nFailing:
			w.Traces[idx].Failing = true
		case i < nFailing+nFlagged:
			w.Traces[idx].Flagged, w.Traces[idx].Evaluated = true, true
		}
	}
	for i := range w.Traces {
		t := &w.Traces[i]
		t.AgentRun = rng.Float64() < opts.AgentRunShare
		if !t.Evaluated && rng.Float64() < opts.EvaluatedShare {
			t.Evaluated = true
		}
		t.EvaluationLog = t.Evaluated && rng.IntN(2) == 0
		w.Exports = append(w.Exports, buildOutcomeTrace(rng, i, t, &opts)...)
	}
	slices.SortStableFunc(w.Exports, func(a, b Export) int { return int(a.At - b.At) })
	return w
}

func randomTraceID(rng *rand.Rand) pcommon.TraceID {
	var id pcommon.TraceID
	for i := range id {
		id[i] = byte(rng.Uint32())
	}
	return id
}

func randomSpanID(rng *rand.Rand) pcommon.SpanID {
	var id pcommon.SpanID
	for i := range id {
		id[i] = byte(rng.Uint32())
	}
	id[0] |= 1 // never the empty id
	return id
}

// outcomeSpan is a span of a trace being built, with the time its batch is exported.
type outcomeSpan struct {
	scope, version string
	span           ptrace.Span
	exportAt       time.Duration
}

// buildOutcomeTrace makes the spans of one turn and their exports:
//
//	POST /v1/chat (HTTP server; 500 when failing)
//	└─ invoke_agent support-agent (session.id)
//	   ├─ chat <model> (a shape of Shapes; the last fails when failing; the answer carries the evaluation)
//	   │  └─ POST api.openai.com (HTTP client)
//	   └─ execute_tool lookup_order (between calls, one in three)
func buildOutcomeTrace(rng *rand.Rand, index int, t *OutcomeTrace, opts *OutcomeOptions) []Export {
	calls := 1 + rng.IntN(4)
	duration := time.Duration(1+rng.IntN(8)) * time.Second
	if t.AgentRun {
		calls = 10 + rng.IntN(21)
		duration = time.Duration(60+rng.IntN(241)) * time.Second
	}
	t.End = t.Start + duration
	var spans []outcomeSpan
	at := func(offset time.Duration) pcommon.Timestamp {
		return pcommon.NewTimestampFromTime(opts.Epoch.Add(offset))
	}
	add := func(scope, version, name string, parent pcommon.SpanID, kind ptrace.SpanKind, start, end time.Duration) ptrace.Span {
		s := ptrace.NewSpan()
		s.SetTraceID(t.TraceID)
		s.SetSpanID(randomSpanID(rng))
		s.SetParentSpanID(parent)
		s.SetName(name)
		s.SetKind(kind)
		s.SetStartTimestamp(at(start))
		s.SetEndTimestamp(at(end))
		exportAt := end + time.Duration(rng.Int64N(int64(exportInterval)))
		spans = append(spans, outcomeSpan{scope: scope, version: version, span: s, exportAt: exportAt})
		return s
	}
	root := add(ScopeHTTPServer, "0.63.0", "POST /v1/chat", pcommon.SpanID{}, ptrace.SpanKindServer, t.Start, t.End)
	putAll(root.Attributes(), httpServerAttrs("/v1/chat", 200))
	agentEnd := t.End - 10*time.Millisecond
	agent := add(ScopeApp, "1.0.0", SpanAgent, root.SpanID(), ptrace.SpanKindInternal, t.Start+5*time.Millisecond, agentEnd)
	agent.Attributes().PutStr("gen_ai.operation.name", "invoke_agent")
	agent.Attributes().PutStr("gen_ai.agent.name", "support-agent")
	agent.Attributes().PutStr("session.id", t.SessionID)

	step := (agentEnd - t.Start - 10*time.Millisecond) / time.Duration(calls)
	var answer ptrace.Span
	var answerEnd time.Duration
	for c := range calls {
		start := t.Start + 10*time.Millisecond + time.Duration(c)*step
		end := start + step*9/10
		shape := Shapes[rng.IntN(len(Shapes))]
		cost := costScale * math.Pow(1-rng.Float64(), -1/costAlpha)
		if cost > opts.CostlyOver {
			t.Costly = true
		}
		tokens := int(cost / costPerToken)
		call := LLMCall{Model: "gpt-4o", Provider: "openai", System: "You are a helpful support agent.",
			Prompt: filler(rng, opts.PromptBytes), Answer: filler(rng, opts.PromptBytes),
			InputTokens: tokens * 4 / 5, OutputTokens: tokens - tokens*4/5}
		span := add(shape.Scope, shape.ScopeVersion, "chat gpt-4o", agent.SpanID(), ptrace.SpanKindClient, start, end)
		putAll(span.Attributes(), shape.Attributes(call))
		putCost(span.Attributes(), shape, cost)
		for _, ev := range shape.Events(call) {
			e := span.Events().AppendEmpty()
			e.SetName(ev.Name)
			e.SetTimestamp(at(end))
			putAll(e.Attributes(), ev.Attrs)
		}
		http := add(ScopeHTTPClient, "0.63.0", "POST api.openai.com", span.SpanID(), ptrace.SpanKindClient, start+time.Millisecond, end-time.Millisecond)
		http.Attributes().PutStr("http.request.method", "POST")
		http.Attributes().PutInt("http.response.status_code", 200)
		if c < calls-1 && rng.IntN(3) == 0 {
			tool := add(ScopeApp, "1.0.0", SpanTool, agent.SpanID(), ptrace.SpanKindInternal, end, end+step/20)
			tool.Attributes().PutStr("gen_ai.operation.name", "execute_tool")
			tool.Attributes().PutStr("gen_ai.tool.name", "lookup_order")
		}
		answer, answerEnd = span, end
	}
	if t.Failing {
		answer.Status().SetCode(ptrace.StatusCodeError)
		answer.Status().SetMessage("429 Too Many Requests")
		answer.Attributes().PutStr("error.type", "openai.RateLimitError")
		root.Status().SetCode(ptrace.StatusCodeError)
		root.Attributes().PutInt("http.response.status_code", 500)
	}
	evalAttrs := []attribute.KeyValue{attribute.String("gen_ai.evaluation.name", "correctness"),
		attribute.Bool("gen_ai.evaluation.score.value", !t.Flagged)}
	if t.Evaluated && !t.EvaluationLog {
		e := answer.Events().AppendEmpty()
		e.SetName("gen_ai.evaluation.result")
		e.SetTimestamp(at(answerEnd))
		putAll(e.Attributes(), evalAttrs)
	}
	// Spans go out as they end: the root of a run of minutes long after the children exported
	// along the way.
	exports := groupExports(index, spans)
	if t.Evaluated && t.EvaluationLog {
		logs := plog.NewLogs()
		rl := logs.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", "support-agent")
		lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		lr.SetEventName("gen_ai.evaluation.result")
		lr.SetTraceID(t.TraceID)
		lr.SetSpanID(answer.SpanID())
		lr.SetTimestamp(at(answerEnd))
		putAll(lr.Attributes(), evalAttrs)
		// The evaluator runs after the answer: its record comes seconds after the trace.
		at := t.End + time.Second + time.Duration(rng.Int64N(int64(9*time.Second)))
		exports = append(exports, Export{At: at, Trace: index, Spans: ptrace.NewTraces(), Logs: logs})
	}
	for _, s := range spans {
		t.Spans++
		if s.scope != ScopeHTTPServer && s.scope != ScopeHTTPClient {
			t.GenAISpans++
		}
	}
	return exports
}

// groupExports puts the spans exported at the same time into one request, a scope each.
func groupExports(index int, spans []outcomeSpan) []Export {
	slices.SortStableFunc(spans, func(a, b outcomeSpan) int { return int(a.exportAt - b.exportAt) })
	var exports []Export
	for i := 0; i < len(spans); {
		// One request: what goes out within a second of its first span.
		j := i
		for j < len(spans) && spans[j].exportAt-spans[i].exportAt < exportInterval/5 {
			j++
		}
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "support-agent")
		rs.Resource().Attributes().PutStr("telemetry.sdk.language", "python")
		scopes := map[string]ptrace.SpanSlice{}
		for _, s := range spans[i:j] {
			ss, ok := scopes[s.scope]
			if !ok {
				sc := rs.ScopeSpans().AppendEmpty()
				sc.Scope().SetName(s.scope)
				sc.Scope().SetVersion(s.version)
				ss = sc.Spans()
				scopes[s.scope] = ss
			}
			s.span.CopyTo(ss.AppendEmpty())
		}
		exports = append(exports, Export{At: spans[j-1].exportAt, Trace: index, Spans: td, Logs: plog.NewLogs()})
		i = j
	}
	return exports
}

// putCost writes a call's cost where its instrumentation does: cost_details for the svc SDK,
// gen_ai.usage.cost (OpenLLMetry, LiteLLM and others) or llm.cost.total (OpenInference).
func putCost(attrs pcommon.Map, shape Shape, cost float64) {
	switch shape.Name {
	case ShapeSVCSDK:
		attrs.PutStr("svc.observation.cost_details", fmt.Sprintf(`{"total":%g}`, cost))
	case ShapeOpenInference:
		attrs.PutDouble("llm.cost.total", cost)
	default:
		attrs.PutDouble("gen_ai.usage.cost", cost)
	}
}

// putAll writes OpenTelemetry API attributes into a pdata map.
func putAll(m pcommon.Map, kvs []attribute.KeyValue) {
	for _, kv := range kvs {
		k := string(kv.Key)
		switch kv.Value.Type() {
		case attribute.BOOL:
			m.PutBool(k, kv.Value.AsBool())
		case attribute.INT64:
			m.PutInt(k, kv.Value.AsInt64())
		case attribute.FLOAT64:
			m.PutDouble(k, kv.Value.AsFloat64())
		case attribute.STRINGSLICE:
			s := m.PutEmptySlice(k)
			for _, v := range kv.Value.AsStringSlice() {
				s.AppendEmpty().SetStr(v)
			}
		default:
			m.PutStr(k, kv.Value.AsString())
		}
	}
}
