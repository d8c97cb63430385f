package benchmarks

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/svc/svc-collector/svcspanfilterprocessor"
)

// Benchmarks of the span filter's trace memory (issues 10 and 16.3). They use only the processor's
// public factory, so the same file runs against an older commit of the processor for a side-by-side
// comparison in the same run.

func newSpanFilterWith(b testing.TB, next consumer.Traces) processor.Traces {
	factory := svcspanfilterprocessor.NewFactory()
	proc, err := factory.CreateTraces(context.Background(), processortest.NewNopSettings(factory.Type()),
		factory.CreateDefaultConfig(), next)
	if err != nil {
		b.Fatal(err)
	}
	return proc
}

// splitChildrenFirst splits each agent trace of src as SDKs export it: the spans that end first
// (everything but the agent span and the HTTP root) in one request, the two parents in the next.
func splitChildrenFirst(src ptrace.Traces) (children, parents ptrace.Traces) {
	children, parents = ptrace.NewTraces(), ptrace.NewTraces()
	src.CopyTo(children)
	src.CopyTo(parents)
	isParent := func(s ptrace.Span) bool { return s.Name() == "agent run" || s.Name() == "POST /support" }
	children.ResourceSpans().At(0).ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
		ss.Spans().RemoveIf(isParent)
		return ss.Spans().Len() == 0
	})
	parents.ResourceSpans().At(0).ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
		ss.Spans().RemoveIf(func(s ptrace.Span) bool { return !isParent(s) })
		return ss.Spans().Len() == 0
	})
	return children, parents
}

// cpuTime is the process's user+system CPU time: the processors deliver from their own goroutines
// too, so wall time per span alone would hide work done on another core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// deliveredSpans is a next consumer that counts the spans handed on to it, so that a benchmark can
// wait, inside its measured window, until every kept span has been delivered. Without the wait the
// figure leaves out the work of a processor that delivers released spans from its own goroutine
// (the processor before the trace memory did: its releaser ran while the timer was stopped, after
// the window's last ConsumeTraces returned) and counts all of the work of one that delivers them in
// ConsumeTraces (the trace memory does). Still outside the window on both sides: what a background
// goroutine does after the last span reached the sink, and periodic work (the releaser's tick)
// that falls while the timer is stopped; both are small here.
type deliveredSpans struct {
	mu      sync.Mutex
	n       int
	target  int
	reached chan struct{}
}

func (d *deliveredSpans) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	d.mu.Lock()
	d.n += td.SpanCount()
	if d.reached != nil && d.n >= d.target {
		close(d.reached)
		d.reached = nil
	}
	d.mu.Unlock()
	return nil
}

func (*deliveredSpans) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (d *deliveredSpans) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// waitFor blocks (using no CPU) until target spans in all have been delivered.
func (d *deliveredSpans) waitFor(b testing.TB, target int) {
	d.mu.Lock()
	if d.n >= target {
		d.mu.Unlock()
		return
	}
	reached := make(chan struct{})
	d.reached, d.target = reached, target
	d.mu.Unlock()
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		b.Fatalf("only %d of %d kept spans were delivered within 30 s", d.count(), target)
	}
}

// keptPerRound is how many spans of src the span filter's default config keeps, delivered whole
// through a processor of its own (the trace memory's bounds, which the benchmarks vary, do not
// change which spans are kept).
func keptPerRound(b testing.TB, src ptrace.Traces) int {
	sink := &deliveredSpans{}
	proc := newSpanFilterWith(b, sink)
	if err := proc.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = proc.Shutdown(context.Background()) }()
	if err := proc.ConsumeTraces(context.Background(), withFreshTraceIDs(src, 1<<40)); err != nil {
		b.Fatal(err)
	}
	// A complete trace in one request goes on in that very call, in both processors; the wait
	// covers one that would deliver it from another goroutine.
	deadline := time.Now().Add(10 * time.Second)
	for last, stable := -1, 0; stable < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the count of kept spans did not settle within 10 s (%d)", sink.count())
		}
		if n := sink.count(); n == last && n > 0 {
			stable++
		} else {
			last, stable = n, 0
		}
	}
	return sink.count()
}

