package sampling

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/observation"
	"github.com/svc/svc-collector/pkg/scorerecord"
)

// sentSpan is a span as an instrumentation sends it: its scope, attributes, status and duration.
type sentSpan struct {
	scope, scopeVersion string
	name                string
	attrs               map[string]any
	status              ptrace.StatusCode
	duration            time.Duration
}

// Spans of the instrumentations the gateway sees (shapes of testbed/workload/shapes.go).
func openLLMetryChat(inTokens, outTokens int) sentSpan {
	return sentSpan{scope: "opentelemetry.instrumentation.openai.v1", scopeVersion: "0.40.7", name: "openai.chat",
		duration: 2 * time.Second, attrs: map[string]any{
			"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o",
			"gen_ai.usage.input_tokens": inTokens, "gen_ai.usage.output_tokens": outTokens,
			"llm.request.type": "chat", "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "Where is my order?",
			"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "On its way.",
			"traceloop.association.properties.session_id": "s-1",
		}}
}

func openInferenceLLM(promptTokens, completionTokens int) sentSpan {
	return sentSpan{scope: "openinference.instrumentation.openai", scopeVersion: "0.1.30", name: "ChatCompletion",
		duration: 3 * time.Second, attrs: map[string]any{
			"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.provider": "openai",
			"input.value": "Where is my order?", "output.value": "On its way.",
			"llm.token_count.prompt": promptTokens, "llm.token_count.completion": completionTokens,
			"llm.token_count.total": promptTokens + completionTokens, "session.id": "s-2",
		}}
}

func vercelGenerate(user string) sentSpan {
	return sentSpan{scope: "ai", scopeVersion: "4.3.16", name: "ai.generateText.doGenerate",
		duration: 1500 * time.Millisecond, attrs: map[string]any{
			"operation.name": "ai.generateText.doGenerate", "ai.operationId": "ai.generateText.doGenerate",
			"ai.model.id": "gpt-4o", "ai.model.provider": "openai.chat", "ai.response.text": "On its way.",
			"ai.usage.promptTokens": 120, "ai.usage.completionTokens": 30,
			"gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30,
			"ai.telemetry.metadata.userId": user, "ai.telemetry.metadata.sessionId": "s-3",
		}}
}

func semconvChat(cost float64) sentSpan {
	return sentSpan{scope: "opentelemetry.instrumentation.openai", scopeVersion: "0.44.1", name: "chat gpt-4o",
		duration: time.Second, attrs: map[string]any{
			"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
			"gen_ai.response.model": "gpt-4o-2024-08-06", "gen_ai.usage.input_tokens": 800,
			"gen_ai.usage.output_tokens": 200, "gen_ai.usage.cost": cost, "gen_ai.conversation.id": "s-4",
		}}
}

func svcSDKGeneration(level, costDetails string) sentSpan {
	s := sentSpan{scope: "svc-sdk", scopeVersion: "5.1.0", name: "generation", duration: time.Second,
		attrs: map[string]any{
			"svc.observation.type": "generation", "svc.observation.model.name": "gpt-4o",
			"svc.observation.usage_details": `{"input":100,"output":20}`, "svc.session.id": "s-5",
		}}
	if level != "" {
		s.attrs["svc.observation.level"] = level
	}
	if costDetails != "" {
		s.attrs["svc.observation.cost_details"] = costDetails
	}
	return s
}

func invokeAgent(d time.Duration, cost float64) sentSpan {
	return sentSpan{scope: "opentelemetry.instrumentation.openai_agents", scopeVersion: "0.1.0", name: "invoke_agent support",
		duration: d, attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
			"gen_ai.usage.cost": cost}}
}

func withStatus(s sentSpan, code ptrace.StatusCode) sentSpan { s.status = code; return s }

// view builds the span and reads it as the platform does.
func (s sentSpan) view(traceID pcommon.TraceID) *observation.View {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "support")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(s.scope)
	ss.Scope().SetVersion(s.scopeVersion)
	span := ss.Spans().AppendEmpty()
	span.SetTraceID(traceID)
	span.SetSpanID(pcommon.SpanID{1})
	span.SetName(s.name)
	start := pcommon.NewTimestampFromTime(t0)
	span.SetStartTimestamp(start)
	span.SetEndTimestamp(start + pcommon.Timestamp(s.duration))
	span.Status().SetCode(s.status)
	if err := span.Attributes().FromRaw(s.attrs); err != nil {
		panic(err)
	}
	v := observation.NewView(span, rs.Resource(), ss.Scope())
	return &v
}

