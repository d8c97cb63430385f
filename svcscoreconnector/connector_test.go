package svcscoreconnector

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/svc/svc-collector/pkg/masking"
	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/svcscoreconnector/internal/metadata"
	"github.com/svc/svc-collector/svcscoreconnector/internal/metadatatest"
)

// newTestConnector builds the connector with a fixed queue time, so outputs are reproducible.
func newTestConnector(t testing.TB, rate float64, next consumer.Logs, tel *componenttest.Telemetry) *scoreConnector {
	t.Helper()
	set := connectortest.NewNopSettings(metadata.Type)
	if tel != nil {
		set = metadatatest.NewSettings(tel)
	}
	c, err := newScoreConnector(set, &Config{SampleRate: rate}, next)
	require.NoError(t, err)
	c.now = func() pcommon.Timestamp { return queuedAt }
	t.Cleanup(func() { require.NoError(t, c.Shutdown(context.Background())) })
	return c
}

// records flattens what a sink received into score requests, in order.
func records(sink *consumertest.LogsSink) []scorerecord.Request {
	var out []scorerecord.Request
	for _, ld := range sink.AllLogs() {
		forEachRecord(ld, func(lr plog.LogRecord) { out = append(out, scorerecord.Read(lr)) })
	}
	return out
}

func forEachRecord(ld plog.Logs, fn func(plog.LogRecord)) {
	for i := 0; i < ld.ResourceLogs().Len(); i++ {
		sls := ld.ResourceLogs().At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				fn(lrs.At(k))
			}
		}
	}
}

// update rewrites the expected golden files from the current output: go test -run TestGolden -update,
// then review the diff.
var update = flag.Bool("update", false, "rewrite testdata/*/expected.yaml from the current output")

func readTraces(t testing.TB, path string) ptrace.Traces {
	t.Helper()
	td, err := golden.ReadTraces(path)
	require.NoError(t, err)
	return td
}

func readLogs(t testing.TB, path string) plog.Logs {
	t.Helper()
	ld, err := golden.ReadLogs(path)
	require.NoError(t, err)
	return ld
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name    string
		consume func(c *scoreConnector, input string) error
	}{
		{"traces_to_logs", func(c *scoreConnector, input string) error {
			return c.ConsumeTraces(context.Background(), readTraces(t, input))
		}},
		{"logs_to_logs", func(c *scoreConnector, input string) error {
			return c.ConsumeLogs(context.Background(), readLogs(t, input))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &consumertest.LogsSink{}
			c := newTestConnector(t, 1, sink, nil)
			require.NoError(t, tt.consume(c, filepath.Join("testdata", tt.name, "input.yaml")))
			require.Len(t, sink.AllLogs(), 1)
			expectedFile := filepath.Join("testdata", tt.name, "expected.yaml")
			if *update {
				require.NoError(t, golden.WriteLogs(t, expectedFile, sink.AllLogs()[0]))
			}
			require.NoError(t, plogtest.CompareLogs(readLogs(t, expectedFile), sink.AllLogs()[0]))
		})
	}
}

