package svcspanfilterprocessor

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap/zapcore"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadatatest"
)

func traceN(n byte) pcommon.TraceID { return pcommon.TraceID{0xdd, 15: n} }

func reasonPoint(reason string, v int64) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Attributes: attribute.NewSet(attribute.String("reason", reason)), Value: v}
}

func hexID(name string) string {
	id := idOf(name)
	return hex.EncodeToString(id[:])
}

func point(v int64) metricdata.DataPoint[int64] { return metricdata.DataPoint[int64]{Value: v} }

var ignoreTime = []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()}

func TestMetrics(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Drop.SpanNames = []string{"noise"}
	h := newHarness(t, cfg)
	h.consume(
		testSpan{name: "agent", scope: scopeSDK, parent: "GET /"},
		testSpan{name: "llm", scope: scopeOpenAI, parent: "http"},
		testSpan{name: "http", scope: scopeHTTPClient, parent: "agent"},
		testSpan{name: "tool", scope: scopeMyApp, parent: "agent", attrs: genAIAttrs},
		testSpan{name: "noise", scope: scopeSDK, parent: "agent"},
	)
	// agent waits for "GET /"; llm is re-parented to agent at once.
	metadatatest.AssertEqualProcessorSvcspanfilterSpansHeld(t, h.telemetry, []metricdata.DataPoint[int64]{point(1)}, ignoreTime...)
	metadatatest.AssertEqualProcessorSvcspanfilterTracesInMemory(t, h.telemetry, []metricdata.DataPoint[int64]{point(1)}, ignoreTime...)

	h.consume(testSpan{name: "GET /", scope: scopeHTTPServer})
	assert.Equal(t, map[string]string{"agent": "", "llm": "agent", "tool": "agent"}, h.tree())

	metadatatest.AssertEqualProcessorSvcspanfilterSpansKept(t, h.telemetry, []metricdata.DataPoint[int64]{
		reasonPoint("svc_sdk_scope", 1), reasonPoint("known_scope", 1), reasonPoint("gen_ai_attribute", 1),
	}, ignoreTime...)
	metadatatest.AssertEqualProcessorSvcspanfilterSpansDropped(t, h.telemetry, []metricdata.DataPoint[int64]{
		reasonPoint("not_genai", 2), reasonPoint("drop_rule", 1),
	}, ignoreTime...)
	metadatatest.AssertEqualProcessorSvcspanfilterSpansReparented(t, h.telemetry, []metricdata.DataPoint[int64]{
		reasonPoint("dropped_parent", 1), reasonPoint("no_kept_ancestor", 1),
	}, ignoreTime...)
	metadatatest.AssertEqualProcessorSvcspanfilterSpansReleased(t, h.telemetry, []metricdata.DataPoint[int64]{
		reasonPoint("parent_arrived", 1),
	}, ignoreTime...)
	metadatatest.AssertEqualProcessorSvcspanfilterSpansHeld(t, h.telemetry, []metricdata.DataPoint[int64]{point(0)}, ignoreTime...)
	metadatatest.AssertEqualProcessorSvcspanfilterHeldBytes(t, h.telemetry, []metricdata.DataPoint[int64]{point(0)}, ignoreTime...)

	// A dropped span that a delivered span points at arrives late: a connector.
	h.consume(testSpan{name: "chat", scope: scopeOpenAI, parent: "tool http"})
	h.advance(defaultWaitDuration)
	h.consume(testSpan{name: "tool http", scope: scopeHTTPClient, parent: "tool"})
	metadatatest.AssertEqualProcessorSvcspanfilterConnectorSpans(t, h.telemetry, []metricdata.DataPoint[int64]{point(1)}, ignoreTime...)
	assert.Equal(t, "tool http", h.tree()["chat"])
	assert.Equal(t, "tool", h.tree()["tool http"])
	h.shutdown()
}

// The configured memory budget is published, for alerts to compare the memory with.
func TestMemoryLimitMetric(t *testing.T) {
	for _, mib := range []int{256, 3} {
		t.Run(fmt.Sprint(mib), func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.TraceIntegrity.MemoryLimitMiB = mib
			h := newHarness(t, cfg)
			metadatatest.AssertEqualProcessorSvcspanfilterMemoryLimitBytes(t, h.telemetry,
				[]metricdata.DataPoint[int64]{point(int64(mib) << 20)}, ignoreTime...)
			h.shutdown()
		})
	}
}