// BenchmarkSpanFilterChildrenFirst: CPU per span when every trace comes in two requests, children
// first, so kept spans are held until their parents arrive in the next request.
func BenchmarkSpanFilterChildrenFirst(b *testing.B) {
	b.Run("defaults", func(b *testing.B) { benchSpanFilter(b, heldPath{childrenFirst: true}) })
	// The same trace memory size on both sides: the GC's work grows with what is remembered, and
	// the defaults differ (10,000 traces before, 200,000 and 256 MiB now).
	b.Run("max_traces=10000", func(b *testing.B) { benchSpanFilter(b, heldPath{childrenFirst: true, maxTraces: 10_000}) })
}

// BenchmarkSpanFilterOnDisk: CPU per span with the trace memory journaled on contrib's file_storage
// (bbolt on a temporary directory, as `storage:` in the shipped config) and without, whole traces
// and children first. A call of whole traces journals only the ids of its dropped spans; a call of
// children journals the spans it may hold too.
func BenchmarkSpanFilterOnDisk(b *testing.B) {
	for _, childrenFirst := range []bool{false, true} {
		for _, onDisk := range []bool{false, true} {
			name := map[bool]string{false: "whole_traces", true: "children_first"}[childrenFirst] +
				map[bool]string{false: "/memory", true: "/file_storage"}[onDisk]
			b.Run(name, func(b *testing.B) { benchSpanFilter(b, heldPath{childrenFirst: childrenFirst, onDisk: onDisk}) })
		}
	}
}

// heldPath is how benchSpanFilter sends its traces and configures the processor.
type heldPath struct {
	childrenFirst bool // each trace in two requests, children first; else whole in one
	maxTraces     int  // trace_integrity.max_traces (0: the default)
	onDisk        bool // the trace memory journaled on a file_storage extension
}

func benchSpanFilter(b *testing.B, how heldPath) {
	factory := svcspanfilterprocessor.NewFactory()
	cfg := factory.CreateDefaultConfig().(*svcspanfilterprocessor.Config)
	if how.maxTraces > 0 {
		cfg.TraceIntegrity.MaxTraces = how.maxTraces
	}
	host := component.Host(componenttest.NewNopHost())
	if how.onDisk {
		storageHost, id := fileStorageHost(b)
		cfg.Storage, host = &id, storageHost
	}
	src := realisticBatch(benchTraces)
	spansPerRound := src.SpanCount()
	kept := keptPerRound(b, src)
	sink := &deliveredSpans{}
	proc, err := factory.CreateTraces(context.Background(), processortest.NewNopSettings(factory.Type()), cfg, sink)
	if err != nil {
		b.Fatal(err)
	}
	if err := proc.Start(context.Background(), host); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = proc.Shutdown(context.Background()) }()
	const chunk = 16
	round := uint64(0)
	var cpu time.Duration
	b.ResetTimer()
	b.StopTimer()
	for done := 0; done < b.N; {
		n := min(chunk, b.N-done)
		var batches []ptrace.Traces
		for range n {
			round++
			td := withFreshTraceIDs(src, round)
			if !how.childrenFirst {
				batches = append(batches, td)
				continue
			}
			c, p := splitChildrenFirst(td)
			batches = append(batches, c, p)
		}
		runtime.GC()
		c0 := cpuTime()
		b.StartTimer()
		for _, td := range batches {
			if err := proc.ConsumeTraces(context.Background(), td); err != nil {
				b.Fatal(err)
			}
		}
		// Every kept span of these rounds has reached the next consumer: the work of holding and
		// releasing them is in the window, whichever goroutine did it.
		sink.waitFor(b, kept*(done+n))
		b.StopTimer()
		cpu += cpuTime() - c0
		done += n
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(float64(b.N)*float64(spansPerRound)), "ns/span")
	b.ReportMetric(float64(cpu.Nanoseconds())/(float64(b.N)*float64(spansPerRound)), "cpu-ns/span")
}

