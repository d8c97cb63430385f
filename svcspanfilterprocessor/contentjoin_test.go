package svcspanfilterprocessor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/golden"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

type joinClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *joinClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *joinClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// joinFixture is the memory with the content join, and the records and span of one real call (the
// Python openai-v2 golden case: system, user, assistant tool call, tool answer, then the choice).
type joinFixture struct {
	t      *testing.T
	clock  *joinClock
	m      *tracememory.Memory
	stats  tracememory.Stats
	inputs plog.Logs // the records emitted when the call starts
	output plog.Logs // the choice, emitted when it ends
	// passed are spans that went on at once; delivered those the memory released later.
	passed, delivered []ptrace.Span
	// spanClient and contentClient are the client contexts spans and content come in with
	// (pass-through tenants); zero: a gateway with its own keys.
	spanClient, contentClient client.Info
}

const joinCase = "python_tool_round_trip"

func defaultContentJoinConfig() ContentJoinConfig { return createDefaultConfig().(*Config).ContentJoin }

func newJoinFixture(t *testing.T, cfg ContentJoinConfig) *joinFixture {
	return newJournaledJoinFixture(t, cfg, journal.Nop)
}

// newJournaledJoinFixture: j must be the memory's own journal (it removes records through it).
func newJournaledJoinFixture(t *testing.T, cfg ContentJoinConfig, j journal.Journal) *joinFixture {
	f := &joinFixture{t: t, clock: &joinClock{now: time.Unix(1_763_899_200, 0)}}
	mcfg := tracememory.Config{
		WaitDuration: 5 * time.Second, MaxWaitDuration: time.Minute, RememberDuration: 30 * time.Second,
		ContentWait: cfg.Wait, MaxTraces: 1000, MemoryLimitBytes: 64 << 20, ConnectorSpans: true, Now: f.clock.Now,
	}
	var mu sync.Mutex
	f.m = tracememory.New(mcfg, j, newContentJoin(cfg), func(s *tracememory.Stats) {
		mu.Lock()
		f.stats.ContentUnmatched[tracememory.UnmatchedSpanDropped] += s.ContentUnmatched[tracememory.UnmatchedSpanDropped]
		f.stats.ContentUnmatched[tracememory.UnmatchedNoSpan] += s.ContentUnmatched[tracememory.UnmatchedNoSpan]
		f.stats.ContentUnmatched[tracememory.UnmatchedOtherTenant] += s.ContentUnmatched[tracememory.UnmatchedOtherTenant]
		mu.Unlock()
	})
	all := golden.ReadLogs(t, filepath.Join("internal", "genaicontent", "testdata", joinCase, "logs.json"))
	f.inputs, f.output = plog.NewLogs(), plog.NewLogs()
	all.CopyTo(f.inputs)
	all.CopyTo(f.output)
	f.inputs.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().RemoveIf(func(lr plog.LogRecord) bool { return lr.EventName() == "gen_ai.choice" })
	f.output.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().RemoveIf(func(lr plog.LogRecord) bool { return lr.EventName() != "gen_ai.choice" })
	return f
}

func (f *joinFixture) sendSpan(kept bool) {
	f.t.Helper()
	td := golden.ReadTraces(f.t, filepath.Join("internal", "genaicontent", "testdata", joinCase, "span.json"))
	verdict := tracememory.Drop
	if kept {
		verdict = tracememory.Keep
	}
	adm, err := f.m.Admit(f.spanClient, td, []tracememory.Decision{{Verdict: verdict}})
	require.NoError(f.t, err)
	// Deliveries of the call go on with it (a span carrying joined content is one): not held.
	for _, d := range adm.Deliveries {
		f.passed = append(f.passed, d.Traces.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0))
		f.m.Delivered(d)
	}
	if adm.Pass {
		f.passed = append(f.passed, td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0))
	}
}

func (f *joinFixture) sendContent(ld plog.Logs) contentOutcomes {
	f.t.Helper()
	out, err := addContent(client.NewContext(context.Background(), f.contentClient), f.m, journal.Nop, ld, f.clock.Now())
	require.NoError(f.t, err)
	f.collect(f.m.TakeReady())
	return out
}

func (f *joinFixture) expire(d time.Duration) {
	f.clock.advance(d)
	f.m.Expire()
	f.collect(f.m.TakeReady())
}

func (f *joinFixture) collect(ds []*tracememory.Delivery) {
	for _, d := range ds {
		f.delivered = append(f.delivered, d.Traces.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0))
		f.m.Delivered(d)
	}
}

