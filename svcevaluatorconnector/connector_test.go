package svcevaluatorconnector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/svcevaluatorconnector/internal/metadata"
	"github.com/svc/svc-collector/svcevaluatorconnector/internal/metadatatest"
)

var testStart = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// testSpan is one span of the workload.
type testSpan struct {
	name     string
	spanID   byte
	duration time.Duration
	err      bool
	attrs    map[string]any
}

// workload: a slow generation with a valid JSON answer, a fast failed generation whose output is
// a refusal (not JSON), a tool call without output, and an agent span.
var workload = []testSpan{
	{name: "chat slow", spanID: 1, duration: 6 * time.Second, attrs: map[string]any{
		"gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": int64(900), "gen_ai.usage.output_tokens": int64(300),
		"gen_ai.usage.cost": 0.03, "svc.observation.input": "plan the trip", "svc.observation.output": `{"plan":["fly","hotel"]}`,
	}},
	{name: "chat refused", spanID: 2, duration: 800 * time.Millisecond, err: true, attrs: map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.response.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": int64(20),
		"gen_ai.usage.output_tokens": int64(9), "svc.observation.output": "I can't help with that.",
	}},
	{name: "search", spanID: 3, duration: 7 * time.Second, attrs: map[string]any{"svc.observation.type": "tool"}},
	{name: "agent", spanID: 4, duration: 9 * time.Second, attrs: map[string]any{"svc.environment": "staging"}},
}

func workloadTraces(traceID byte) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "travel-agent")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("opentelemetry.instrumentation.openai")
	for _, s := range workload {
		span := ss.Spans().AppendEmpty()
		span.SetName(s.name)
		span.SetTraceID([16]byte{15: traceID})
		span.SetSpanID([8]byte{7: s.spanID})
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(testStart))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(testStart.Add(s.duration)))
		if s.err {
			span.Status().SetCode(ptrace.StatusCodeError)
		}
		_ = span.Attributes().FromRaw(s.attrs)
	}
	return td
}

const generations = `[{"type":"string","column":"type","operator":"=","value":"GENERATION"}]`

func f(x float64) *float64 { return &x }

// cookbookEvaluators are the README's cookbook, five evaluators.
func cookbookEvaluators() []EvaluatorConfig {
	return []EvaluatorConfig{
		{Name: "slow_generation", Filter: generations, Check: CheckConfig{Latency: &Threshold{Above: f(5)}},
			Score: ScoreConfig{Comment: "{{name}} ({{model}}) took {{measure}} s, {{threshold}}"}},
		{Name: "json_output", Filter: generations, Check: CheckConfig{JSONOutput: true}},
		{Name: "refusal", Filter: generations, Check: CheckConfig{OutputMatches: `(?i)\bI (can't|cannot|won't) help\b`},
			Score: ScoreConfig{OnlyWhenTrue: true}},
		{Name: "cost_guard", Check: CheckConfig{Cost: &Threshold{Above: f(0.02)}}, Score: ScoreConfig{Target: "trace"}},
		{Name: "failed", Check: CheckConfig{Error: true}, Score: ScoreConfig{Name: "error", OnlyWhenTrue: true}},
	}
}

func newTestConnector(t testing.TB, cfg *Config, next consumer.Logs, tel *componenttest.Telemetry) *evaluatorConnector {
	t.Helper()
	require.NoError(t, cfg.Validate())
	set := connectortest.NewNopSettings(metadata.Type)
	if tel != nil {
		set = metadatatest.NewSettings(tel)
	}
	c, err := NewFactory().CreateTracesToLogs(context.Background(), set, cfg, next)
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, c.Shutdown(context.Background())) })
	return c.(*evaluatorConnector)
}