// fileStorageHost is a host with contrib's file_storage extension started on a temporary
// directory, and the extension's id.
func fileStorageHost(b *testing.B) (component.Host, component.ID) {
	factory := filestorage.NewFactory()
	cfg := factory.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = b.TempDir()
	id := component.NewIDWithName(factory.Type(), "journal")
	ext, err := factory.Create(context.Background(), extensiontest.NewNopSettings(factory.Type()), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ext.Shutdown(context.Background()) })
	return storagetest.NewStorageHost().WithExtension(id, ext), id
}

// oneTraceBatch is `n` kept spans of one trace, all children of the span `parent`.
func oneTraceBatch(traceID pcommon.TraceID, from, n int, parent pcommon.SpanID) ptrace.Traces {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	ss.Scope().SetName("svc-sdk")
	for i := from; i < from+n; i++ {
		s := ss.Spans().AppendEmpty()
		s.SetName("chat")
		s.SetTraceID(traceID)
		var id pcommon.SpanID
		binary.BigEndian.PutUint64(id[:], uint64(i+1))
		s.SetSpanID(id)
		s.SetParentSpanID(parent)
		s.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
	}
	return td
}

// BenchmarkTraceWith5000HeldSpans: one trace whose 5,000 kept spans arrive in 10 requests of 500,
// all waiting for one parent, which then arrives. ns/span covers holding and releasing.
func BenchmarkTraceWith5000HeldSpans(b *testing.B) {
	const held, per = 5000, 500
	parent := pcommon.SpanID{0xff, 7: 1}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		proc := newSpanFilterWith(b, consumertest.NewNop())
		traceID := pcommon.TraceID{0xbe, 8: byte(i), 15: 1}
		var batches []ptrace.Traces
		for from := 0; from < held; from += per {
			batches = append(batches, oneTraceBatch(traceID, from, per, parent))
		}
		root := oneTraceBatch(traceID, held, 1, pcommon.SpanID{})
		root.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetSpanID(parent)
		batches = append(batches, root)
		b.StartTimer()
		for _, td := range batches {
			if err := proc.ConsumeTraces(context.Background(), td); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		_ = proc.Shutdown(context.Background())
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(held+1)), "ns/span")
}

// BenchmarkDeliverManyRecords: one call whose parent span releases the held spans of k earlier
// calls (k journal records on contrib's file_storage with its defaults, as shipped). ns/op is that
// call alone: it hands the k spans on and removes their records.
func BenchmarkDeliverManyRecords(b *testing.B) {
	for _, k := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("records=%d", k), func(b *testing.B) {
			factory := svcspanfilterprocessor.NewFactory()
			cfg := factory.CreateDefaultConfig().(*svcspanfilterprocessor.Config)
			host, id := fileStorageHost(b)
			cfg.Storage = &id
			proc, err := factory.CreateTraces(context.Background(), processortest.NewNopSettings(factory.Type()), cfg, consumertest.NewNop())
			if err != nil {
				b.Fatal(err)
			}
			if err := proc.Start(context.Background(), host); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = proc.Shutdown(context.Background()) }()
			parent := pcommon.SpanID{0xff, 7: 1}
			consume := func(td ptrace.Traces) {
				if err := proc.ConsumeTraces(context.Background(), td); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				traceID := pcommon.TraceID{0xde, 15: 1}
				binary.BigEndian.PutUint64(traceID[4:12], uint64(i))
				for j := range k {
					consume(oneTraceBatch(traceID, j, 1, parent))
				}
				root := oneTraceBatch(traceID, k, 1, pcommon.SpanID{})
				root.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetSpanID(parent)
				b.StartTimer()
				consume(root)
			}
		})
	}
}