// evaluationEvent is a score record made of the application's gen_ai.evaluation.result event, as
// the svcscore connector writes it (scorerecord.Event.Score, then Write).
func evaluationEvent(traceID pcommon.TraceID, attrs map[string]any) plog.LogRecord {
	m := pcommon.NewMap()
	if err := m.FromRaw(attrs); err != nil {
		panic(err)
	}
	s, err := scorerecord.Event{Kind: scorerecord.KindGenAIEvaluation, Attrs: m, TraceID: traceID, LogRecord: true}.Score(1)
	if err != nil {
		panic(err)
	}
	lr := plog.NewLogRecord()
	scorerecord.Write(lr, s)
	return lr
}

// svcScore is a score record as an evaluator of the gateway or svc.score writes it.
func svcScore(traceID pcommon.TraceID, name string, value any, dataType string) plog.LogRecord {
	lr := plog.NewLogRecord()
	v := pcommon.NewValueEmpty()
	if err := v.FromRaw(value); err != nil {
		panic(err)
	}
	scorerecord.Write(lr, scorerecord.Score{TraceID: traceID, Name: name, Value: v, DataType: dataType})
	return lr
}

func testRules() []OutcomeRule {
	return []OutcomeRule{
		{Name: "failed", Kind: RuleError},
		{Name: "slow", Kind: RuleLatency, LatencyOver: time.Minute},
		{Name: "heavy", Kind: RuleTokens, TokensOver: 50000},
		{Name: "long-output", Kind: RuleTokens, TokensOver: 4000, Usage: UsageOutput},
		{Name: "costly", Kind: RuleCost, CostOver: 0.5},
		{Name: "flagged", Kind: RuleScore, ScoreName: "correctness", Boolean: ptr(false)},
		{Name: "unhelpful", Kind: RuleScore, ScoreName: "helpfulness", Below: ptr(0.5)},
		{Name: "toxic", Kind: RuleScore, ScoreName: "toxicity", Values: []string{"toxic", "hateful"}},
		{Name: "vip", Kind: RuleFilter, Filter: `[{"type":"string","column":"userId","operator":"=","value":"vip"}]`},
	}
}

func newTestOutcome(t testing.TB, rate float64, decidePer string) *Outcome {
	cfg := DefaultOutcomeConfig()
	cfg.Rules = testRules()
	cfg.DecidePer = decidePer
	cfg.SessionKeepDuration = time.Hour
	o, err := NewOutcome(cfg, NewRatio(rate))
	require.NoError(t, err)
	return o
}

var (
	sampledIn  = pcommon.TraceID{0: 7, 15: 1}             // low bits 0: kept at any rate
	sampledOut = pcommon.TraceID{0: 7, 8: 0xff, 15: 0xff} // low bits at the top: dropped below 1
)