// attrs are the content attributes of the one span that left, and whether it was held.
func (f *joinFixture) left() (in, out string, held bool) {
	f.t.Helper()
	spans := append(append([]ptrace.Span(nil), f.passed...), f.delivered...)
	require.Len(f.t, spans, 1, "the span leaves exactly once")
	get := func(k string) string {
		v, _ := spans[0].Attributes().Get(k)
		return v.Str()
	}
	return get("gen_ai.input.messages"), get("gen_ai.output.messages"), len(f.delivered) == 1
}

func TestContentJoinTiming(t *testing.T) {
	on := defaultContentJoinConfig()
	tests := []struct {
		name    string
		cfg     ContentJoinConfig
		run     func(f *joinFixture)
		wantIn  bool
		wantOut bool
		// wantHeld: the span waited in the memory instead of going on with its own batch.
		wantHeld bool
	}{
		{name: "logs first, complete: joined at once, never held", cfg: on, wantIn: true, wantOut: true, run: func(f *joinFixture) {
			f.sendContent(f.inputs)
			f.sendContent(f.output)
			f.sendSpan(true)
		}},
		{name: "spans first: held until the output arrives", cfg: on, wantIn: true, wantOut: true, wantHeld: true, run: func(f *joinFixture) {
			f.sendSpan(true)
			require.Equal(f.t, int64(1), f.m.HeldSpans())
			f.expire(time.Second)
			f.sendContent(f.inputs)
			require.Equal(f.t, int64(1), f.m.HeldSpans(), "input alone does not complete the call")
			f.expire(time.Second)
			out := f.sendContent(f.output)
			assert.Equal(f.t, 1, out[tracememory.ContentJoined])
			assert.Zero(f.t, f.m.HeldSpans())
		}},
		{name: "input first, then the span, then the output", cfg: on, wantIn: true, wantOut: true, wantHeld: true, run: func(f *joinFixture) {
			f.sendContent(f.inputs)
			f.sendSpan(true)
			require.Equal(f.t, int64(1), f.m.HeldSpans(), "waits for the rest of its content")
			f.sendContent(f.output)
		}},
		{name: "spans first, only input comes: goes with it when the wait ends", cfg: on, wantIn: true, wantHeld: true, run: func(f *joinFixture) {
			f.sendSpan(true)
			f.sendContent(f.inputs)
			f.expire(4 * time.Second)
			require.Equal(f.t, int64(1), f.m.HeldSpans())
			f.expire(time.Second)
		}},
		{name: "span sent again while it gathers content: one copy, all content", cfg: on, wantIn: true, wantOut: true, wantHeld: true, run: func(f *joinFixture) {
			f.sendSpan(true)
			f.sendContent(f.inputs)
			f.sendSpan(true)
			require.Equal(f.t, int64(1), f.m.HeldSpans())
			f.sendContent(f.output)
		}},
		{name: "no content ever: goes without when the wait ends", cfg: on, wantHeld: true, run: func(f *joinFixture) {
			f.sendSpan(true)
			f.expire(5 * time.Second)
		}},
		{name: "join off: the span is never held, records are not kept", cfg: ContentJoinConfig{}, run: func(f *joinFixture) {
			f.sendSpan(true)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newJoinFixture(t, tt.cfg)
			tt.run(f)
			in, out, held := f.left()
			assert.Equal(t, tt.wantIn, in != "", "input messages: %s", in)
			assert.Equal(t, tt.wantOut, out != "", "output messages: %s", out)
			assert.Equal(t, tt.wantHeld, held, "held")
			if tt.wantIn {
				assert.Contains(t, in, `"name":"lookup_order"`)
			}
			if tt.wantOut {
				assert.Contains(t, out, "Order A-1042 has shipped.")
			}
			f.expire(time.Hour) // the idle trace is forgotten
			assert.Zero(t, f.m.Bytes(), "nothing left in the budget")
		})
	}
}

// Content of a span the filter dropped goes nowhere and is counted.
func TestContentOfDroppedSpanIsDiscarded(t *testing.T) {
	f := newJoinFixture(t, defaultContentJoinConfig())
	f.sendContent(f.inputs)
	f.sendSpan(false)
	out := f.sendContent(f.output)
	assert.Equal(t, 1, out[tracememory.ContentDiscarded], "content after its span was dropped")
	assert.Equal(t, int64(5), f.stats.ContentUnmatched[tracememory.UnmatchedSpanDropped], "the 4 waiting input records and the late output")
	assert.Empty(t, f.passed)
	assert.Empty(t, f.delivered)
}

// Content whose span never comes is discarded when its wait ends.
func TestContentWithoutSpanExpires(t *testing.T) {
	f := newJoinFixture(t, defaultContentJoinConfig())
	out := f.sendContent(f.inputs)
	assert.Equal(t, 1, out[tracememory.ContentWaiting])
	f.expire(5 * time.Second)
	assert.Equal(t, int64(4), f.stats.ContentUnmatched[tracememory.UnmatchedNoSpan], "the 4 input records")
	f.expire(time.Hour)
	assert.Zero(t, f.m.Bytes())
}