// BenchmarkConcurrentConsume16: 16 goroutines call ConsumeTraces on one instance, traces split
// children first, as receivers do under load.
func BenchmarkConcurrentConsume16(b *testing.B) { benchConcurrentConsume16(b, false) }

// BenchmarkConcurrentConsume16OnDisk: the same, journaled on contrib's file_storage: calls that
// write while another call's transaction runs share the next one.
func BenchmarkConcurrentConsume16OnDisk(b *testing.B) { benchConcurrentConsume16(b, true) }

func benchConcurrentConsume16(b *testing.B, onDisk bool) {
	src := realisticBatch(4)
	spans := src.SpanCount()
	kept := keptPerRound(b, src)
	sink := &deliveredSpans{}
	factory := svcspanfilterprocessor.NewFactory()
	cfg := factory.CreateDefaultConfig().(*svcspanfilterprocessor.Config)
	host := component.Host(componenttest.NewNopHost())
	if onDisk {
		storageHost, id := fileStorageHost(b)
		cfg.Storage, host = &id, storageHost
	}
	proc, err := factory.CreateTraces(context.Background(), processortest.NewNopSettings(factory.Type()), cfg, sink)
	if err != nil {
		b.Fatal(err)
	}
	if err := proc.Start(context.Background(), host); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = proc.Shutdown(context.Background()) }()
	var round atomic.Uint64
	// Prepared outside the timer: b.N pairs spread over 16 goroutines.
	pairs := make([][2]ptrace.Traces, b.N)
	for i := range pairs {
		c, p := splitChildrenFirst(withFreshTraceIDs(src, round.Add(1)))
		pairs[i] = [2]ptrace.Traces{c, p}
	}
	runtime.GC()
	var next atomic.Int64
	var wg sync.WaitGroup
	c0 := cpuTime()
	b.ResetTimer()
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				for _, td := range pairs[i] {
					if err := proc.ConsumeTraces(context.Background(), td); err != nil {
						b.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	sink.waitFor(b, kept*b.N) // as in benchSpanFilter
	b.StopTimer()
	cpu := cpuTime() - c0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(float64(b.N)*float64(spans)), "ns/span")
	b.ReportMetric(float64(cpu.Nanoseconds())/(float64(b.N)*float64(spans)), "cpu-ns/span")
}

// slowNext takes 200µs per call and refuses every third call with a retryable error, as an exporter
// whose queue is full does.
type slowNext struct{ calls atomic.Int64 }

func (c *slowNext) ConsumeTraces(context.Context, ptrace.Traces) error {
	time.Sleep(200 * time.Microsecond)
	if c.calls.Add(1)%3 == 0 {
		return errors.New("sending queue is full")
	}
	return nil
}

func (*slowNext) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

// BenchmarkSlowNextConsumer: traces split children first in front of a slow, sometimes refusing
// next consumer. ns/span is the time ConsumeTraces takes (refused calls are the client's retry);
// heap-MB is the heap in use at the end (nothing may grow without bound).
func BenchmarkSlowNextConsumer(b *testing.B) {
	proc := newSpanFilterWith(b, &slowNext{})
	if err := proc.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = proc.Shutdown(context.Background()) }()
	src := realisticBatch(4)
	spans := src.SpanCount()
	refused := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c, p := splitChildrenFirst(withFreshTraceIDs(src, uint64(i+1)))
		b.StartTimer()
		for _, td := range []ptrace.Traces{c, p} {
			if proc.ConsumeTraces(context.Background(), td) != nil {
				refused++
			}
		}
	}
	b.StopTimer()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(float64(b.N)*float64(spans)), "ns/span")
	b.ReportMetric(float64(refused)/float64(2*b.N), "refused/call")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
}