func TestOutcomeDecide(t *testing.T) {
	ok := openLLMetryChat(100, 20)
	tests := []struct {
		name       string
		traceID    pcommon.TraceID
		spans      []sentSpan
		scores     func(pcommon.TraceID) []plog.LogRecord
		experiment bool
		wantKeep   bool
		wantReason string
	}{
		{"nothing matches, the rate drops", sampledOut, []sentSpan{ok, vercelGenerate("u-1")}, nil, false, false, ReasonDropped},
		{"nothing matches, the rate keeps", sampledIn, []sentSpan{ok}, nil, false, true, ReasonSample},
		{"experiment", sampledOut, []sentSpan{ok}, nil, true, true, ReasonExperiment},
		{"a rule wins over experiment", sampledOut, []sentSpan{withStatus(ok, ptrace.StatusCodeError)}, nil, true, true, "failed"},
		{"OpenLLMetry status ERROR", sampledOut, []sentSpan{ok, withStatus(ok, ptrace.StatusCodeError)}, nil, false, true, "failed"},
		{"svc SDK level ERROR, status unset", sampledOut, []sentSpan{svcSDKGeneration("error", "")}, nil, false, true, "failed"},
		{"svc SDK level WARNING", sampledOut, []sentSpan{svcSDKGeneration("WARNING", "")}, nil, false, false, ReasonDropped},
		{"status ERROR though the level says DEFAULT", sampledOut, []sentSpan{withStatus(svcSDKGeneration("DEFAULT", ""), ptrace.StatusCodeError)}, nil, false, true, "failed"},
		{"agent run of two minutes", sampledOut, []sentSpan{ok, invokeAgent(2*time.Minute, 0)}, nil, false, true, "slow"},
		{"agent run of 50 s", sampledOut, []sentSpan{invokeAgent(50*time.Second, 0)}, nil, false, false, ReasonDropped},
		{"OpenInference prompt tokens over total", sampledOut, []sentSpan{openInferenceLLM(60000, 100)}, nil, false, true, "heavy"},
		{"OpenLLMetry output tokens", sampledOut, []sentSpan{openLLMetryChat(100, 5000)}, nil, false, true, "long-output"},
		{"OpenLLMetry output tokens at the bound", sampledOut, []sentSpan{openLLMetryChat(100, 4000)}, nil, false, false, ReasonDropped},
		{"GenAI semconv gen_ai.usage.cost", sampledOut, []sentSpan{semconvChat(0.9)}, nil, false, true, "costly"},
		{"GenAI semconv cheap", sampledOut, []sentSpan{semconvChat(0.01)}, nil, false, false, ReasonDropped},
		{"svc SDK cost_details total", sampledOut, []sentSpan{svcSDKGeneration("", `{"input":0.4,"output":0.8,"total":1.2}`)}, nil, false, true, "costly"},
		{"agent spans carry no cost on the platform", sampledOut, []sentSpan{invokeAgent(time.Second, 3)}, nil, false, false, ReasonDropped},
		{"Vercel user vip (filter)", sampledOut, []sentSpan{vercelGenerate("vip")}, nil, false, true, "vip"},
		{"Vercel other user", sampledOut, []sentSpan{vercelGenerate("u-2")}, nil, false, false, ReasonDropped},
		{"the first rule in order names the reason", sampledOut, []sentSpan{vercelGenerate("vip"), semconvChat(2), withStatus(ok, ptrace.StatusCodeError)}, nil, false, true, "failed"},
		{"evaluation event BOOLEAN false", sampledOut, []sentSpan{ok}, func(id pcommon.TraceID) []plog.LogRecord {
			return []plog.LogRecord{evaluationEvent(id, map[string]any{"gen_ai.evaluation.name": "correctness", "gen_ai.evaluation.score.value": false})}
		}, false, true, "flagged"},
		{"evaluation event BOOLEAN true", sampledOut, []sentSpan{ok}, func(id pcommon.TraceID) []plog.LogRecord {
			return []plog.LogRecord{evaluationEvent(id, map[string]any{"gen_ai.evaluation.name": "correctness", "gen_ai.evaluation.score.value": true})}
		}, false, false, ReasonDropped},
		{"svc.score BOOLEAN 0", sampledOut, nil, func(id pcommon.TraceID) []plog.LogRecord {
			return []plog.LogRecord{svcScore(id, "correctness", 0, "boolean")}
		}, false, true, "flagged"},
		{"a NUMERIC 0 is not a BOOLEAN false", sampledOut, nil, func(id pcommon.TraceID) []plog.LogRecord {
			return []plog.LogRecord{svcScore(id, "correctness", 0.0, "")}
		}, false, false, ReasonDropped},
		{"evaluator NUMERIC below", sampledOut, nil, func(id pcommon.TraceID) []plog.LogRecord {
			return []plog.LogRecord{svcScore(id, "helpfulness", 0.7, "NUMERIC"), svcScore(id, "helpfulness", 0.3, "NUMERIC")}
		}, false, true, "unhelpful"},
		{"evaluator NUMERIC at the bound", sampledOut, nil, func(id pcommon.TraceID) []plog.LogRecord {
			return []plog.LogRecord{svcScore(id, "helpfulness", 0.5, "NUMERIC")}
		}, false, false, ReasonDropped},
		{"evaluation event label (CATEGORICAL)", sampledOut, nil, func(id pcommon.TraceID) []plog.LogRecord {
			return []plog.LogRecord{evaluationEvent(id, map[string]any{"gen_ai.evaluation.name": "toxicity", "gen_ai.evaluation.score.label": "hateful"})}
		}, false, true, "toxic"},
		{"CATEGORICAL of another name", sampledOut, nil, func(id pcommon.TraceID) []plog.LogRecord {
			return []plog.LogRecord{evaluationEvent(id, map[string]any{"gen_ai.evaluation.name": "tone", "gen_ai.evaluation.score.label": "toxic"})}
		}, false, false, ReasonDropped},
		{"a score with a bad target matches nothing", sampledOut, nil, func(id pcommon.TraceID) []plog.LogRecord {
			lr := svcScore(id, "correctness", false, "")
			lr.Attributes().PutStr(scorerecord.AttrTarget, "session")
			return []plog.LogRecord{lr}
		}, false, false, ReasonDropped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var records []plog.LogRecord
			if tt.scores != nil {
				records = tt.scores(tt.traceID)
			}
			// Any order of arrival, spans and scores interleaved, decides the same.
			for _, reversed := range []bool{false, true} {
				o := newTestOutcome(t, 0.1, DecidePerTrace)
				var st TraceOutcome
				spans, scores := slices.Clone(tt.spans), slices.Clone(records)
				if reversed {
					slices.Reverse(spans)
					slices.Reverse(scores)
					for _, lr := range scores {
						o.ObserveScore(&st, lr)
					}
				}
				for _, s := range spans {
					v := s.view(tt.traceID)
					if reversed {
						o.Observe(&st, v)
					} else {
						o.ObserveSpan(&st, v.Span, v.Resource, v.Scope)
					}
				}
				if !reversed {
					for _, lr := range scores {
						o.ObserveScore(&st, lr)
					}
				}
				keep, reason := o.Decide(&st, tt.traceID, tt.experiment, t0)
				assert.Equal(t, tt.wantKeep, keep, "keep (reversed: %v)", reversed)
				assert.Equal(t, tt.wantReason, reason, "reason (reversed: %v)", reversed)
			}
		})
	}
}

