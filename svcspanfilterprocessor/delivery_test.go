package svcspanfilterprocessor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadatatest"
)

// transactions counts the storage transactions (Batch calls) of the journal's client.
type transactions struct {
	storage.Client
	n atomic.Int64
}

func (c *transactions) Batch(ctx context.Context, ops ...*storage.Operation) error {
	c.n.Add(1)
	return c.Client.Batch(ctx, ops...)
}

// A call that hands on the held spans of k earlier calls (k journal records, one delivery each)
// removes the k records in one storage transaction, not one per record.
func TestDeliveryOfManyRecordsIsOneTransaction(t *testing.T) {
	for _, k := range []int{1, 2, 16} {
		t.Run(fmt.Sprint(k, " records"), func(t *testing.T) {
			ctx := context.Background()
			client := &transactions{Client: storagetest.NewInMemoryClient(component.KindProcessor,
				component.MustNewID("file_storage"), "held")}
			j, _, err := journal.Open(ctx, client, zap.NewNop())
			require.NoError(t, err)
			sink := new(consumertest.TracesSink)
			p, err := newSpanFilterProcessor(processortest.NewNopSettings(metadata.Type), createDefaultConfig().(*Config), sink, j)
			require.NoError(t, err)
			for i := range k { // k calls, each holding a child of agent: k records
				_, err = p.processTraces(ctx, batch(testSpan{name: fmt.Sprint("chat ", i), scope: scopeSDK, parent: "agent"}))
				require.ErrorIs(t, err, processorhelper.ErrSkipProcessingData)
			}
			require.EqualValues(t, k, p.mem.HeldSpans())

			before := client.n.Load()
			_, err = p.processTraces(ctx, batch(testSpan{name: "agent", scope: scopeSDK})) // releases all k
			require.NoError(t, err)
			assert.Equal(t, k, sink.SpanCount(), "the held spans (agent goes on in the call's own batch)")
			assert.EqualValues(t, 1, client.n.Load()-before, "transactions of the call")
			_, recs, err := journal.Open(ctx, client.Client, zap.NewNop())
			require.NoError(t, err)
			assert.Empty(t, recs, "every record removed")
		})
	}
}

// poisonConsumer panics on every call carrying a span of the trace poison; it takes the rest.
type poisonConsumer struct {
	consumertest.TracesSink
	poison pcommon.TraceID
	panics atomic.Int64
}

func (c *poisonConsumer) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	forEachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, s ptrace.Span) {
		if s.TraceID() == c.poison {
			c.panics.Add(1)
			panic("exporter bug")
		}
	})
	return c.TracesSink.ConsumeTraces(ctx, td)
}

func (*poisonConsumer) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

// A delivery the next consumer panics on every time (a bug in a later component) is retried a
// bounded number of times with a backoff, then given up: counted (spans_undeliverable{reason=
// panicked}) and logged. Meanwhile the deliveries queued behind it go on and their bytes leave
// the budget, so new data is still admitted.
func TestDeliveryThatAlwaysPanicsIsGivenUp(t *testing.T) {
	next := &poisonConsumer{poison: pcommon.TraceID{0xbd, 15: 1}}
	cfg := createDefaultConfig().(*Config)
	cfg.TraceIntegrity.MemoryLimitMiB = 1
	h := newHarness(t, cfg, next)
	wait := cfg.TraceIntegrity.WaitDuration
	h.consume(testSpan{name: "bad", scope: scopeSDK, parent: "never", trace: next.poison})
	h.advance(wait + time.Second) // released by rule 1: the first attempt panics
	require.EqualValues(t, 1, next.panics.Load())

	// Traces whose held spans fill the memory limit are released behind it.
	prompt := strings.Repeat("x", 200<<10)
	for i := range 8 {
		h.consume(testSpan{name: fmt.Sprint("chat ", i), scope: scopeSDK, parent: fmt.Sprint("agent ", i),
			trace: pcommon.TraceID{0xcc, 15: byte(i)}, attrs: map[string]any{"gen_ai.prompt": prompt}})
	}
	h.advance(wait + time.Second)
	assert.Equal(t, 8, next.SpanCount(), "the deliveries behind the panicking one went on")
	assert.Less(t, h.p.mem.ReadyBytes(), int64(1000), "only the panicking delivery is still ready")
	_, err := h.p.processTraces(context.Background(), batch(testSpan{name: "new", scope: scopeSDK}))
	require.NoError(t, err, "new data is admitted")

	for _, backoff := range []time.Duration{2 * time.Second, 4 * time.Second} { // retried after 1, 2, 4 s
		h.advance(backoff / 2)
		h.advance(backoff / 2)
	}
	assert.EqualValues(t, maxPanics, next.panics.Load(), "bounded attempts")
	h.advance(time.Minute)
	assert.EqualValues(t, maxPanics, next.panics.Load(), "given up: no further attempt")
	assert.Zero(t, h.p.mem.ReadyBytes())
	metadatatest.AssertEqualProcessorSvcspanfilterSpansUndeliverable(t, h.telemetry,
		[]metricdata.DataPoint[int64]{reasonPoint(undeliverablePanicked, 1)}, ignoreTime...)
	assert.Len(t, h.logs.FilterMessageSnippet("panicked on released spans; they will be retried").All(), maxPanics-1)
	assert.Len(t, h.logs.FilterMessageSnippet("Released spans were lost").All(), 1)
}