// scoresOf reads every score record of the sink as "span/score=value", sorted, and the requests.
func scoresOf(t *testing.T, sink *consumertest.LogsSink) ([]string, []scorerecord.Request) {
	t.Helper()
	var out []string
	var reqs []scorerecord.Request
	for _, ld := range sink.AllLogs() {
		rls := ld.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			sls := rls.At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				assert.Equal(t, ScopeName, sls.At(j).Scope().Name())
				lrs := sls.At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					req := scorerecord.Read(lrs.At(k))
					require.NoError(t, req.Validate())
					reqs = append(reqs, req)
					target := req.ObservationID
					if target == "" {
						target = "trace"
					}
					out = append(out, fmt.Sprintf("%s/%s=%v", target, req.Name, req.Value))
				}
			}
		}
	}
	sort.Strings(out)
	return out, reqs
}

func TestCookbookEvaluators(t *testing.T) {
	sink := &consumertest.LogsSink{}
	c := newTestConnector(t, &Config{SampleRate: 1, Evaluators: cookbookEvaluators()}, sink, nil)
	require.NoError(t, c.ConsumeTraces(context.Background(), workloadTraces(1)))

	got, reqs := scoresOf(t, sink)
	assert.Equal(t, []string{
		"0000000000000001/json_output=1",
		"0000000000000001/slow_generation=1",
		"0000000000000002/error=1",
		"0000000000000002/json_output=0",
		"0000000000000002/refusal=1",
		"0000000000000002/slow_generation=0",
		"trace/cost_guard=1",
	}, got)
	for _, r := range reqs {
		assert.Equal(t, scorerecord.DataTypeBoolean, r.DataType)
		assert.Equal(t, "00000000000000000000000000000001", r.TraceID)
		assert.NotEmpty(t, r.ID)
		assert.Equal(t, "2026-11-23T12:00:0", r.Timestamp[:18], "the span's end time")
		if r.Name == "slow_generation" && r.ObservationID == "0000000000000001" {
			assert.Equal(t, "chat slow (gpt-4o) took 6 s, > 5", r.Comment)
		}
		assert.Contains(t, r.Metadata, MetadataEvaluator)
	}
}

