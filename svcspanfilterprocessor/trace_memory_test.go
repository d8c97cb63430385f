package svcspanfilterprocessor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadatatest"
)

// Issue 10: agent runs whose parents end long after their children arrive as one tree. The HTTP
// root is dropped, invoke_agent and the chats are kept, the tool's HTTP span is dropped.
func TestAgentRunWithLateParents(t *testing.T) {
	for _, late := range []time.Duration{20 * time.Second, 5 * time.Minute, 30 * time.Minute} {
		t.Run(late.String(), func(t *testing.T) {
			h := newHarness(t, createDefaultConfig().(*Config))
			h.consume(testSpan{name: "chat", scope: scopeOpenAI, parent: "invoke_agent", attrs: genAIAttrs})
			h.consume(testSpan{name: "chat after tool", scope: scopeOpenAI, parent: "GET /tool", attrs: genAIAttrs})
			// The agent keeps working: an LLM call a minute until its span ends.
			for elapsed := time.Duration(0); elapsed < late; elapsed += time.Minute {
				step := min(time.Minute, late-elapsed)
				for s := time.Duration(0); s < step; s += time.Second {
					h.advance(time.Second)
				}
				h.consume(testSpan{name: fmt.Sprint("step ", elapsed), scope: scopeOpenAI, parent: "invoke_agent", attrs: genAIAttrs})
			}
			h.consume(testSpan{name: "GET /tool", scope: scopeHTTPClient, parent: "invoke_agent"})
			h.consume(testSpan{name: "invoke_agent", scope: scopeSDK, parent: "POST /run", attrs: map[string]any{"gen_ai.operation.name": "invoke_agent"}})
			h.consume(testSpan{name: "POST /run", scope: scopeHTTPServer})
			h.shutdown()

			tree := h.tree()
			assert.Equal(t, "", tree["invoke_agent"], "the topmost kept span is the root (trace IO)")
			assert.Equal(t, "invoke_agent", tree["chat"])
			assert.Equal(t, "GET /tool", tree["chat after tool"], "below the connector of the late tool span")
			assert.Equal(t, "invoke_agent", tree["GET /tool"])
			for name, parent := range tree {
				assert.False(t, strings.HasPrefix(parent, "<"), "%q dangles", name)
			}
		})
	}
}

// slowConsumer refuses (retryably) while slow is set.
type slowConsumer struct {
	consumertest.TracesSink
	mu   sync.Mutex
	slow bool
}

func (c *slowConsumer) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	c.mu.Lock()
	slow := c.slow
	c.mu.Unlock()
	if slow {
		return errors.New("exporter queue is full")
	}
	return c.TracesSink.ConsumeTraces(ctx, td)
}

func (c *slowConsumer) setSlow(v bool) { c.mu.Lock(); c.slow = v; c.mu.Unlock() }

// Issue 16.3: a slow next consumer makes the processor push back with a retryable error once the
// spans it refused fill the memory limit; nothing accepted is lost.
func TestPushBackWhenNextConsumerIsSlow(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.TraceIntegrity.MemoryLimitMiB = 1
	next := &slowConsumer{}
	h := newHarness(t, cfg, next)
	big := strings.Repeat("x", 32<<10)
	accepted := map[string]bool{}
	var pushedBack error
	for i := range 100 {
		child := testSpan{name: fmt.Sprint("child ", i), scope: scopeSDK, parent: fmt.Sprint("agent ", i), trace: traceN(byte(i)), attrs: map[string]any{"gen_ai.prompt": big}}
		if i == 0 {
			next.setSlow(true)
		}
		if err := h.proc.ConsumeTraces(context.Background(), batch(child)); err != nil {
			pushedBack = err
			break
		}
		accepted[child.name] = true
		// The releaser ticks between the requests: it sizes the held child exactly (until then it
		// counts by an estimate).
		h.advance(0)
		parent := testSpan{name: fmt.Sprint("agent ", i), scope: scopeSDK, trace: traceN(byte(i))}
		// The parent itself is refused by the slow consumer; the child it releases waits ready.
		_ = h.proc.ConsumeTraces(context.Background(), batch(parent))
	}
	require.Error(t, pushedBack, "the processor must push back")
	assert.False(t, consumererror.IsPermanent(pushedBack), "push back is retryable")
	// The parent batch before it was pushed back too (its client retries it).
	metadatatest.AssertEqualProcessorSvcspanfilterSpansRefused(t, h.telemetry, []metricdata.DataPoint[int64]{point(2)}, ignoreTime...)

	next.setSlow(false)
	h.p.deliverReady(context.Background(), false)
	h.shutdown()
	delivered := map[string]bool{}
	for _, td := range next.AllTraces() {
		forEachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, s ptrace.Span) { delivered[s.Name()] = true })
	}
	for name := range accepted {
		assert.Contains(t, delivered, name, "accepted and lost")
	}
}