// TestOutcomeSampleRateIsTheHeadDecision: a trace no rule keeps is kept exactly when the head
// decision (the SDKs' TraceIdRatioBased, Decider) keeps it.
func TestOutcomeSampleRateIsTheHeadDecision(t *testing.T) {
	o := newTestOutcome(t, 0.1, DecidePerTrace)
	head := NewDecider(NewRatio(0.1), NewExperimentTraces(10, time.Hour))
	kept := 0
	for i := range 2000 {
		id := pcommon.TraceID{0: byte(i), 1: byte(i >> 8), 8: byte(i * 37), 9: byte(i * 101), 15: byte(i)}
		var st TraceOutcome
		o.Observe(&st, openLLMetryChat(10, 10).view(id))
		keep, _ := o.Decide(&st, id, false, t0)
		require.Equal(t, head.Keep(id, false, t0), keep, "trace %s", id)
		if keep {
			kept++
		}
	}
	assert.InDelta(t, 200, kept, 60, "about 10%% of 2000 traces")
}

func TestOutcomeSessions(t *testing.T) {
	traceOf := func(session string, n byte) (pcommon.TraceID, sentSpan) {
		s := openLLMetryChat(10, 10)
		s.attrs = map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "session.id": session}
		return pcommon.TraceID{0: n, 8: 0xff, 15: 0xff}, s
	}
	t.Run("a rule keeps the session's later traces for session_keep_duration", func(t *testing.T) {
		o := newTestOutcome(t, 1e-9, DecidePerSession)
		decide := func(session string, n byte, failed bool, at time.Duration) (bool, string) {
			id, s := traceOf(session, n)
			if failed {
				s.status = ptrace.StatusCodeError
			}
			var st TraceOutcome
			o.Observe(&st, s.view(id))
			return o.Decide(&st, id, false, t0.Add(at))
		}
		keep, reason := decide("conv-1", 1, false, 0)
		assert.Equal(t, []any{false, ReasonDropped}, []any{keep, reason}, "before the failure")
		keep, reason = decide("conv-1", 2, true, time.Minute)
		assert.Equal(t, []any{true, "failed"}, []any{keep, reason})
		keep, reason = decide("conv-1", 3, false, 30*time.Minute)
		assert.Equal(t, []any{true, ReasonSession}, []any{keep, reason}, "a later trace of the session")
		keep, reason = decide("conv-2", 4, false, 30*time.Minute)
		assert.Equal(t, []any{false, ReasonDropped}, []any{keep, reason}, "another session")
		reason, ok := o.SessionKept(SessionKeyOf("conv-1"), t0.Add(2*time.Minute))
		assert.Equal(t, []any{"failed", true}, []any{reason, ok})
		keep, _ = decide("conv-1", 5, false, time.Minute+time.Hour)
		assert.False(t, keep, "session_keep_duration after the failure")
	})
	t.Run("the rate samples whole sessions", func(t *testing.T) {
		o := newTestOutcome(t, 0.3, DecidePerSession)
		keptSessions := 0
		for s := range 300 {
			session := fmt.Sprintf("conv-%d", s)
			var first bool
			for n := range byte(5) {
				id, span := traceOf(session, n)
				id[9], id[10] = byte(s), n*53 // trace ids the trace-id ratio decides apart
				var st TraceOutcome
				o.Observe(&st, span.view(id))
				keep, reason := o.Decide(&st, id, false, t0)
				if n == 0 {
					first = keep
					if keep {
						keptSessions++
						assert.Equal(t, ReasonSample, reason)
					}
				}
				require.Equal(t, first, keep, "session %s trace %d", session, n)
			}
		}
		assert.InDelta(t, 90, keptSessions, 30, "about 30%% of 300 sessions")
	})
	t.Run("a trace without a session is sampled on its trace id", func(t *testing.T) {
		o := newTestOutcome(t, 0.1, DecidePerSession)
		var st TraceOutcome
		o.Observe(&st, semconvChat(0).view(sampledIn))
		_, hasSession := st.Session()
		require.True(t, hasSession, "gen_ai.conversation.id names the session")
		var none TraceOutcome
		s := openLLMetryChat(10, 10)
		delete(s.attrs, "traceloop.association.properties.session_id")
		o.Observe(&none, s.view(sampledIn))
		_, hasSession = none.Session()
		require.False(t, hasSession)
		keep, reason := o.Decide(&none, sampledIn, false, t0)
		assert.Equal(t, []any{true, ReasonSample}, []any{keep, reason})
	})
	t.Run("the memory of kept sessions is bounded", func(t *testing.T) {
		cfg := DefaultOutcomeConfig()
		cfg.Rules = testRules()
		cfg.DecidePer = DecidePerSession
		cfg.MaxSessions = 2
		o, err := NewOutcome(cfg, NewRatio(1e-9))
		require.NoError(t, err)
		for i, s := range []string{"a", "b", "c"} {
			o.KeepSession(SessionKeyOf(s), "failed", t0.Add(time.Duration(i)*time.Second))
		}
		_, a := o.SessionKept(SessionKeyOf("a"), t0.Add(3*time.Second))
		_, c := o.SessionKept(SessionKeyOf("c"), t0.Add(3*time.Second))
		assert.False(t, a, "the least recently kept session is forgotten first")
		assert.True(t, c)
	})
}