// memJournal is a journal.Journal in memory.
type memJournal struct {
	mu   sync.Mutex
	next uint64
	live map[uint64]journal.Record
	fail error
}

func (j *memJournal) Append(_ context.Context, kind journal.Kind, at time.Time, md map[string][]string, payload []byte) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fail != nil {
		return 0, j.fail
	}
	j.next++
	j.live[j.next] = journal.Record{ID: j.next, Kind: kind, HeldAt: at, Metadata: md, Payload: payload}
	return j.next, nil
}

func (j *memJournal) Remove(_ context.Context, ids ...uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, id := range ids {
		delete(j.live, id)
	}
	return nil
}

// Content is durable before the logs call returns (one KindContent record per call), removed from
// the journal once joined, and recovered after a crash: the span that arrives after the restart
// still gets it.
func TestContentJournal(t *testing.T) {
	j := &memJournal{live: map[uint64]journal.Record{}}
	f := newJournaledJoinFixture(t, defaultContentJoinConfig(), j)
	_, err := addContent(context.Background(), f.m, j, f.inputs, f.clock.Now())
	require.NoError(t, err)
	require.Len(t, j.live, 1)
	rec := j.live[1]
	assert.Equal(t, journal.KindContent, rec.Kind)

	// The process dies; a new memory recovers the record.
	j2 := &memJournal{live: map[uint64]journal.Record{rec.ID: rec}}
	g := newJournaledJoinFixture(t, defaultContentJoinConfig(), j2)
	out, err := recoverContent(g.m, []journal.Record{rec}, true)
	require.NoError(t, err)
	assert.Equal(t, 1, out[tracememory.ContentWaiting])
	g.sendContent(g.output)
	g.sendSpan(true)
	in, outMsgs, held := g.left()
	assert.Contains(t, in, "lookup_order")
	assert.Contains(t, outMsgs, "Order A-1042 has shipped.")
	assert.False(t, held)
	assert.Empty(t, j2.live, "the recovered record is removed once its content is joined")

	// A journal that cannot take the records fails the call: the client retries, nothing is kept.
	j.fail = errors.New("disk full")
	_, err = addContent(context.Background(), f.m, j, f.output, f.clock.Now())
	require.ErrorContains(t, err, "retry")
	assert.False(t, consumererror.IsPermanent(err))
}

// The joined span removes its content's journal record.
func TestContentJournalRecordRemovedWhenJoined(t *testing.T) {
	j := &memJournal{live: map[uint64]journal.Record{}}
	f := newJournaledJoinFixture(t, defaultContentJoinConfig(), j)
	_, err := addContent(context.Background(), f.m, j, f.inputs, f.clock.Now())
	require.NoError(t, err)
	_, err = addContent(context.Background(), f.m, j, f.output, f.clock.Now())
	require.NoError(t, err)
	assert.Len(t, j.live, 2)
	f.sendSpan(true)
	assert.Empty(t, len(j.live), "both records removed once their content is on the span")
}

// The logs side: content that does not fit in a memory whose rest cannot be evicted
// without loss is refused with a retryable error before anything is journaled.
func TestContentPushBackWhenMemoryIsFull(t *testing.T) {
	j := &memJournal{live: map[uint64]journal.Record{}}
	f := newJournaledJoinFixture(t, defaultContentJoinConfig(), j)
	f.m = tracememory.New(tracememory.Config{
		WaitDuration: 5 * time.Second, MaxWaitDuration: time.Minute, RememberDuration: 30 * time.Second,
		ContentWait: time.Minute, MaxTraces: 1000, MemoryLimitBytes: 64, Now: f.clock.Now,
	}, j, newContentJoin(defaultContentJoinConfig()), nil)
	_, err := addContent(context.Background(), f.m, j, f.inputs, f.clock.Now())
	require.ErrorIs(t, err, tracememory.ErrContentOverloaded)
	assert.False(t, consumererror.IsPermanent(err), "the client retries")
	assert.Empty(t, j.live, "nothing journaled")
}

// tenant is the client context of a pass-through request with the credentials of public key pk.
func tenant(pk string) client.Info {
	return client.Info{Metadata: client.NewMetadata(map[string][]string{"authorization": {"Basic " + pk + "-credentials"}})}
}