// openTraceBatch is the beginning of `traces` long-running agent runs: per trace, 4 LLM calls and 4
// tools (kept) and their HTTP/DB spans (dropped) have ended; the agent span and the HTTP root have
// not, so the kept spans wait for them.
func openTraceBatch(traces, offset int) ptrace.Traces {
	src := realisticBatch(traces)
	c, _ := splitChildrenFirst(src)
	rss := c.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				id := spans.At(k).TraceID()
				binary.BigEndian.PutUint32(id[:4], uint32(offset+1))
				spans.At(k).SetTraceID(id)
			}
		}
	}
	return c
}

// BenchmarkOpenLongRunningTraces: peak heap with 1k, 10k and 50k concurrently open agent runs
// (children arrived, parents not yet) under the default limits. heap-MB is HeapInuse after GC
// minus before; alloc-MB the total allocated while admitting them.
func BenchmarkOpenLongRunningTraces(b *testing.B) {
	for _, open := range []int{1_000, 10_000, 50_000} {
		b.Run(fmt.Sprint(open), func(b *testing.B) {
			const perBatch = 50
			batches := make([]ptrace.Traces, 0, open/perBatch)
			for i := 0; i < open; i += perBatch {
				batches = append(batches, openTraceBatch(perBatch, i))
			}
			var heap, alloc float64
			pushedBack := 0
			for range b.N {
				proc := newSpanFilterWith(b, consumertest.NewNop())
				// Started: what the limits evict is delivered by the releaser, as in a gateway.
				if err := proc.Start(context.Background(), componenttest.NewNopHost()); err != nil {
					b.Fatal(err)
				}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for _, td := range batches {
					for {
						c := ptrace.NewTraces()
						td.CopyTo(c)
						err := proc.ConsumeTraces(context.Background(), c)
						if err == nil {
							break
						}
						pushedBack++ // a client would retry
						time.Sleep(10 * time.Millisecond)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap += float64(after.HeapInuse) - float64(before.HeapInuse)
				alloc += float64(after.TotalAlloc - before.TotalAlloc)
				runtime.KeepAlive(proc)
				_ = proc.Shutdown(context.Background())
			}
			b.ReportMetric(heap/float64(b.N)/(1<<20), "heap-MB")
			b.ReportMetric(alloc/float64(b.N)/(1<<20), "alloc-MB")
			b.ReportMetric(float64(pushedBack)/float64(b.N), "pushed-back")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkRememberedTraces: the heap the processor keeps per trace it remembers after its held
// spans went on (10,000 agent runs sent children first, then their parents; max_traces 10,000 on
// both sides). The garbage collector marks this memory in every cycle: CPU per span grows with it.
func BenchmarkRememberedTraces(b *testing.B) {
	const traces, perBatch = 10_000, 20
	factory := svcspanfilterprocessor.NewFactory()
	cfg := factory.CreateDefaultConfig().(*svcspanfilterprocessor.Config)
	cfg.TraceIntegrity.MaxTraces = traces
	src := realisticBatch(perBatch)
	var batches []ptrace.Traces
	for i := range traces / perBatch {
		c, p := splitChildrenFirst(withFreshTraceIDs(src, uint64(i+1)))
		batches = append(batches, c, p)
	}
	var heap float64
	for range b.N {
		proc, err := factory.CreateTraces(context.Background(), processortest.NewNopSettings(factory.Type()), cfg, consumertest.NewNop())
		if err != nil {
			b.Fatal(err)
		}
		if err := proc.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, td := range batches {
			c := ptrace.NewTraces()
			td.CopyTo(c)
			if err := proc.ConsumeTraces(context.Background(), c); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap += float64(after.HeapInuse) - float64(before.HeapInuse)
		runtime.KeepAlive(proc)
		_ = proc.Shutdown(context.Background())
	}
	b.ReportMetric(heap/float64(b.N)/traces, "heap-B/trace")
	b.ReportMetric(0, "ns/op")
}