func TestChecks(t *testing.T) {
	tests := []struct {
		name  string
		check CheckConfig
		score ScoreConfig
		want  []string // "span/score=value" of the workload's spans, sorted
	}{
		{"latency above", CheckConfig{Latency: &Threshold{Above: f(6.5)}}, ScoreConfig{},
			[]string{"0000000000000001/e=0", "0000000000000002/e=0", "0000000000000003/e=1", "0000000000000004/e=1"}},
		{"latency below", CheckConfig{Latency: &Threshold{Below: f(1)}}, ScoreConfig{},
			[]string{"0000000000000001/e=0", "0000000000000002/e=1", "0000000000000003/e=0", "0000000000000004/e=0"}},
		{"latency outside a range", CheckConfig{Latency: &Threshold{Above: f(8), Below: f(1)}}, ScoreConfig{},
			[]string{"0000000000000001/e=0", "0000000000000002/e=1", "0000000000000003/e=0", "0000000000000004/e=1"}},
		{"latency numeric", CheckConfig{Latency: &Threshold{}}, ScoreConfig{DataType: "NUMERIC"},
			[]string{"0000000000000001/e=6", "0000000000000002/e=0.8", "0000000000000003/e=7", "0000000000000004/e=9"}},
		{"error status", CheckConfig{Error: true}, ScoreConfig{},
			[]string{"0000000000000001/e=0", "0000000000000002/e=1", "0000000000000003/e=0", "0000000000000004/e=0"}},
		{"valid JSON output; none without output", CheckConfig{JSONOutput: true}, ScoreConfig{},
			[]string{"0000000000000001/e=1", "0000000000000002/e=0"}},
		{"output conforms to a JSON Schema", CheckConfig{JSONOutput: true, JSONSchema: `{"type":"object","required":["plan"],"properties":{"plan":{"type":"array","items":{"type":"string"}}}}`}, ScoreConfig{},
			[]string{"0000000000000001/e=1", "0000000000000002/e=0"}},
		{"output does not conform to a JSON Schema", CheckConfig{JSONOutput: true, JSONSchema: `{"type":"object","properties":{"plan":{"maxItems":1}}}`}, ScoreConfig{},
			[]string{"0000000000000001/e=0", "0000000000000002/e=0"}},
		{"output matches", CheckConfig{OutputMatches: `can't help`}, ScoreConfig{},
			[]string{"0000000000000001/e=0", "0000000000000002/e=1"}},
		{"output does not match", CheckConfig{OutputNotMatches: `^\{`}, ScoreConfig{},
			[]string{"0000000000000001/e=0", "0000000000000002/e=1"}},
		{"input matches", CheckConfig{InputMatches: `trip`}, ScoreConfig{}, []string{"0000000000000001/e=1"}},
		{"input does not match", CheckConfig{InputNotMatches: `trip`}, ScoreConfig{}, []string{"0000000000000001/e=0"}},
		{"output length above", CheckConfig{OutputLength: &Threshold{Above: f(23)}}, ScoreConfig{},
			[]string{"0000000000000001/e=1", "0000000000000002/e=0"}},
		{"output length numeric", CheckConfig{OutputLength: &Threshold{}}, ScoreConfig{DataType: "numeric"},
			[]string{"0000000000000001/e=24", "0000000000000002/e=23"}},
		{"tokens above", CheckConfig{Tokens: &Threshold{Above: f(1000)}}, ScoreConfig{},
			[]string{"0000000000000001/e=1", "0000000000000002/e=0"}},
		{"tokens numeric", CheckConfig{Tokens: &Threshold{}}, ScoreConfig{DataType: "NUMERIC"},
			[]string{"0000000000000001/e=1200", "0000000000000002/e=29"}},
		{"cost above; none without cost", CheckConfig{Cost: &Threshold{Above: f(0.01)}}, ScoreConfig{},
			[]string{"0000000000000001/e=1"}},
		{"only when true", CheckConfig{Latency: &Threshold{Above: f(6.5)}}, ScoreConfig{OnlyWhenTrue: true},
			[]string{"0000000000000003/e=1", "0000000000000004/e=1"}},
		{"trace target", CheckConfig{Error: true}, ScoreConfig{Target: "trace", OnlyWhenTrue: true}, []string{"trace/e=1"}},
		{"score name", CheckConfig{Error: true}, ScoreConfig{Name: "failed", OnlyWhenTrue: true}, []string{"0000000000000002/failed=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &consumertest.LogsSink{}
			c := newTestConnector(t, &Config{SampleRate: 1, Evaluators: []EvaluatorConfig{{Name: "e", Check: tt.check, Score: tt.score}}}, sink, nil)
			require.NoError(t, c.ConsumeTraces(context.Background(), workloadTraces(1)))
			got, reqs := scoresOf(t, sink)
			assert.Equal(t, tt.want, got)
			for _, r := range reqs {
				want := scorerecord.DataTypeBoolean
				if tt.score.DataType != "" {
					want = scorerecord.DataTypeNumeric
				}
				assert.Equal(t, want, r.DataType)
			}
		})
	}
}

// A resent span makes the same score ids; two evaluators on one span, or one evaluator on two
// spans or traces, make different ones.
func TestDeterministicIDs(t *testing.T) {
	cfg := &Config{SampleRate: 1, Evaluators: cookbookEvaluators()}
	run := func(traceID byte) []string {
		sink := &consumertest.LogsSink{}
		c := newTestConnector(t, cfg, sink, nil)
		require.NoError(t, c.ConsumeTraces(context.Background(), workloadTraces(traceID)))
		_, reqs := scoresOf(t, sink)
		ids := make([]string, 0, len(reqs))
		for _, r := range reqs {
			ids = append(ids, r.ID)
		}
		sort.Strings(ids)
		return ids
	}
	first, resent, other := run(1), run(1), run(2)
	assert.Equal(t, first, resent)
	assert.Len(t, first, 7)
	seen := map[string]bool{}
	for _, id := range append(first, other...) {
		assert.False(t, seen[id], "duplicate id %s", id)
		seen[id] = true
	}
}