// A trace that keeps receiving spans is not idle, but its waiting spans still go at max_wait_duration.
func TestMaxWaitReleasesBusyTrace(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.TraceIntegrity.WaitDuration = time.Second
	cfg.TraceIntegrity.MaxWaitDuration = 3 * time.Second
	h := newHarness(t, cfg)
	h.consume(testSpan{name: "orphan", scope: scopeSDK, parentID: idOf("elsewhere")})
	for i := range 5 {
		h.advance(700 * time.Millisecond) // busier than wait_duration
		h.consume(testSpan{name: "busy " + string(rune('a'+i)), scope: scopeHTTPClient})
		if i < 3 {
			require.NotContains(t, h.delivered(), "orphan", "released at %d while the trace is busy", i)
		}
	}
	h.advance(0)
	assert.Equal(t, map[string]string{"orphan": "<" + hexID("elsewhere") + ">"}, h.tree(), "rule 1: the parent id stays")
	metadatatest.AssertEqualProcessorSvcspanfilterSpansReleased(t, h.telemetry, []metricdata.DataPoint[int64]{
		reasonPoint("max_wait", 1),
	}, ignoreTime...)
	h.shutdown()
}

// A late child whose trace was forgotten waits again and, its parent never coming, goes on with its
// parent id (rule 1).
func TestRememberDurationBoundsTheMemory(t *testing.T) {
	h := newHarness(t, createDefaultConfig().(*Config))
	h.consume(testSpan{name: "agent", scope: scopeSDK}, testSpan{name: "http", scope: scopeHTTPClient, parent: "agent"})

	h.advance(defaultRememberDuration - time.Second)
	h.consume(testSpan{name: "remembered child", scope: scopeSDK, parent: "http"})
	assert.Equal(t, "agent", h.tree()["remembered child"], "resolved from the trace's memory")

	h.advance(defaultRememberDuration) // idle for the whole remember_duration: forgotten
	assert.Zero(t, h.p.mem.Traces())
	h.consume(testSpan{name: "forgotten child", scope: scopeSDK, parent: "http"})
	assert.NotContains(t, h.tree(), "forgotten child", "must wait: the trace's memory is gone")
	h.advance(defaultWaitDuration)
	assert.Equal(t, "<"+hexID("http")+">", h.tree()["forgotten child"])
	h.shutdown()
}

func TestMaxTracesEvictsIdleTracesFirstThenWaitingOnes(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.TraceIntegrity.MaxTraces = 2
	h := newHarness(t, cfg)
	waiting := func(n byte, name string) testSpan {
		return testSpan{name: name, scope: scopeSDK, trace: traceN(n), parentID: idOf("parent of " + name)}
	}
	h.consume(waiting(1, "waits 1"))
	h.clock.Advance(time.Millisecond)
	h.consume(testSpan{name: "idle root", scope: scopeSDK, trace: traceN(2)})
	h.clock.Advance(time.Millisecond)
	h.consume(waiting(3, "waits 3")) // over the bound: the idle trace 2 goes, nothing is released
	assert.Equal(t, map[string]string{"idle root": ""}, h.tree())
	assert.Empty(t, h.logs.FilterMessageSnippet("max_traces reached").All())
	metadatatest.AssertEqualProcessorSvcspanfilterTracesEvicted(t, h.telemetry, []metricdata.DataPoint[int64]{reasonPoint("max_traces", 1)}, ignoreTime...)

	h.clock.Advance(time.Millisecond)
	h.consume(waiting(4, "waits 4")) // every trace waits: the oldest (1) goes on by rule 1
	h.p.deliverReady(context.Background(), false)
	assert.Equal(t, map[string]string{"idle root": "", "waits 1": "<" + hexID("parent of waits 1") + ">"}, h.tree())
	metadatatest.AssertEqualProcessorSvcspanfilterTracesEvicted(t, h.telemetry, []metricdata.DataPoint[int64]{reasonPoint("max_traces", 2)}, ignoreTime...)
	metadatatest.AssertEqualProcessorSvcspanfilterSpansReleased(t, h.telemetry, []metricdata.DataPoint[int64]{
		reasonPoint("evicted", 1),
	}, ignoreTime...)
	warnings := h.logs.FilterMessageSnippet("max_traces reached").All()
	require.Len(t, warnings, 1)
	assert.Equal(t, zapcore.WarnLevel, warnings[0].Level)
	assert.Contains(t, warnings[0].Message, "trace-id-affine routing")

	h.consume(waiting(5, "waits 5")) // again within the log interval: counted, not logged again
	assert.Len(t, h.logs.FilterMessageSnippet("max_traces reached").All(), 1)
	metadatatest.AssertEqualProcessorSvcspanfilterTracesEvicted(t, h.telemetry, []metricdata.DataPoint[int64]{reasonPoint("max_traces", 3)}, ignoreTime...)
	h.shutdown()
}