// What the golden files hold, spelt out as a user checks it: which scores arrive, attached where.
func TestTracesToLogsScores(t *testing.T) {
	sink := &consumertest.LogsSink{}
	c := newTestConnector(t, 1, sink, nil)
	require.NoError(t, c.ConsumeTraces(context.Background(), readTraces(t, filepath.Join("testdata", "traces_to_logs", "input.yaml"))))

	type attached struct{ name, trace, observation, environment string }
	var got []attached
	for _, r := range records(sink) {
		require.NoError(t, r.Validate(), r.Name)
		got = append(got, attached{r.Name, r.TraceID, r.ObservationID, r.Environment})
	}
	assert.Equal(t, []attached{
		{"helpfulness", "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "production"},
		{"user_feedback", "0af7651916cd43dd8448eb211c80319c", "", "staging"}, // trace-level
		{"relevance", "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "production"},
		{"toxicity", "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "production"},
		{"is_correct", "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "production"},
		// "accuracy" of the second resource has an invalid target and is dropped.
		{"faithfulness", "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174", "ci"},
	}, got)
}

func TestLogsToLogsScores(t *testing.T) {
	sink := &consumertest.LogsSink{}
	c := newTestConnector(t, 1, sink, nil)
	require.NoError(t, c.ConsumeLogs(context.Background(), readLogs(t, filepath.Join("testdata", "logs_to_logs", "input.yaml"))))

	got := records(sink)
	require.Len(t, got, 5, "the two plain log records are not scores")
	byName := map[string]scorerecord.Request{}
	for _, r := range got {
		require.NoError(t, r.Validate(), r.Name)
		require.NotEmpty(t, r.ID, r.Name)
		require.NotEmpty(t, r.Timestamp, r.Name)
		byName[r.Name] = r
	}
	assert.Equal(t, "b7ad6b7169203331", byName["relevance"].ObservationID)
	assert.Equal(t, "off topic", byName["relevance"].Comment)
	// event.name attribute of an older SDK; no span id: trace-level; no time: observed time.
	assert.Equal(t, "", byName["tone"].ObservationID)
	assert.Equal(t, "friendly", byName["tone"].Value)
	assert.Equal(t, "2023-11-14T22:13:41Z", byName["tone"].Timestamp)
	// An already complete score record keeps what it has.
	assert.Equal(t, "score-42", byName["helpfulness"].ID)
	assert.Equal(t, "2023-11-14T22:13:42Z", byName["helpfulness"].Timestamp)
	// Run-level: no trace id, kept, stamped with the queue time.
	assert.Equal(t, "", byName["run_accuracy"].TraceID)
	assert.Equal(t, "2023-11-14T22:15:00Z", byName["run_accuracy"].Timestamp)
	assert.Equal(t, map[string]any{"dataset": "qa-v3"}, byName["run_accuracy"].Metadata)
	assert.Equal(t, "run-qa-v3-0501", byName["run_accuracy"].DatasetRunID)
	// svc.score.target=trace clears the span id of a log record too.
	assert.Equal(t, "5b8efff798038103d269b633813fc60c", byName["conversation_quality"].TraceID)
	assert.Equal(t, "", byName["conversation_quality"].ObservationID)
}

// A score record that went through the connector once comes out unchanged the second time:
// the logs → logs path is idempotent on its own output.
func TestScoreRecordsPassThroughUnchanged(t *testing.T) {
	first := &consumertest.LogsSink{}
	c := newTestConnector(t, 1, first, nil)
	require.NoError(t, c.ConsumeTraces(context.Background(), readTraces(t, filepath.Join("testdata", "traces_to_logs", "input.yaml"))))
	require.Len(t, first.AllLogs(), 1)

	second := &consumertest.LogsSink{}
	again := newTestConnector(t, 1, second, nil)
	again.now = func() pcommon.Timestamp { return queuedAt + 1e9 }
	require.NoError(t, again.ConsumeLogs(context.Background(), first.AllLogs()[0]))
	assert.Equal(t, records(first), records(second))
}

func TestDeterministicIDsAreStableAcrossReprocessing(t *testing.T) {
	input := filepath.Join("testdata", "traces_to_logs", "input.yaml")
	idsOf := func(now pcommon.Timestamp) []string {
		sink := &consumertest.LogsSink{}
		c := newTestConnector(t, 1, sink, nil)
		c.now = func() pcommon.Timestamp { return now }
		require.NoError(t, c.ConsumeTraces(context.Background(), readTraces(t, input)))
		var ids []string
		for _, r := range records(sink) {
			ids = append(ids, r.ID)
		}
		return ids
	}
	first := idsOf(queuedAt)
	// The same spans resent a minute later: the same ids, even for the event without a time.
	assert.Equal(t, first, idsOf(queuedAt+60e9))

	unique := map[string]bool{}
	for _, id := range first {
		assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$|^feedback-1$`, id)
		unique[id] = true
	}
	assert.Len(t, unique, len(first), "every score of the batch has its own id")
}

func TestSamplingAgreesWithSpanFilterDecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, rate := range []float64{0.1, 0.5, 0.9} {
		t.Run("", func(t *testing.T) {
			const traces = 2000
			td := ptrace.NewTraces()
			ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
			var ids []pcommon.TraceID
			for range traces {
				var tid pcommon.TraceID
				for i := range tid {
					tid[i] = byte(rng.IntN(256))
				}
				ids = append(ids, tid)
				span := ss.Spans().AppendEmpty()
				span.SetTraceID(tid)
				span.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
				ev := span.Events().AppendEmpty()
				ev.SetName(scorerecord.GenAIEvaluationEvent)
				ev.Attributes().PutStr(scorerecord.GenAIEvaluationName, "relevance")
				ev.Attributes().PutDouble(scorerecord.GenAIEvaluationScoreValue, 0.5)
			}
			tel := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
			sink := &consumertest.LogsSink{}
			c := newTestConnector(t, rate, sink, tel)
			require.NoError(t, c.ConsumeTraces(context.Background(), td))

			got := map[string]bool{}
			for _, r := range records(sink) {
				got[r.TraceID] = true
			}
			ratio := sampling.NewRatio(rate)
			kept := 0
			for _, tid := range ids {
				want := ratio.Keep(tid)
				if want {
					kept++
				}
				assert.Equal(t, want, got[hex.EncodeToString(tid[:])], "trace %x at rate %v", tid, rate)
			}
			// The rate shows in the counts, so the test cannot pass by keeping all or none.
			assert.InDelta(t, rate*traces, kept, 0.05*traces)
			metadatatest.AssertEqualConnectorSvcscoreScoresDropped(t, tel, []metricdata.DataPoint[int64]{{
				Attributes: attribute.NewSet(attribute.String("source", "span_event"), attribute.String("event", scorerecord.GenAIEvaluationEvent), attribute.String("reason", "sampled_out")),
				Value:      int64(traces - kept),
			}}, metricdatatest.IgnoreTimestamp())
		})
	}
}

// sampledOutTraceID finds a trace id the ratio drops.
// sampledOutTraceIDs returns n different trace ids that rate samples out.
func sampledOutTraceIDs(t *testing.T, rate float64, n int) []pcommon.TraceID {
	ratio := sampling.NewRatio(rate)
	var ids []pcommon.TraceID
	for i := 0; i < 1000 && len(ids) < n; i++ {
		tid := pcommon.TraceID{15: byte(i), 14: byte(i >> 8), 8: 0xf0}
		if !ratio.Keep(tid) {
			ids = append(ids, tid)
		}
	}
	require.Len(t, ids, n, "sampled-out trace ids")
	return ids
}

// scoredSpan appends a span of trace tid with the attributes attrs and one svc.score event.
func scoredSpan(t *testing.T, spans ptrace.SpanSlice, tid pcommon.TraceID, name string, attrs map[string]any) {
	span := spans.AppendEmpty()
	span.SetTraceID(tid)
	span.SetSpanID(pcommon.SpanID{0: 1, 7: byte(spans.Len())})
	require.NoError(t, span.Attributes().FromRaw(attrs))
	ev := span.Events().AppendEmpty()
	ev.SetName(scorerecord.EventName)
	ev.Attributes().PutStr(scorerecord.AttrName, name)
	ev.Attributes().PutDouble(scorerecord.AttrValue, 1)
}

func names(sink *consumertest.LogsSink) []string {
	var out []string
	for _, r := range records(sink) {
		out = append(out, r.Name)
	}
	return out
}

func TestSamplingKeepsRunLevelAndExperimentScores(t *testing.T) {
	const rate = 0.01
	ids := sampledOutTraceIDs(t, rate, 4)

	t.Run("span events", func(t *testing.T) {
		td := ptrace.NewTraces()
		spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		scoredSpan(t, spans, ids[0], "plain", nil)
		scoredSpan(t, spans, ids[1], "experiment_attr", map[string]any{"svc.experiment.id": "exp-1"})
		scoredSpan(t, spans, ids[2], "experiment_env", map[string]any{"svc.environment": "sdk-experiment"})
		// An experiment environment on the resource only does not exempt the span from the span
		// filter's sampling, so its score goes with it.
		resSpans := td.ResourceSpans().AppendEmpty()
		resSpans.Resource().Attributes().PutStr("svc.environment", "sdk-experiment")
		scoredSpan(t, resSpans.ScopeSpans().AppendEmpty().Spans(), ids[3], "resource_env_only", nil)

		sink := &consumertest.LogsSink{}
		require.NoError(t, newTestConnector(t, rate, sink, nil).ConsumeTraces(context.Background(), td))
		assert.Equal(t, []string{"experiment_attr", "experiment_env"}, names(sink))
	})

	t.Run("log records", func(t *testing.T) {
		ld := plog.NewLogs()
		lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
		add := func(name string, tid pcommon.TraceID, env string) {
			lr := lrs.AppendEmpty()
			lr.SetEventName(scorerecord.EventName)
			lr.SetTraceID(tid)
			lr.Attributes().PutStr(scorerecord.AttrName, name)
			lr.Attributes().PutDouble(scorerecord.AttrValue, 1)
			if env != "" {
				lr.Attributes().PutStr(scorerecord.AttrEnvironment, env)
			}
		}
		add("sampled_out", ids[0], "")
		add("run_level", pcommon.TraceID{}, "")
		add("experiment", ids[0], "sdk-experiment")

		sink := &consumertest.LogsSink{}
		require.NoError(t, newTestConnector(t, rate, sink, nil).ConsumeLogs(context.Background(), ld))
		assert.Equal(t, []string{"run_level", "experiment"}, names(sink))
	})
}

// Experiments are exempt per trace: once a span of a trace marks it as an experiment, every
// later score of the trace is kept, whatever the batch it comes in and whether its own span
// says so. Scores sampled out before the marking arrived are gone.
func TestExperimentTraceKeepsAllItsLaterScores(t *testing.T) {
	const rate = 1e-9 // about nothing is kept by the ratio
	ids := sampledOutTraceIDs(t, rate, 2)
	experiment, other := ids[0], ids[1]
	spansOf := func(td ptrace.Traces) ptrace.SpanSlice {
		return td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	}
	logScore := func(tid pcommon.TraceID, name string) plog.Logs {
		ld := plog.NewLogs()
		lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		lr.SetEventName(scorerecord.GenAIEvaluationEvent)
		lr.SetTraceID(tid)
		lr.Attributes().PutStr(scorerecord.GenAIEvaluationName, name)
		lr.Attributes().PutDouble(scorerecord.GenAIEvaluationScoreValue, 0.5)
		return ld
	}

	sink := &consumertest.LogsSink{}
	ctx := context.Background()
	// One connector id, two instances, as the collector builds traces_to_logs and logs_to_logs.
	set := connectortest.NewNopSettings(metadata.Type)
	cfg := &Config{SampleRate: rate}
	tracesToLogs, err := NewFactory().CreateTracesToLogs(ctx, set, cfg, sink)
	require.NoError(t, err)
	logsToLogs, err := NewFactory().CreateLogsToLogs(ctx, set, cfg, sink)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, tracesToLogs.Shutdown(ctx))
		require.NoError(t, logsToLogs.Shutdown(ctx))
	})

	// Request 1: a score of the trace before any span marked it: sampled out, gone for good.
	early := ptrace.NewTraces()
	scoredSpan(t, spansOf(early), experiment, "before_marking", nil)
	require.NoError(t, tracesToLogs.ConsumeTraces(ctx, early))

	// Request 2: the root span marks the trace; a child comes before it in the same batch.
	marking := ptrace.NewTraces()
	spans := spansOf(marking)
	scoredSpan(t, spans, experiment, "child_before_root", nil)
	scoredSpan(t, spans, experiment, "root", map[string]any{"svc.experiment.id": "exp-1", "svc.experiment.item.id": "item-3"})
	scoredSpan(t, spans, other, "other_trace", nil)
	require.NoError(t, tracesToLogs.ConsumeTraces(ctx, marking))

	// Requests 3 and 4: later spans and log-record scores of the trace, without any marking.
	late := ptrace.NewTraces()
	scoredSpan(t, spansOf(late), experiment, "late_span", nil)
	scoredSpan(t, spansOf(late), other, "other_trace_late", nil)
	require.NoError(t, tracesToLogs.ConsumeTraces(ctx, late))
	require.NoError(t, logsToLogs.ConsumeLogs(ctx, logScore(experiment, "late_evaluation")))
	require.NoError(t, logsToLogs.ConsumeLogs(ctx, logScore(other, "other_evaluation")))

	assert.Equal(t, []string{"child_before_root", "root", "late_span", "late_evaluation"}, names(sink))
}

func TestConnectorDoesNotChangeItsInput(t *testing.T) {
	c := newTestConnector(t, 1, &consumertest.LogsSink{}, nil)
	assert.False(t, c.Capabilities().MutatesData)

	td := readTraces(t, filepath.Join("testdata", "traces_to_logs", "input.yaml"))
	tdBefore := ptrace.NewTraces()
	td.CopyTo(tdBefore)
	require.NoError(t, c.ConsumeTraces(context.Background(), td))
	assert.Equal(t, tdBefore, td)

	ld := readLogs(t, filepath.Join("testdata", "logs_to_logs", "input.yaml"))
	ldBefore := plog.NewLogs()
	ld.CopyTo(ldBefore)
	require.NoError(t, c.ConsumeLogs(context.Background(), ld))
	assert.Equal(t, ldBefore, ld)
}

func TestNothingIsForwardedWithoutScores(t *testing.T) {
	sink := &consumertest.LogsSink{}
	c := newTestConnector(t, 1, sink, nil)

	td := readTraces(t, filepath.Join("testdata", "traces_to_logs", "input.yaml"))
	// Rename every scoring event: nothing left to score.
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		spans := td.ResourceSpans().At(i).ScopeSpans().At(0).Spans()
		for j := 0; j < spans.Len(); j++ {
			for k := 0; k < spans.At(j).Events().Len(); k++ {
				spans.At(j).Events().At(k).SetName("note")
			}
		}
	}
	require.NoError(t, c.ConsumeTraces(context.Background(), td))
	require.NoError(t, c.ConsumeLogs(context.Background(), plog.NewLogs()))
	assert.Empty(t, sink.AllLogs())
}

func TestNextConsumerErrorIsReturnedUnchanged(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	refused := consumererror.NewPermanent(errors.New("logs pipeline refused"))
	c := newTestConnector(t, 1, consumertest.NewErr(refused), tel)

	err := c.ConsumeTraces(context.Background(), readTraces(t, filepath.Join("testdata", "traces_to_logs", "input.yaml")))
	require.ErrorIs(t, err, refused)
	assert.True(t, consumererror.IsPermanent(err))
	_, err = tel.GetMetric("otelcol_connector_svcscore_scores_emitted")
	assert.Error(t, err, "nothing was emitted, so nothing is counted")
}

func TestTelemetryCountsBySourceEventAndReason(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	c := newTestConnector(t, 1, &consumertest.LogsSink{}, tel)
	require.NoError(t, c.ConsumeTraces(context.Background(), readTraces(t, filepath.Join("testdata", "traces_to_logs", "input.yaml"))))
	require.NoError(t, c.ConsumeLogs(context.Background(), readLogs(t, filepath.Join("testdata", "logs_to_logs", "input.yaml"))))

	set := func(kv ...string) attribute.Set {
		var attrs []attribute.KeyValue
		for i := 0; i < len(kv); i += 2 {
			attrs = append(attrs, attribute.String(kv[i], kv[i+1]))
		}
		return attribute.NewSet(attrs...)
	}
	metadatatest.AssertEqualConnectorSvcscoreScoresEmitted(t, tel, []metricdata.DataPoint[int64]{
		{Attributes: set("source", "span_event", "event", "svc.score"), Value: 3},
		{Attributes: set("source", "span_event", "event", "gen_ai.evaluation.result"), Value: 3},
		{Attributes: set("source", "log_record", "event", "svc.score"), Value: 3},
		{Attributes: set("source", "log_record", "event", "gen_ai.evaluation.result"), Value: 2},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualConnectorSvcscoreScoresDropped(t, tel, []metricdata.DataPoint[int64]{
		{Attributes: set("source", "span_event", "event", "svc.score", "reason", "invalid_target"), Value: 1},
	}, metricdatatest.IgnoreTimestamp())
}

func TestInvalidTargetIsLoggedOncePerBatch(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	set := connectortest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	sink := &consumertest.LogsSink{}
	c, err := newScoreConnector(set, &Config{SampleRate: 1}, sink)
	require.NoError(t, err)

	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetTraceID(testTraceID)
	span.SetSpanID(testSpanID)
	for _, target := range []string{"session", "span", "trace"} {
		ev := span.Events().AppendEmpty()
		ev.SetName(scorerecord.EventName)
		ev.Attributes().PutStr(scorerecord.AttrName, "accuracy_"+target)
		ev.Attributes().PutDouble(scorerecord.AttrValue, 1)
		ev.Attributes().PutStr(scorerecord.AttrTarget, target)
	}
	require.NoError(t, c.ConsumeTraces(context.Background(), td))

	require.Equal(t, 1, logs.Len())
	entry := logs.All()[0]
	assert.Equal(t, int64(2), entry.ContextMap()["dropped"])
	assert.Contains(t, entry.ContextMap()["error"], `score "accuracy_session": svc.score.target must be "observation" or "trace", got "session"`)
	// The valid score of the same span still goes on.
	got := records(sink)
	require.Len(t, got, 1)
	assert.Equal(t, "accuracy_trace", got[0].Name)
}

// Through the factory, a score without a time is stamped with the real time it was queued.
func TestFactoryConnectorStampsQueueTime(t *testing.T) {
	sink := &consumertest.LogsSink{}
	f := NewFactory()
	tl, err := f.CreateTracesToLogs(context.Background(), connectortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, tl.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, tl.Shutdown(context.Background())) }()

	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetTraceID(testTraceID)
	ev := span.Events().AppendEmpty()
	ev.SetName(scorerecord.GenAIEvaluationEvent)
	ev.Attributes().PutStr(scorerecord.GenAIEvaluationName, "relevance")
	ev.Attributes().PutDouble(scorerecord.GenAIEvaluationScoreValue, 1)

	before := time.Now()
	require.NoError(t, tl.ConsumeTraces(context.Background(), td))
	after := time.Now()
	got := records(sink)
	require.Len(t, got, 1)
	ts, err := time.Parse(time.RFC3339Nano, got[0].Timestamp)
	require.NoError(t, err)
	assert.False(t, ts.Before(before.Truncate(time.Microsecond)) || ts.After(after), "timestamp %v not within [%v, %v]", ts, before, after)
}

var (
	testTraceID = pcommon.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}
	testSpanID  = pcommon.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31}
)

// queuedAt is the fixed time the test connectors queue scores at.
const queuedAt = pcommon.Timestamp(1_700_000_100_000_000_000)

// Score records are masked like spans, on both paths: the comment (an evaluation's
// explanation), a string value and the metadata lose their personal data and keep the rest.
func TestGoldenMasking(t *testing.T) {
	pii := []string{"jane.doe@example.com", "4111 1111 1111 1111", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"}
	cfg := &Config{SampleRate: 1, Masking: masking.Config{BuiltinRules: masking.BuiltinRuleNames(), KeyReplacement: "***"}}
	for _, tc := range []struct {
		name    string
		consume func(c *scoreConnector, dir string) error
	}{
		{"masking_span_events", func(c *scoreConnector, dir string) error {
			return c.ConsumeTraces(context.Background(), readTraces(t, filepath.Join(dir, "input.yaml")))
		}},
		{"masking_log_events", func(c *scoreConnector, dir string) error {
			return c.ConsumeLogs(context.Background(), readLogs(t, filepath.Join(dir, "input.yaml")))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &consumertest.LogsSink{}
			c, err := newScoreConnector(connectortest.NewNopSettings(metadata.Type), cfg, sink)
			require.NoError(t, err)
			c.now = func() pcommon.Timestamp { return queuedAt }
			dir := filepath.Join("testdata", tc.name)
			require.NoError(t, tc.consume(c, dir))
			require.Len(t, sink.AllLogs(), 1)
			expectedFile := filepath.Join(dir, "expected.yaml")
			if *update {
				require.NoError(t, golden.WriteLogs(t, expectedFile, sink.AllLogs()[0]))
			}
			require.NoError(t, plogtest.CompareLogs(readLogs(t, expectedFile), sink.AllLogs()[0]))

			got := records(sink)
			require.Len(t, got, 2)
			raw, err := (&plog.JSONMarshaler{}).MarshalLogs(sink.AllLogs()[0])
			require.NoError(t, err)
			for _, p := range pii {
				assert.NotContains(t, string(raw), p)
			}
			assert.Equal(t, "The answer repeats the user's e-mail [EMAIL] and card [CARD]; otherwise it is faithful.", got[0].Comment)
			assert.Equal(t, "user pasted key [API_KEY]", got[1].Comment)
			assert.Equal(t, "wrong refund, write to [EMAIL]", got[1].Value)
			assert.Equal(t, "[EMAIL]", got[1].Metadata["reviewer"])
			assert.Equal(t, "web", got[1].Metadata["channel"])
			require.NoError(t, c.Shutdown(context.Background()))
		})
	}
}
