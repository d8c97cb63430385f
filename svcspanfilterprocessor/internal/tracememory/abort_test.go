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

// admitOnly admits a batch and leaves its Commit or Abort to the test (a call between its admission
// and its journal append).
func (d *driver) admitOnly(spans ...sp) (*Admission, ptrace.Traces) {
	d.t.Helper()
	td, decisions := buildBatch(spans)
	d.mu.Lock()
	for _, s := range spans {
		d.arrived[idOf(s.name)] = s
	}
	d.mu.Unlock()
	adm, err := d.m.Admit(client.Info{}, td, decisions)
	require.NoError(d.t, err)
	return adm, td
}

// commitOnly writes adm's record to the journal and commits it.
func (d *driver) commitOnly(adm *Admission) {
	d.t.Helper()
	payload, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(adm.HeldCopy)
	require.NoError(d.t, err)
	id, err := d.journal.Append(context.Background(), journal.KindSpans, adm.HeldAt, nil, payload)
	require.NoError(d.t, err)
	adm.Commit(id)
}

// Finding 5: a span settled by another call while its own batch's append is still to come is
// released by that batch's Commit, never before; when a copy sent again took its place and that
// copy's call is refused, the first copy is held again and goes on (its batch committed meanwhile).
func TestDeferredReleaseOfUncommittedSpan(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, d *driver)
	}{
		{name: "released at its batch's commit", run: func(t *testing.T, d *driver) {
			b, _ := d.admitOnly(sp{name: "chat", parent: "agent", kept: true})
			require.NoError(t, d.send(sp{name: "agent", kept: true}))
			assert.Equal(t, map[string]string{"agent": ""}, d.tree(), "chat waits for its batch's append")
			d.commitOnly(b)
			d.deliver(b.Deliveries)
		}},
		{name: "discarded by its batch's abort, delivered by the resend", run: func(t *testing.T, d *driver) {
			b, _ := d.admitOnly(sp{name: "chat", parent: "agent", kept: true})
			require.NoError(t, d.send(sp{name: "agent", kept: true}))
			b.Abort()
			d.deliver(d.m.TakeReady())
			require.NoError(t, d.send(sp{name: "chat", parent: "agent", kept: true}))
		}},
		{name: "its resend refused after its batch committed", run: func(t *testing.T, d *driver) {
			b, _ := d.admitOnly(sp{name: "chat", parent: "agent", kept: true})
			require.NoError(t, d.send(sp{name: "agent", kept: true}))
			again, _ := d.admitOnly(sp{name: "chat", parent: "agent", kept: true})
			d.commitOnly(b)
			d.deliver(b.Deliveries)
			again.Abort() // the first copy is acknowledged: it is held again, and goes on
			d.deliver(d.m.TakeReady())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			tc.run(t, d)
			assert.Equal(t, map[string]string{"agent": "", "chat": "agent"}, d.tree())
			assert.Zero(t, d.m.HeldSpans())
			d.checkInvariants(t, true, false)
			assert.Empty(t, d.journal.records(), "every record is removed once its spans went on")
		})
	}
}

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

// Many calls at once, a third of whose appends fail (the client sends the call again): every kept
// span goes on exactly once, below its parent, and carries its content (run with -race).
func TestConcurrentCallsWithFailingAppends(t *testing.T) {
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
			require.NoError(t, err)
			if adm.Journaled > 0 {
				payload, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(adm.HeldCopy)
				require.NoError(t, err)
				id, err := fj.Append(context.Background(), journal.KindSpans, adm.HeldAt, nil, payload)
				if err != nil {
					adm.Abort()
					continue
				}
				adm.Commit(id)
			} else {
				adm.Commit(0)
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
