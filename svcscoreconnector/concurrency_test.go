package svcscoreconnector

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/svcscoreconnector/internal/metadatatest"
)

// The collector calls one connector instance from many goroutines (every receiver connection).
// Each goroutine sends its own traces, half of them experiments that the rate samples out, and
// log-record scores of those traces: every score of an experiment trace and every run-level
// score arrives once, nothing else does, and the counters add up. Run with -race.
func TestConcurrentConsumeTracesAndLogs(t *testing.T) {
	const (
		goroutines = 16
		batches    = 20
		rate       = 1e-9 // the ratio keeps no trace of this test
	)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	sink := &consumertest.LogsSink{}
	ctx := context.Background()
	set := metadatatest.NewSettings(tel)
	cfg := &Config{SampleRate: rate}
	tracesToLogs, err := NewFactory().CreateTracesToLogs(ctx, set, cfg, sink)
	require.NoError(t, err)
	logsToLogs, err := NewFactory().CreateLogsToLogs(ctx, set, cfg, sink)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, tracesToLogs.Shutdown(ctx))
		require.NoError(t, logsToLogs.Shutdown(ctx))
	})

	traceOf := func(g, b int) pcommon.TraceID {
		return pcommon.TraceID{0: byte(g), 1: byte(b), 8: 0xff, 15: 0xff} // sampled out below rate 1
	}
	experiment := func(b int) bool { return b%2 == 0 }

	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for b := range batches {
				td := ptrace.NewTraces()
				spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
				var rootAttrs map[string]any
				if experiment(b) {
					rootAttrs = map[string]any{"svc.experiment.id": fmt.Sprintf("exp-%d", g)}
				}
				scoredSpan(t, spans, traceOf(g, b), "child", nil)
				scoredSpan(t, spans, traceOf(g, b), "root", rootAttrs)
				if err := tracesToLogs.ConsumeTraces(ctx, td); err != nil {
					t.Error(err)
				}

				ld := plog.NewLogs()
				lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
				for _, tid := range []pcommon.TraceID{traceOf(g, b), {}} {
					lr := lrs.AppendEmpty()
					lr.SetEventName(scorerecord.EventName)
					lr.SetTraceID(tid)
					lr.Attributes().PutStr(scorerecord.AttrName, "evaluation")
					lr.Attributes().PutInt(scorerecord.AttrValue, int64(g*batches+b))
					lr.Attributes().PutStr(scorerecord.AttrDatasetRunID, "run-1")
				}
				if err := logsToLogs.ConsumeLogs(ctx, ld); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()

	// Per goroutine: half the batches are experiments (2 span scores + 1 log score each),
	// every batch has one run-level score.
	const experiments = goroutines * batches / 2
	const want = experiments*3 + goroutines*batches
	got := records(sink)
	require.Len(t, got, want)
	ids := map[string]bool{}
	for _, r := range got {
		assert.False(t, ids[r.ID], "score id %s once", r.ID)
		ids[r.ID] = true
	}
	var emitted, dropped int64
	for name, total := range map[string]*int64{
		"otelcol_connector_svcscore_scores_emitted": &emitted,
		"otelcol_connector_svcscore_scores_dropped": &dropped,
	} {
		m, err := tel.GetMetric(name)
		require.NoError(t, err)
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			*total += dp.Value
		}
	}
	assert.Equal(t, int64(want), emitted)
	assert.Equal(t, int64(goroutines*batches/2*3), dropped, "the scores of the other traces are sampled out")
}