// TestTraceOutcomeIsConstantMemory: the per-trace state is a small value without pointers,
// whatever the trace sends.
func TestTraceOutcomeIsConstantMemory(t *testing.T) {
	o := newTestOutcome(t, 0.1, DecidePerSession)
	var st TraceOutcome
	before := st
	for i := range 100 {
		s := openLLMetryChat(10, 10)
		s.attrs["session.id"] = fmt.Sprintf("a very long session id %d %0100d", i, i)
		o.Observe(&st, s.view(sampledOut))
	}
	assert.NotEqual(t, before, st)
	assert.Equal(t, 16, int(sizeofTraceOutcome))
}

// BenchmarkDecisionPerSpan: the outcome decision (Observe of every span, Decide once per trace)
// beside today's head decision (Decider.Keep per span) in the same run, on the same spans: the
// workload's instrumentations, one trace of six spans.
func BenchmarkDecisionPerSpan(b *testing.B) {
	spans := []sentSpan{openLLMetryChat(100, 20), openInferenceLLM(300, 40), vercelGenerate("u-1"),
		semconvChat(0.01), svcSDKGeneration("", `{"total":0.02}`), invokeAgent(20*time.Second, 0)}
	views := make([]*observation.View, len(spans))
	for i, s := range spans {
		views[i] = s.view(sampledOut)
	}
	b.Run("head", func(b *testing.B) {
		d := NewDecider(NewRatio(0.1), NewExperimentTraces(DefaultExperimentTracesMax, time.Hour))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			v := views[i%len(views)]
			d.Keep(v.Span.TraceID(), false, t0)
		}
	})
	// The issue's benchmark config: errors + flagged + costly + 10% of the rest.
	issueRules := DefaultOutcomeConfig()
	issueRules.Rules = []OutcomeRule{{Name: "failed", Kind: RuleError},
		{Name: "flagged", Kind: RuleScore, ScoreName: "correctness", Boolean: ptr(false)},
		{Name: "costly", Kind: RuleCost, CostOver: 0.5}}
	every := DefaultOutcomeConfig()
	every.Rules = testRules()
	session := every
	session.DecidePer = DecidePerSession
	for _, c := range []struct {
		name string
		cfg  OutcomeConfig
	}{{"errors+flagged+costly", issueRules}, {"all-kinds", every}, {"all-kinds/session", session}} {
		b.Run("outcome/"+c.name, func(b *testing.B) {
			o, err := NewOutcome(c.cfg, NewRatio(0.1))
			require.NoError(b, err)
			var st TraceOutcome
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				n := i % len(views)
				if n == 0 {
					st = TraceOutcome{}
				}
				o.Observe(&st, views[n])
				if n == len(views)-1 {
					o.Decide(&st, sampledOut, false, t0)
				}
			}
		})
	}
}