// Content joins only the span of its own tenant: two tenants of a pass-through gateway may send
// the same trace and span ids, and one's prompts must never reach the other's project on the
// other's span (issue 11). Each order reaches the join another way: content waiting when the span
// comes, a held span gathering content, a held span given the rest of its content.
func TestContentJoinsOnlyItsOwnTenant(t *testing.T) {
	orders := map[string]func(f *joinFixture){
		"content before the span": func(f *joinFixture) {
			f.sendContent(f.inputs)
			f.sendContent(f.output)
			f.sendSpan(true)
		},
		"span held for its content": func(f *joinFixture) {
			f.sendSpan(true)
			f.sendContent(f.inputs)
			f.sendContent(f.output)
		},
		"part before, part after the span": func(f *joinFixture) {
			f.sendContent(f.inputs)
			f.sendSpan(true)
			f.sendContent(f.output)
		},
	}
	for name, order := range orders {
		for _, same := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/same tenant=%v", name, same), func(t *testing.T) {
				f := newJoinFixture(t, defaultContentJoinConfig())
				f.spanClient, f.contentClient = tenant("pk-a"), tenant("pk-b")
				if same {
					f.contentClient = tenant("pk-a")
				}
				order(f)
				f.expire(time.Minute) // a span waiting for content that never joins goes on without it
				in, out, _ := f.left()
				if same {
					assert.Contains(t, in, "lookup_order")
					assert.Contains(t, out, "Order A-1042 has shipped.")
					assert.Zero(t, f.stats.ContentUnmatched[tracememory.UnmatchedOtherTenant])
					return
				}
				assert.Empty(t, in, "another tenant's input joined")
				assert.Empty(t, out, "another tenant's output joined")
				assert.Equal(t, int64(5), f.stats.ContentUnmatched[tracememory.UnmatchedOtherTenant]+f.stats.ContentUnmatched[tracememory.UnmatchedNoSpan],
					"all 5 records of the other tenant are discarded")
				assert.Positive(t, f.stats.ContentUnmatched[tracememory.UnmatchedOtherTenant])
				assert.Zero(t, f.m.Bytes(), "nothing of it stays in memory")
			})
		}
	}
}

// Recovered content keeps its tenant: after a restart it still joins only its own tenant's span.
func TestRecoveredContentKeepsItsTenant(t *testing.T) {
	for _, same := range []bool{true, false} {
		t.Run(fmt.Sprintf("same tenant=%v", same), func(t *testing.T) {
			j := &memJournal{live: map[uint64]journal.Record{}}
			f := newJournaledJoinFixture(t, defaultContentJoinConfig(), j)
			_, err := addContent(client.NewContext(context.Background(), tenant("pk-a")), f.m, j, f.inputs, f.clock.Now())
			require.NoError(t, err)
			rec := j.live[1]

			g := newJournaledJoinFixture(t, defaultContentJoinConfig(), &memJournal{live: map[uint64]journal.Record{rec.ID: rec}})
			_, err = recoverContent(g.m, []journal.Record{rec}, true)
			require.NoError(t, err)
			g.spanClient, g.contentClient = tenant("pk-b"), tenant("pk-b")
			if same {
				g.spanClient, g.contentClient = tenant("pk-a"), tenant("pk-a")
			}
			g.sendContent(g.output)
			g.sendSpan(true)
			g.expire(time.Minute)
			in, _, _ := g.left()
			if same {
				assert.Contains(t, in, "lookup_order")
			} else {
				assert.Empty(t, in, "recovered content of tenant a joined onto tenant b's span")
			}
		})
	}
}

// Content journaled while the join was on, recovered by a run with the join off, is discarded and its
// record removed; the span it was waiting for goes on without it (the memory has no join to apply it).
func TestRecoveredContentWithTheJoinTurnedOff(t *testing.T) {
	j := &memJournal{live: map[uint64]journal.Record{}}
	f := newJournaledJoinFixture(t, defaultContentJoinConfig(), j)
	_, err := addContent(context.Background(), f.m, j, f.inputs, f.clock.Now())
	require.NoError(t, err)
	rec := j.live[1]
	require.Equal(t, journal.KindContent, rec.Kind)

	off := defaultContentJoinConfig()
	off.Enabled = false
	restarted := &memJournal{live: map[uint64]journal.Record{rec.ID: rec}}
	g := newJournaledJoinFixture(t, off, restarted)
	out, err := recoverContent(g.m, []journal.Record{rec}, false)
	require.NoError(t, err)
	assert.Equal(t, 1, out[tracememory.ContentDiscarded])
	assert.Empty(t, restarted.live, "the discarded content's record is removed")
	assert.Zero(t, g.m.Bytes(), "nothing of it stays in memory")

	g.sendSpan(true) // panicked before: the recovered content met a memory without a join
	g.expire(time.Minute)
	g.left() // the span goes on, once
}