// The byte budget: a small memory_limit_mib evicts waiting traces by rule 1 too.
// A held span counts by an estimate until the releaser's next tick sizes it exactly, or until its
// shard holds more than 64 spans not yet sized (the budget's documented lag).
func TestMemoryLimitEvicts(t *testing.T) {
	tests := []struct {
		name  string
		spans int
		size  int
		// trace of span i: the cap counts per shard, and the shard is chosen by the trace id's
		// last bytes.
		trace func(i int) pcommon.TraceID
		tick  bool // the releaser ticks after the spans came
	}{
		{name: "sized at the releaser's tick", spans: 40, size: 64 << 10, tick: true,
			trace: func(i int) pcommon.TraceID { return traceN(byte(i)) }},
		{name: "sized at once past 64 unsized spans in a shard", spans: 80, size: 16 << 10,
			trace: func(i int) pcommon.TraceID { return pcommon.TraceID{byte(i), 15: 1} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.TraceIntegrity.MemoryLimitMiB = 1
			h := newHarness(t, cfg)
			big := strings.Repeat("x", tt.size)
			for i := range tt.spans {
				h.clock.Advance(time.Millisecond)
				h.consume(testSpan{name: fmt.Sprint("waits ", i), scope: scopeSDK, trace: tt.trace(i), parentID: idOf(fmt.Sprint("p", i)),
					attrs: map[string]any{"gen_ai.prompt": big}})
			}
			if tt.tick {
				h.advance(0)
			}
			h.p.deliverReady(context.Background(), false)
			assert.LessOrEqual(t, h.p.mem.Bytes(), int64(1<<20))
			tree := h.tree()
			require.NotEmpty(t, tree)
			assert.Equal(t, "<"+hexID("p0")+">", tree["waits 0"], "the oldest went on first, by rule 1")
			assert.NotContains(t, tree, fmt.Sprint("waits ", tt.spans-1))
			h.shutdown()
			assert.Len(t, h.tree(), tt.spans, "nothing lost")
		})
	}
}

// Malformed parent links must not loop: a span that is its own ancestor becomes a root.
func TestParentCycles(t *testing.T) {
	h := newHarness(t, createDefaultConfig().(*Config))
	h.consume(
		testSpan{name: "self", scope: scopeSDK, parent: "self"},
		testSpan{name: "llm", scope: scopeSDK, parent: "d1"},
		testSpan{name: "d1", scope: scopeHTTPClient, parent: "d2"},
		testSpan{name: "d2", scope: scopeHTTPClient, parent: "d1"},
	)
	assert.Equal(t, map[string]string{"self": "", "llm": ""}, h.tree())
	h.shutdown()
}

// A batch sent again after an error must not make a waiting span wait (and arrive) twice.
func TestResentBatchHoldsSpanOnce(t *testing.T) {
	h := newHarness(t, createDefaultConfig().(*Config))
	child := testSpan{name: "child", scope: scopeSDK, parent: "agent"}
	h.consume(child)
	h.consume(child)
	assert.Equal(t, 1, int(h.p.mem.HeldSpans()))
	h.consume(testSpan{name: "agent", scope: scopeSDK})
	assert.Equal(t, map[string]string{"child": "agent", "agent": ""}, h.tree()) // tree() fails on a duplicate
	h.shutdown()
}

// A waiting span sent again together with its parent goes on with it; its waiting copy is dropped.
func TestResentSpanThatNowResolvesIsDeliveredOnce(t *testing.T) {
	h := newHarness(t, createDefaultConfig().(*Config))
	child := testSpan{name: "child", scope: scopeSDK, parent: "agent"}
	h.consume(child)
	h.consume(child, testSpan{name: "agent", scope: scopeSDK})
	assert.Zero(t, int(h.p.mem.HeldSpans()))
	h.shutdown()
	assert.Equal(t, map[string]string{"child": "agent", "agent": ""}, h.tree()) // tree() fails on a duplicate
}

// flakyConsumer refuses a number of calls with err, then accepts.
type flakyConsumer struct {
	consumertest.TracesSink
	mu      sync.Mutex
	refuse  int
	err     error
	refused int
}

func (c *flakyConsumer) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	c.mu.Lock()
	if c.refuse > 0 {
		c.refuse--
		c.refused++
		c.mu.Unlock()
		return c.err
	}
	c.mu.Unlock()
	return c.TracesSink.ConsumeTraces(ctx, td)
}

