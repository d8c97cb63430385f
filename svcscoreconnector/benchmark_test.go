package svcscoreconnector

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/scorerecord"
)

const (
	benchSpans          = 100
	benchScoresPerSpan  = 2 // one svc.score, one gen_ai.evaluation.result
	benchOtherEvents    = 2 // events that are not scores, which the connector skips
	benchScoresPerBatch = benchSpans * benchScoresPerSpan
)

// benchTraces is an application's batch: spans with two scoring events among other events.
func benchTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "chat-app")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("svc-sdk")
	for i := range benchSpans {
		span := ss.Spans().AppendEmpty()
		span.SetTraceID(pcommon.TraceID{0: byte(i), 1: byte(i >> 8), 8: byte(i * 7), 15: byte(i)})
		span.SetSpanID(pcommon.SpanID{0: byte(i), 7: 1})
		span.SetName("chat")
		span.Attributes().PutStr("gen_ai.operation.name", "chat")
		span.Attributes().PutStr("svc.environment", "production")
		for e := range benchOtherEvents {
			ev := span.Events().AppendEmpty()
			ev.SetName("gen_ai.content.prompt")
			ev.SetTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + e))
		}
		ev := span.Events().AppendEmpty()
		ev.SetName(scorerecord.EventName)
		ev.SetTimestamp(1_700_000_001_000_000_000)
		ev.Attributes().PutStr(scorerecord.AttrName, "helpfulness")
		ev.Attributes().PutDouble(scorerecord.AttrValue, 0.9)
		ev.Attributes().PutStr(scorerecord.AttrComment, "clear answer")
		ev.Attributes().PutStr(scorerecord.AttrMetadataPrefix+"judge", "gpt-x")
		ev = span.Events().AppendEmpty()
		ev.SetName(scorerecord.GenAIEvaluationEvent)
		ev.SetTimestamp(1_700_000_001_100_000_000)
		ev.Attributes().PutStr(scorerecord.GenAIEvaluationName, "relevance")
		ev.Attributes().PutDouble(scorerecord.GenAIEvaluationScoreValue, 0.75)
		ev.Attributes().PutStr(scorerecord.GenAIEvaluationScoreLabel, "relevant")
		ev.Attributes().PutStr(scorerecord.GenAIEvaluationExplanation, "mentions the product")
	}
	return td
}

// benchLogs is the same scores sent as log records.
func benchLogs(b *testing.B) plog.Logs {
	sink := &consumertest.LogsSink{}
	c := newTestConnector(b, 1, sink, nil)
	require.NoError(b, c.ConsumeTraces(context.Background(), benchTraces()))
	ld := sink.AllLogs()[0]
	// Strip the ids, so the logs path derives them as it does for an application's records.
	forEachRecord(ld, func(lr plog.LogRecord) { lr.Attributes().Remove(scorerecord.AttrID) })
	return ld
}

// BenchmarkConnector measures score throughput of one connector; run it with -cpu 1 for the
// one-core figure. scores/s and allocs/score are per score emitted (200 per batch).
func BenchmarkConnector(b *testing.B) {
	ctx := context.Background()
	cases := []struct {
		name    string
		rate    float64
		consume func(c *scoreConnector) error
	}{
		{"traces_to_logs", 1, func() func(*scoreConnector) error {
			td := benchTraces()
			return func(c *scoreConnector) error { return c.ConsumeTraces(ctx, td) }
		}()},
		// A quarter of the traces kept: the experiment marking is read on the others.
		{"traces_to_logs_sampled", 0.25, func() func(*scoreConnector) error {
			td := benchTraces()
			return func(c *scoreConnector) error { return c.ConsumeTraces(ctx, td) }
		}()},
		{"logs_to_logs", 1, func() func(*scoreConnector) error {
			ld := benchLogs(b)
			return func(c *scoreConnector) error { return c.ConsumeLogs(ctx, ld) }
		}()},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			c := newTestConnector(b, bc.rate, consumertest.NewNop(), nil)
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			batches := 0
			for b.Loop() {
				if err := bc.consume(c); err != nil {
					b.Fatal(err)
				}
				batches++
			}
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			scores := float64(batches * benchScoresPerBatch)
			b.ReportMetric(scores/elapsed.Seconds(), "scores/s")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/scores, "allocs/score")
		})
	}
}
