package svcspanfilterprocessor

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/svc/svc-collector/pkg/golden"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadatatest"
)

// defaultTraceID is the trace of test spans that do not name one; it is sampled in at every rate.
var defaultTraceID = pcommon.TraceID{0xaa, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}

// testSpan describes a span of a test batch. Span and parent ids are derived from names, so a test
// reads as a tree of names.
type testSpan struct {
	name   string
	scope  string
	parent string // name of the parent span; "" for a root
	// parentID overrides parent with a raw id (a parent in another service).
	parentID pcommon.SpanID
	attrs    map[string]any
	trace    pcommon.TraceID
	failed   bool // status ERROR
}

func idOf(name string) pcommon.SpanID {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], h.Sum64())
	return id
}

// batch builds one OTLP batch: one resource, one ScopeSpans per scope in order of first use.
func batch(spans ...testSpan) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "support-agent")
	scopes := map[string]ptrace.ScopeSpans{}
	for i, s := range spans {
		ss, ok := scopes[s.scope]
		if !ok {
			ss = rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(s.scope)
			ss.Scope().SetVersion("1.0.0")
			scopes[s.scope] = ss
		}
		span := ss.Spans().AppendEmpty()
		span.SetName(s.name)
		trace := s.trace
		if trace.IsEmpty() {
			trace = defaultTraceID
		}
		span.SetTraceID(trace)
		span.SetSpanID(idOf(s.name))
		switch {
		case !s.parentID.IsEmpty():
			span.SetParentSpanID(s.parentID)
		case s.parent != "":
			span.SetParentSpanID(idOf(s.parent))
		}
		start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Millisecond)))
		span.SetKind(ptrace.SpanKindInternal)
		if s.failed {
			span.Status().SetCode(ptrace.StatusCodeError)
		}
		// In name order, so that the golden files do not depend on map iteration.
		for _, k := range slices.Sorted(maps.Keys(s.attrs)) {
			if err := span.Attributes().PutEmpty(k).FromRaw(s.attrs[k]); err != nil {
				panic(err)
			}
		}
	}
	return td
}

// fakeClock is the processor's clock in tests, so waits end when the test says so.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// harness runs the processor without its releaser goroutine: the test drives time and deliveries.
type harness struct {
	t         *testing.T
	p         *spanFilterProcessor
	proc      processor.Traces
	sink      *consumertest.TracesSink
	clock     *fakeClock
	telemetry *componenttest.Telemetry
	logs      *observer.ObservedLogs
	inputs    []ptrace.Traces
}

func newHarness(t *testing.T, cfg *Config, next ...consumer.Traces) *harness {
	t.Helper()
	require.NoError(t, cfg.Validate())
	h := &harness{t: t, sink: new(consumertest.TracesSink), clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}}
	var nextConsumer consumer.Traces = h.sink
	if len(next) > 0 {
		nextConsumer = next[0]
	}
	h.telemetry = componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, h.telemetry.Shutdown(context.Background())) })
	set := metadatatest.NewSettings(h.telemetry)
	core, logs := observer.New(zap.DebugLevel)
	set.Logger = zap.New(core)
	h.logs = logs

	p, err := newSpanFilterProcessor(set, cfg, nextConsumer, journal.Nop)
	require.NoError(t, err)
	p.now = h.clock.Now
	p.running.Store(true) // started, without the releaser goroutine
	proc, err := processorhelper.NewTraces(context.Background(), set, cfg, nextConsumer, p.processTraces,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithShutdown(p.shutdown))
	require.NoError(t, err)
	h.p, h.proc = p, proc
	return h
}

// consume sends one batch and lets the releaser deliver what the batch released.
func (h *harness) consume(spans ...testSpan) {
	h.t.Helper()
	td := batch(spans...)
	h.inputs = append(h.inputs, cloneTraces(td))
	require.NoError(h.t, h.proc.ConsumeTraces(context.Background(), td))
	h.p.deliverReady(context.Background(), false)
}

// advance moves the clock and runs one round of the releaser.
func (h *harness) advance(d time.Duration) {
	h.clock.Advance(d)
	h.p.mem.Expire()
	h.p.deliverReady(context.Background(), false)
}