func (c *flakyConsumer) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func TestRefusedReleaseIsRetried(t *testing.T) {
	next := &flakyConsumer{err: errors.New("queue is full")}
	h := newHarness(t, createDefaultConfig().(*Config), next)
	h.consume(testSpan{name: "child", scope: scopeSDK, parent: "agent"})
	// The parent arrives: the child is released and delivered by the same call, refused, then
	// refused again by the releaser.
	next.refuse = 2
	_, err := h.p.processTraces(context.Background(), batch(testSpan{name: "agent", scope: scopeSDK}))
	require.NoError(t, err)

	h.p.deliverReady(context.Background(), false)
	assert.Equal(t, 2, next.refused)
	assert.Zero(t, next.SpanCount(), "nothing accepted yet")
	h.p.deliverReady(context.Background(), false)
	require.Equal(t, 1, next.SpanCount(), "delivered once, after the refusals")
	assert.Equal(t, "child", next.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Name())
	assert.Len(t, h.logs.FilterMessageSnippet("will be retried").All(), 2)
	require.NoError(t, h.proc.Shutdown(context.Background()))
}

func TestPermanentRefusalIsCountedAndLogged(t *testing.T) {
	next := &flakyConsumer{err: consumererror.NewPermanent(errors.New("bad data"))}
	h := newHarness(t, createDefaultConfig().(*Config), next)
	h.consume(testSpan{name: "child", scope: scopeSDK, parent: "agent"})
	next.refuse = 1
	require.NoError(t, h.proc.Shutdown(context.Background()))
	metadatatest.AssertEqualProcessorSvcspanfilterSpansUndeliverable(t, h.telemetry, []metricdata.DataPoint[int64]{reasonPoint("refused", 1)}, ignoreTime...)
	lost := h.logs.FilterMessageSnippet("Released spans were lost").All()
	require.Len(t, lost, 1)
	assert.Equal(t, zapcore.ErrorLevel, lost[0].Level)
}

func TestShutdownReportsSpansStillRefused(t *testing.T) {
	next := &flakyConsumer{err: errors.New("exporter down"), refuse: 100}
	h := newHarness(t, createDefaultConfig().(*Config), next)
	h.consume(testSpan{name: "child", scope: scopeSDK, parent: "agent"})
	err := h.proc.Shutdown(context.Background())
	require.ErrorContains(t, err, "1 spans released at shutdown could not be delivered")
	metadatatest.AssertEqualProcessorSvcspanfilterSpansUndeliverable(t, h.telemetry, []metricdata.DataPoint[int64]{reasonPoint("shutdown", 1)}, ignoreTime...)
}

// The synchronous part returns the next consumer's error to the caller, which owns the retry.
func TestSynchronousErrorGoesToTheCaller(t *testing.T) {
	next := &flakyConsumer{err: errors.New("queue is full"), refuse: 1}
	h := newHarness(t, createDefaultConfig().(*Config), next)
	err := h.proc.ConsumeTraces(context.Background(), batch(testSpan{name: "root", scope: scopeSDK}))
	require.ErrorContains(t, err, "queue is full")
	require.NoError(t, h.proc.ConsumeTraces(context.Background(), batch(testSpan{name: "root", scope: scopeSDK})))
	assert.Equal(t, 1, next.SpanCount(), "the resent root is delivered once")
	h.shutdown()
}

// Spans released later go on with the client metadata of the request they came in with.
func TestReleasedSpansKeepTheirRequestClientInfo(t *testing.T) {
	var gotTenants []string
	next, err := consumer.NewTraces(func(ctx context.Context, _ ptrace.Traces) error {
		gotTenants = append(gotTenants, client.FromContext(ctx).Metadata.Get("x-tenant")...)
		return nil
	})
	require.NoError(t, err)
	h := newHarness(t, createDefaultConfig().(*Config), next)

	tenant := func(name string) context.Context {
		return client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{"x-tenant": {name}})})
	}
	_, err = h.p.processTraces(tenant("a"), batch(testSpan{name: "child", scope: scopeSDK, parent: "agent"}))
	require.ErrorIs(t, err, processorhelper.ErrSkipProcessingData, "nothing to pass on: the child waits")
	_, err = h.p.processTraces(tenant("b"), batch(testSpan{name: "agent", scope: scopeSDK}))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, gotTenants, "the child goes, within b's call, with its own request's metadata")
	h.shutdown()
}

// With the releaser running, a span whose parent never comes is delivered after wait_duration.
func TestReleaserGoroutineDeliversAfterWait(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.TraceIntegrity.WaitDuration = 20 * time.Millisecond
	sink := new(consumertest.TracesSink)
	proc, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, proc.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, proc.ConsumeTraces(context.Background(), batch(testSpan{name: "orphan", scope: scopeSDK, parentID: idOf("remote")})))
	require.Eventually(t, func() bool { return sink.SpanCount() == 1 }, 5*time.Second, 5*time.Millisecond)
	span := sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, idOf("remote"), span.ParentSpanID(), "rule 1: the unknown parent stays")
	require.NoError(t, proc.Shutdown(context.Background()))
}