func TestSamplingAndExperiments(t *testing.T) {
	// At rate 0.5 trace ...01 is kept (low 64 bits small) and trace 0xff...ff sampled out.
	cfg := &Config{SampleRate: 0.5, Evaluators: []EvaluatorConfig{{Name: "e", Check: CheckConfig{Error: true}, Score: ScoreConfig{OnlyWhenTrue: true}}}}
	sampledOut := func() ptrace.Traces {
		td := workloadTraces(1)
		spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		for i := 0; i < spans.Len(); i++ {
			spans.At(i).SetTraceID([16]byte{8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff})
		}
		return td
	}
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	sink := &consumertest.LogsSink{}
	c := newTestConnector(t, cfg, sink, tel)
	require.NoError(t, c.ConsumeTraces(context.Background(), workloadTraces(1)))
	require.NoError(t, c.ConsumeTraces(context.Background(), sampledOut()))
	got, _ := scoresOf(t, sink)
	assert.Equal(t, []string{"0000000000000002/e=1"}, got, "the sampled-out trace makes no score")

	// An experiment span (last in its batch) keeps its whole trace's scores.
	td := sampledOut()
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(3).Attributes().PutStr("svc.experiment.id", "exp-1")
	require.NoError(t, c.ConsumeTraces(context.Background(), td))
	got, _ = scoresOf(t, sink)
	assert.Len(t, got, 2)

	set := func(kv ...string) attribute.Set {
		var attrs []attribute.KeyValue
		for i := 0; i < len(kv); i += 2 {
			attrs = append(attrs, attribute.String(kv[i], kv[i+1]))
		}
		return attribute.NewSet(attrs...)
	}
	metadatatest.AssertEqualConnectorSvcevaluatorEvaluations(t, tel, []metricdata.DataPoint[int64]{
		{Attributes: set("evaluator", "e", "outcome", "scored"), Value: 2},
		{Attributes: set("evaluator", "e", "outcome", "skipped"), Value: 6},
		{Attributes: set("evaluator", "e", "outcome", "sampled_out"), Value: 4},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualConnectorSvcevaluatorScores(t, tel, []metricdata.DataPoint[int64]{
		{Attributes: set("evaluator", "e"), Value: 2},
	}, metricdatatest.IgnoreTimestamp())
}

// ctxSink records the client metadata of the context each batch arrives with.
type ctxSink struct {
	consumertest.LogsSink
	auth []string
}

func (s *ctxSink) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	s.auth = append(s.auth, client.FromContext(ctx).Metadata.Get("authorization")...)
	return s.LogsSink.ConsumeLogs(ctx, ld)
}

// Scores travel with the request's context: the svc exporter sends them with the credentials
// of the request that brought the spans (pass-through deployments).
func TestScoresKeepTheRequestContext(t *testing.T) {
	sink := &ctxSink{}
	c := newTestConnector(t, &Config{SampleRate: 1, Evaluators: cookbookEvaluators()}, sink, nil)
	ctx := client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{"authorization": {"Basic dGVuYW50LWE="}})})
	require.NoError(t, c.ConsumeTraces(ctx, workloadTraces(1)))
	assert.Equal(t, []string{"Basic dGVuYW50LWE="}, sink.auth)
}

func TestEvaluationErrorsAndRefusedBatches(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	refused := errors.New("logs pipeline refused")
	c := newTestConnector(t, &Config{SampleRate: 1, Evaluators: []EvaluatorConfig{
		{Name: "cost", Check: CheckConfig{Cost: &Threshold{}}, Score: ScoreConfig{DataType: "NUMERIC"}},
	}}, consumertest.NewErr(refused), tel)
	td := workloadTraces(1)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	spans.At(1).Attributes().PutDouble("gen_ai.usage.cost", math.Inf(1)) // no finite value: no score
	err := c.ConsumeTraces(context.Background(), td)
	require.ErrorIs(t, err, refused, "the next consumer's error is returned: the sender retries, with the same ids")
	set := attribute.NewSet(attribute.String("evaluator", "cost"))
	metadatatest.AssertEqualConnectorSvcevaluatorEvaluationErrors(t, tel, []metricdata.DataPoint[int64]{
		{Attributes: set, Value: 1},
	}, metricdatatest.IgnoreTimestamp())
	_, err = tel.GetMetric("otelcol_connector_svcevaluator_scores")
	assert.Error(t, err, "nothing was delivered, so nothing is counted")
}