// poisonLogs panics on every call carrying a record of the trace poison; it takes the rest.
type poisonLogs struct {
	consumertest.LogsSink
	poison pcommon.TraceID
	panics atomic.Int64
}

func (c *poisonLogs) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				if lr.TraceID() == c.poison {
					c.panics.Add(1)
					panic("exporter bug")
				}
			}
		}
	}
	return c.LogsSink.ConsumeLogs(ctx, ld)
}

// Score records released by outcome sampling go on as released spans do: a delivery the next logs
// consumer panics on every time is retried after a backoff, then given up (logged), and the
// deliveries behind it go on. The panic never escapes: on the score releaser's goroutine it would
// crash the collector, and after a restart the journaled records would crash it again.
func TestScoreDeliveryThatAlwaysPanicsIsGivenUp(t *testing.T) {
	ctx := context.Background()
	poison, other := pcommon.TraceID{0xf3, 8: 0xff, 15: 1}, pcommon.TraceID{0xf3, 8: 0xff, 15: 2}
	h := newHarness(t, createDefaultConfig().(*Config))
	startWithOutcome(t, h, 0.0001, 64)
	next := &poisonLogs{poison: poison}
	lp := &logsProcessor{logger: h.p.logger, sink: func() contentSink { return h.p }, next: next,
		traces: func() *spanFilterProcessor { return h.p }}
	lp.once.Do(func() {}) // no releaser goroutine: the test runs its rounds
	releaserRound := func() { lp.deliverScores(ctx, h.p.outcome.TakeReadyScores(lp), false) }
	for _, tr := range []pcommon.TraceID{poison, other} { // held: their traces are undecided
		_, err := lp.processLogs(ctx, scoreRecords(tr))
		require.NoError(t, err)
	}
	h.consume(testSpan{name: "agent", scope: scopeSDK, trace: poison, failed: true},
		testSpan{name: "agent 2", scope: scopeSDK, trace: other, failed: true}) // both kept: released

	require.NotPanics(t, releaserRound)
	assert.EqualValues(t, 1, next.panics.Load())
	assert.Equal(t, 1, next.LogRecordCount(), "the other trace's score went on behind the panicking delivery")
	for _, backoff := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		h.clock.Advance(backoff / 2)
		require.NotPanics(t, releaserRound)
		h.clock.Advance(backoff / 2)
		require.NotPanics(t, releaserRound)
	}
	assert.EqualValues(t, maxPanics, next.panics.Load(), "bounded attempts")
	h.clock.Advance(time.Minute)
	releaserRound()
	assert.EqualValues(t, maxPanics, next.panics.Load(), "given up: no further attempt")
	assert.Zero(t, h.p.mem.ReadyBytes(), "the given-up records left the budget")
	assert.Len(t, h.logs.FilterMessageSnippet("panicked on released score records; they will be retried").All(), maxPanics-1)
	assert.Len(t, h.logs.FilterMessageSnippet("Released score records were lost").All(), 1)
}

// Released score records the next logs consumer refuses follow the rule of released spans: at
// shutdown without storage, what it still refuses is lost, logged, and shutdown says so; refused
// for good, they are lost at once and logged.
func TestScoreRecordsRefusedByTheNextConsumer(t *testing.T) {
	for _, tc := range []struct {
		name        string
		err         error
		shutdownErr string
		lost        string
	}{
		{name: "retryable, still refused at shutdown", err: errors.New("backend down"),
			shutdownErr: "1 score records released at shutdown could not be delivered",
			lost:        "Released score records were lost: the next consumer still refused them at shutdown"},
		{name: "permanent", err: consumererror.NewPermanent(errors.New("bad request")),
			lost: "Released score records were lost: the next consumer refused them permanently"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tr := pcommon.TraceID{0xf4, 8: 0xff, 15: 1}
			h := newHarness(t, createDefaultConfig().(*Config))
			startWithOutcome(t, h, 0.0001, 64)
			lp := &logsProcessor{logger: h.p.logger, sink: func() contentSink { return h.p },
				next: consumertest.NewErr(tc.err), traces: func() *spanFilterProcessor { return h.p }}
			_, err := lp.processLogs(ctx, scoreRecords(tr)) // held: its trace is undecided
			require.NoError(t, err)
			h.consume(testSpan{name: "agent", scope: scopeSDK, trace: tr, failed: true}) // kept: released

			err = lp.shutdown(ctx)
			if tc.shutdownErr != "" {
				require.ErrorContains(t, err, tc.shutdownErr)
			} else {
				require.NoError(t, err)
				assert.Zero(t, h.p.mem.ReadyBytes(), "given up: they left the budget")
			}
			assert.Len(t, h.logs.FilterMessageSnippet(tc.lost).All(), 1)
		})
	}
}