// fakeJournal is an in-memory journal.
type fakeJournal struct {
	mu      sync.Mutex
	next    uint64
	live    map[uint64]journal.Record
	appends int
	fail    bool
}

func (j *fakeJournal) Append(_ context.Context, kind journal.Kind, heldAt time.Time, md map[string][]string, payload []byte) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fail {
		return 0, errors.New("disk full")
	}
	if j.live == nil {
		j.live = map[uint64]journal.Record{}
	}
	j.next++
	j.appends++
	j.live[j.next] = journal.Record{ID: j.next, Kind: kind, HeldAt: heldAt, Metadata: md, Payload: payload}
	return j.next, nil
}

func (j *fakeJournal) Remove(_ context.Context, ids ...uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, id := range ids {
		delete(j.live, id)
	}
	return nil
}

func (j *fakeJournal) records() []journal.Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []journal.Record
	for id := uint64(1); id <= j.next; id++ {
		if r, ok := j.live[id]; ok {
			out = append(out, r)
		}
	}
	return out
}

// Crash safety hooks: held spans are journaled before ConsumeTraces returns; a new processor
// recovering the journal's live records delivers them (once more at most); a failed append
// refuses the batch with a retryable error and delivers nothing of it.
func TestJournalCrashRecovery(t *testing.T) {
	j := &fakeJournal{}
	p, err := newSpanFilterProcessor(processortest.NewNopSettings(metadata.Type), createDefaultConfig().(*Config), consumertest.NewNop(), j)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = p.processTraces(ctx, batch(
		testSpan{name: "root", scope: scopeSDK},
		testSpan{name: "child", scope: scopeSDK, parent: "agent"},
	))
	require.NoError(t, err)
	require.Equal(t, 1, j.appends)
	require.Len(t, j.records(), 1)

	j.fail = true
	td := batch(testSpan{name: "pass", scope: scopeSDK}, testSpan{name: "other", scope: scopeSDK, parent: "x"})
	_, err = p.processTraces(ctx, td)
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	assert.Equal(t, int64(1), p.mem.HeldSpans(), "the refused batch holds nothing")
	j.fail = false

	// SIGKILL: p is gone without shutdown. A new process recovers the journal.
	sink := new(consumertest.TracesSink)
	p2, err := newSpanFilterProcessor(processortest.NewNopSettings(metadata.Type), createDefaultConfig().(*Config), sink, j)
	require.NoError(t, err)
	require.NoError(t, p2.recoverJournal(j.records()))
	assert.Equal(t, int64(1), p2.mem.HeldSpans())
	_, err = p2.processTraces(ctx, batch(testSpan{name: "agent", scope: scopeSDK}))
	require.NoError(t, err)
	require.Equal(t, 1, sink.SpanCount(), "the recovered child is released by its parent")
	assert.Equal(t, "child", sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Name())
	assert.Empty(t, j.records(), "delivered: the record is removed")
	require.NoError(t, p2.shutdown(ctx))
}

// The collector calls ConsumeTraces from many goroutines on one instance (run with -race).
func TestConcurrentConsumeTraces(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	// A wait far longer than the test: every span is settled by the arrival of its ancestors, not
	// by a timer that a loaded machine (-race) could let fire first (that path has its own tests).
	cfg.TraceIntegrity.WaitDuration = 10 * time.Second
	sink := new(consumertest.TracesSink)
	proc, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, proc.Start(context.Background(), componenttest.NewNopHost()))
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 40 {
				tr := traceN(byte(g*40 + i))
				tr[1] = byte(g)
				name := func(s string) string { return fmt.Sprintf("%d/%d %s", g, i, s) }
				batches := []ptrace.Traces{
					batch(testSpan{name: name("chat"), scope: scopeOpenAI, parent: name("http"), trace: tr}),
					batch(testSpan{name: name("http"), scope: scopeHTTPClient, parent: name("agent"), trace: tr}),
					batch(testSpan{name: name("agent"), scope: scopeSDK, trace: tr}),
				}
				for _, b := range batches {
					assert.NoError(t, proc.ConsumeTraces(context.Background(), b))
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, proc.Shutdown(context.Background()))
	require.Equal(t, 16*40*2, sink.SpanCount())
	seen := map[string]bool{}
	byID := map[string]string{}
	for _, td := range sink.AllTraces() {
		forEachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, s ptrace.Span) {
			require.False(t, seen[s.Name()], "%q delivered twice", s.Name())
			seen[s.Name()] = true
			byID[s.SpanID().String()] = s.Name()
		})
	}
	for _, td := range sink.AllTraces() {
		forEachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, s ptrace.Span) {
			if strings.HasSuffix(s.Name(), "chat") {
				assert.Equal(t, strings.TrimSuffix(s.Name(), "chat")+"agent", byID[s.ParentSpanID().String()])
			}
		})
	}
}
