package svcspanfilterprocessor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
)

// When the next consumer (a bug in a later component) panics on one of a call's deliveries, those
// it took are done, the others go on, and the one it panicked on stays journaled and is retried
// after a backoff: every span reaches the platform exactly once, and the panic is logged at error level.
func TestNextConsumerPanicDeliversEverySpanOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		// panicAt: the call's delivery the next consumer panics on (1: the first).
		panicAt int32
	}{
		{name: "panics on the first delivery", panicAt: 1},
		{name: "takes the first delivery, panics on the second", panicAt: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			fj := &fakeJournal{}
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
			sink := new(consumertest.TracesSink)
			var calls atomic.Int32
			armed := atomic.Bool{}
			next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
				if armed.Load() && calls.Add(1) == tc.panicAt {
					armed.Store(false)
					panic("exporter bug")
				}
				return sink.ConsumeTraces(ctx, td)
			})
			require.NoError(t, err)
			cfg := createDefaultConfig().(*Config)
			set := processortest.NewNopSettings(metadata.Type)
			core, logs := observer.New(zap.InfoLevel)
			set.Logger = zap.New(core)
			p, err := newSpanFilterProcessor(set, cfg, next, fj)
			require.NoError(t, err)
			p.now = clock.Now

			// chat goes on by rule 1, leaving "tool http" an open parent; a later call holds child.
			_, err = p.processTraces(ctx, batch(testSpan{name: "chat", scope: scopeSDK, parent: "tool http"}))
			require.ErrorIs(t, err, processorhelper.ErrSkipProcessingData)
			clock.Advance(cfg.TraceIntegrity.WaitDuration + time.Second)
			p.mem.Expire()
			p.deliverReady(ctx, false)
			_, err = p.processTraces(ctx, batch(testSpan{name: "child", scope: scopeSDK, parent: "root"}))
			require.ErrorIs(t, err, processorhelper.ErrSkipProcessingData)
			require.Equal(t, int64(1), p.mem.HeldSpans())

			// This call holds nothing and hands on two deliveries before its journal write: the
			// earlier call's child (its parent root passes) and its own connector "tool http".
			armed.Store(true)
			assert.NotPanics(t, func() {
				_, err = p.processTraces(ctx, batch(testSpan{name: "tool http", scope: scopeHTTPClient, parent: "agent"},
					testSpan{name: "root", scope: scopeSDK}))
			}, "the call is answered as usual")
			assert.NoError(t, err, "the call is answered as usual")
			assert.Equal(t, tc.panicAt, calls.Load(), "the call handed on its deliveries up to the panic")
			p.deliverReady(ctx, false)
			assert.Equal(t, tc.panicAt, calls.Load(), "the delivery that panicked waits for its backoff")
			clock.Advance(time.Second)
			p.deliverReady(ctx, false) // the releaser retries what the panic refused

			seen := map[string]int{}
			for _, td := range sink.AllTraces() {
				forEachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, s ptrace.Span) { seen[s.Name()]++ })
			}
			assert.Equal(t, map[string]int{"chat": 1, "child": 1, "tool http": 1}, seen, "every span once")
			assert.Empty(t, spanRecords(fj), "every span record is removed once handed on")
			panics := logs.FilterMessageSnippet("panicked").FilterField(zap.Any("panic", "exporter bug"))
			if assert.Equal(t, 1, panics.Len(), "the panic is logged") {
				assert.Equal(t, zapcore.ErrorLevel, panics.All()[0].Level)
			}
		})
	}
}