func TestNoEvaluatorsEmitsNothing(t *testing.T) {
	sink := &consumertest.LogsSink{}
	c := newTestConnector(t, &Config{SampleRate: 1}, sink, nil)
	require.NoError(t, c.ConsumeTraces(context.Background(), workloadTraces(1)))
	assert.Equal(t, 0, sink.LogRecordCount())
}

func TestOTTLChecks(t *testing.T) {
	tests := []struct {
		name  string
		check CheckConfig
		score ScoreConfig
		want  []string
	}{
		{"condition", CheckConfig{OTTLCondition: `span.attributes["gen_ai.usage.output_tokens"] > 100`},
			ScoreConfig{}, []string{"0000000000000001/e=1", "0000000000000002/e=0", "0000000000000003/e=0", "0000000000000004/e=0"}},
		{"condition on the resource and status", CheckConfig{OTTLCondition: `resource.attributes["service.name"] == "travel-agent" and span.status.code == STATUS_CODE_ERROR`},
			ScoreConfig{OnlyWhenTrue: true}, []string{"0000000000000002/e=1"}},
		{"condition with a converter", CheckConfig{OTTLCondition: `IsMatch(span.attributes["svc.observation.output"], "^\\{")`},
			ScoreConfig{OnlyWhenTrue: true}, []string{"0000000000000001/e=1"}},
		{"value; none where the attribute is absent", CheckConfig{OTTLValue: `span.attributes["gen_ai.usage.output_tokens"]`},
			ScoreConfig{}, []string{"0000000000000001/e=300", "0000000000000002/e=9"}},
		{"value of a converter", CheckConfig{OTTLValue: `Len(span.name)`},
			ScoreConfig{}, []string{"0000000000000001/e=9", "0000000000000002/e=12", "0000000000000003/e=6", "0000000000000004/e=5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &consumertest.LogsSink{}
			c := newTestConnector(t, &Config{SampleRate: 1, Evaluators: []EvaluatorConfig{{Name: "e", Check: tt.check, Score: tt.score}}}, sink, nil)
			require.NoError(t, c.ConsumeTraces(context.Background(), workloadTraces(1)))
			got, reqs := scoresOf(t, sink)
			assert.Equal(t, tt.want, got)
			for _, r := range reqs {
				want := scorerecord.DataTypeBoolean
				if tt.check.OTTLValue != "" {
					want = scorerecord.DataTypeNumeric
				}
				assert.Equal(t, want, r.DataType)
			}
		})
	}
}

// A value that is not a number is an evaluation error, counted and logged, never a score.
func TestOTTLValueThatIsNotANumber(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	sink := &consumertest.LogsSink{}
	c := newTestConnector(t, &Config{SampleRate: 1, Evaluators: []EvaluatorConfig{
		{Name: "model", Check: CheckConfig{OTTLValue: `span.attributes["gen_ai.request.model"]`}},
	}}, sink, tel)
	require.NoError(t, c.ConsumeTraces(context.Background(), workloadTraces(1)))
	assert.Equal(t, 0, sink.LogRecordCount())
	metadatatest.AssertEqualConnectorSvcevaluatorEvaluationErrors(t, tel, []metricdata.DataPoint[int64]{
		{Attributes: attribute.NewSet(attribute.String("evaluator", "model")), Value: 1},
	}, metricdatatest.IgnoreTimestamp())
}
