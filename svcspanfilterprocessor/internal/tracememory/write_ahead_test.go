package tracememory

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// flakyJournal refuses every third append of held spans.
type flakyJournal struct {
	*fakeJournal
	n atomic.Int64
}

func (j *flakyJournal) Append(ctx context.Context, kind journal.Kind, heldAt time.Time, md map[string][]string, payload []byte) (uint64, error) {
	if kind == journal.KindSpans && j.n.Add(1)%3 == 0 {
		return 0, context.DeadlineExceeded
	}
	return j.fakeJournal.Append(ctx, kind, heldAt, md, payload)
}

// chatJoin is fakeJoin for every span named "... chat".
type chatJoin struct{ fakeJoin }

func (chatJoin) ScopeAwaitsContent(pcommon.InstrumentationScope) bool { return true }

func (chatJoin) AwaitsContent(span ptrace.Span) bool {
	return strings.HasSuffix(span.Name(), "chat")
}

// A call whose write fails is refused before it changes anything: nothing of it goes on, the
// content it would have joined still waits, an open parent it would have closed is still open,
// the budget is as before; the client's resend goes on once, with the content.
func TestFailedWriteChangesNothing(t *testing.T) {
	d := newJoinDriver(t)
	require.NoError(t, d.send(sp{name: "tool", parent: "http", kept: true}))
	d.advance(10 * time.Second) // tool goes on pointing at http: an open parent
	require.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf("chat"), fakeContent("prompt"), nil))
	checkCounts(t, d.m)
	bytes, delivered, records := d.m.Bytes(), len(d.delivered), len(d.journal.records())

	call := []sp{{name: "chat", parent: "agent", kept: true}, {name: "http", parent: "agent"}}
	d.journal.setFail(true)
	require.Error(t, d.send(call...))
	d.journal.setFail(false)
	d.deliver(d.m.TakeReady())
	assert.Equal(t, bytes, d.m.Bytes(), "the budget is as before")
	assert.Equal(t, delivered, len(d.delivered), "nothing of the refused call went on")
	assert.Equal(t, records, len(d.journal.records()), "nothing written")
	assert.Zero(t, d.m.HeldSpans())
	checkCounts(t, d.m)

	require.NoError(t, d.send(call...)) // the client sends it again
	require.NoError(t, d.send(sp{name: "agent", kept: true}))
	d.shutdown()
	assert.Equal(t, map[string]string{"tool": "~http", "~http": "agent", "chat": "agent", "agent": ""}, d.tree())
	assert.Equal(t, []string{"prompt"}, d.contentOfCopies("chat"))
	d.checkInvariants(t, true, false)
}

// Another call staged, with a hook, while a call is being written (its content arriving, its
// parent arriving): the call holds nothing yet, so nothing of it goes on; its write fails and the
// client's resend goes on once, with its content, below its parent.
func TestCallsDuringAWriteSeeNothingOfIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		during func(d *driver)
	}{
		{name: "its content arrives", during: func(d *driver) {
			require.Equal(d.t, ContentWaiting, d.m.AddContent(testTrace, idOf("chat"), fakeContent("prompt"), nil))
		}},
		{name: "its parent arrives", during: func(d *driver) {
			require.NoError(d.t, d.send(sp{name: "agent", kept: true}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newJoinDriver(t)
			hj := &hookedJournal{fakeJournal: d.journal}
			cfg := testConfig(d.clock)
			cfg.Journaled = true
			d.m = New(cfg, hj, fakeJoin{}, d.observe)
			hj.during = func() { tc.during(d) }
			chat := sp{name: "chat", parent: "agent", kept: true}
			require.Error(t, d.send(chat), "its write fails: refused")
			d.deliver(d.m.TakeReady())
			assert.NotContains(t, d.tree(), "chat", "nothing of the refused call went on")

			require.NoError(t, d.send(chat)) // the client sends it again
			if _, ok := d.tree()["agent"]; !ok {
				require.NoError(t, d.send(sp{name: "agent", kept: true}))
			}
			d.m.AddContent(testTrace, idOf("chat"), fakeContent("prompt"), nil)
			d.deliver(d.m.TakeReady())
			d.advance(time.Minute)
			assert.Equal(t, []string{"prompt"}, d.contentOfCopies("chat"))
			assert.Equal(t, "agent", d.tree()["chat"])
			d.checkInvariants(t, true, false)
		})
	}
}

// Many calls at once, a third of whose writes fail (the client sends the call again): every kept
// span goes on exactly once, below its parent, and carries its content (run with -race).
func TestConcurrentCallsWithFailingWrites(t *testing.T) {
	d := newDriver(t, nil)
	fj := &flakyJournal{fakeJournal: d.journal}
	cfg := testConfig(d.clock)
	cfg.Journaled = true
	d.m = New(cfg, fj, chatJoin{}, d.observe)
	// send is a client: it sends the call again until it is accepted.
	send := func(spans ...sp) {
		for {
			td, decisions := buildBatch(spans)
			adm, err := d.m.Admit(client.Info{}, td, decisions)
			d.deliver(d.m.TakeReady())
			if err != nil {
				continue
			}
			if adm.Pass {
				d.collect(td)
			}
			d.deliver(adm.Deliveries)
			d.deliver(d.m.TakeReady())
			return
		}
	}
	const traces = 200
	var wg sync.WaitGroup
	for i := range traces {
		tr := pcommon.TraceID{0xbb, 14: byte(i >> 8), 15: byte(i)}
		name := func(s string) string { return fmt.Sprintf("%d %s", i, s) }
		chat := sp{name: name("chat"), parent: name("agent"), kept: true, trace: tr}
		agent := sp{name: name("agent"), kept: true, trace: tr}
		d.mu.Lock()
		d.arrived[idOf(chat.name)], d.arrived[idOf(agent.name)] = chat, agent
		d.mu.Unlock()
		wg.Go(func() { send(chat) })
		wg.Go(func() { send(agent) })
		wg.Go(func() {
			d.m.AddContent(tr, idOf(chat.name), fakeContent("prompt of "+chat.name), nil)
			d.deliver(d.m.TakeReady())
		})
	}
	wg.Wait()
	d.deliver(d.m.TakeReady())
	d.checkInvariants(t, true, false)
	d.mu.Lock()
	defer d.mu.Unlock()
	joined := 0
	for _, s := range d.delivered {
		if v, ok := s.Attributes().Get("content"); ok {
			assert.Equal(t, "prompt of "+s.Name(), v.Str())
			joined++
		}
	}
	assert.Equal(t, traces, joined, "every chat span carries its content")
}
