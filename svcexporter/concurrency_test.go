package svcexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/scorerecord"
)

// The collector calls one exporter from many goroutines when its queue has several consumers or
// is off. Many goroutines push spans and scores through one traces and one logs exporter while
// the platform fails every fourth request with 503: each span and score is stored exactly once,
// and the exporter's own sent counters match. Run with -race.
func TestConcurrentConsumeTracesAndLogs(t *testing.T) {
	const (
		goroutines = 16
		batches    = 10
		perBatch   = 120 // scores: two requests per push
	)
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	var mu sync.Mutex
	calls := 0
	spans := map[pcommon.SpanID]int{}
	scores := map[string]int{}
	failEveryFourth := func() bool {
		calls++
		return calls%4 == 0
	}
	p.setTraces(func(w http.ResponseWriter, _ *http.Request, body []byte) {
		td := decodeTraces(t, body)
		mu.Lock()
		defer mu.Unlock()
		if failEveryFourth() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			ss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < ss.Len(); j++ {
				for k := 0; k < ss.At(j).Spans().Len(); k++ {
					spans[ss.At(j).Spans().At(k).SpanID()]++
				}
			}
		}
		w.WriteHeader(http.StatusOK)
	})
	p.setScores(func(w http.ResponseWriter, _ *http.Request, body []byte) {
		var batch []map[string]any
		if err := json.Unmarshal(body, &batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if failEveryFourth() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		for _, s := range batch {
			scores[s["id"].(string)]++
		}
		w.WriteHeader(http.StatusOK)
	})

	cfg := testConfig(p.srv.URL)
	fastRetry(cfg)
	env := newTestEnv(t)
	ctx := context.Background()
	traces, err := NewFactory().CreateTraces(ctx, env.settings, cfg)
	require.NoError(t, err)
	logs, err := NewFactory().CreateLogs(ctx, env.settings, cfg)
	require.NoError(t, err)
	require.NoError(t, traces.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, logs.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() {
		require.NoError(t, traces.Shutdown(ctx))
		require.NoError(t, logs.Shutdown(ctx))
	})

	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for b := range batches {
				td := ptrace.NewTraces()
				ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
				ld := plog.NewLogs()
				lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
				for i := range perBatch {
					n := (g*batches+b)*perBatch + i + 1
					span := ss.AppendEmpty()
					span.SetTraceID(testTraceID(n))
					span.SetSpanID(testSpanID(n))
					span.SetName("chat")
					scorerecord.Write(lrs.AppendEmpty(), scorerecord.Score{
						ID: fmt.Sprintf("score-%d", n), TraceID: testTraceID(n), Name: "quality",
						Value: pcommon.NewValueDouble(1), Timestamp: pcommon.NewTimestampFromTime(scoreTime),
					})
				}
				if err := traces.ConsumeTraces(ctx, td); err != nil {
					t.Error(err)
				}
				if err := logs.ConsumeLogs(ctx, ld); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()

	const total = goroutines * batches * perBatch
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, spans, total)
	assert.Len(t, scores, total)
	for id, n := range spans {
		if n != 1 {
			t.Errorf("span %s stored %d times", id, n)
		}
	}
	for id, n := range scores {
		if n != 1 {
			t.Errorf("score %s stored %d times", id, n)
		}
	}
	assert.Equal(t, int64(total), readDeliveryCounts(t, env.telemetry, "spans").sent)
	assert.Equal(t, int64(total), readDeliveryCounts(t, env.telemetry, "scores").sent)
}