func (h *harness) shutdown() {
	h.t.Helper()
	require.NoError(h.t, h.proc.Shutdown(context.Background()))
}

// delivered is every span that reached the next consumer, by name.
func (h *harness) delivered() map[string]ptrace.Span {
	out := map[string]ptrace.Span{}
	for _, td := range h.sink.AllTraces() {
		forEachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, s ptrace.Span) {
			_, dup := out[s.Name()]
			require.False(h.t, dup, "span %q was delivered twice", s.Name())
			out[s.Name()] = s
		})
	}
	return out
}

// tree maps each delivered span's name to its parent's name: "" for a root, "<id>" when the parent
// is not a delivered span (what the platform would show as an orphan).
func (h *harness) tree() map[string]string {
	spans := h.delivered()
	byID := map[pcommon.SpanID]string{}
	for name, s := range spans {
		byID[s.SpanID()] = name
	}
	out := map[string]string{}
	for name, s := range spans {
		switch parent := s.ParentSpanID(); {
		case parent.IsEmpty():
			out[name] = ""
		case byID[parent] != "":
			out[name] = byID[parent]
		default:
			out[name] = "<" + hex.EncodeToString(parent[:]) + ">"
		}
	}
	return out
}

func forEachSpan(td ptrace.Traces, f func(ptrace.ResourceSpans, ptrace.ScopeSpans, ptrace.Span)) {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			for k := 0; k < ss.Spans().Len(); k++ {
				f(rs, ss, ss.Spans().At(k))
			}
		}
	}
}

func cloneTraces(td ptrace.Traces) ptrace.Traces {
	c := ptrace.NewTraces()
	td.CopyTo(c)
	return c
}

// canonical merges deliveries into one Traces, grouped by resource and scope and sorted by span
// name, so that the golden file does not depend on how the processor split its deliveries.
func canonical(tds []ptrace.Traces) ptrace.Traces {
	type group struct {
		key   string
		rs    ptrace.ResourceSpans
		ss    ptrace.ScopeSpans
		spans []ptrace.Span
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, td := range tds {
		forEachSpan(td, func(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, s ptrace.Span) {
			resJSON, _ := json.Marshal(rs.Resource().Attributes().AsRaw())
			key := string(resJSON) + "|" + rs.SchemaUrl() + "|" + ss.Scope().Name() + "|" + ss.Scope().Version()
			g, ok := byKey[key]
			if !ok {
				g = &group{key: key, rs: rs, ss: ss}
				byKey[key] = g
				groups = append(groups, g)
			}
			g.spans = append(g.spans, s)
		})
	}
	slices.SortFunc(groups, func(a, b *group) int { return strings.Compare(a.key, b.key) })
	out := ptrace.NewTraces()
	for _, g := range groups {
		rs := out.ResourceSpans().AppendEmpty()
		g.rs.Resource().CopyTo(rs.Resource())
		rs.SetSchemaUrl(g.rs.SchemaUrl())
		ss := rs.ScopeSpans().AppendEmpty()
		g.ss.Scope().CopyTo(ss.Scope())
		ss.SetSchemaUrl(g.ss.SchemaUrl())
		slices.SortFunc(g.spans, func(a, b ptrace.Span) int {
			if c := strings.Compare(a.TraceID().String(), b.TraceID().String()); c != 0 {
				return c
			}
			return strings.Compare(a.Name(), b.Name())
		})
		for _, s := range g.spans {
			s.CopyTo(ss.Spans().AppendEmpty())
		}
	}
	return out
}

// assertGolden compares td with testdata/golden/<name>; with -update it writes the file instead.
func assertGolden(t *testing.T, name string, td ptrace.Traces) {
	t.Helper()
	golden.CheckTraces(t, filepath.Join("testdata", "golden", name), td)
}

// deliverReady runs the releaser's delivery once: what the memory queued (released by time, or
// refused before).
func (p *spanFilterProcessor) deliverReady(ctx context.Context, tryAll bool) {
	p.deliver(ctx, p.mem.TakeReady(), tryAll)
}
