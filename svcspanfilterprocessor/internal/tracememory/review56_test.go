package tracememory

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// outJoin: "chat" waits for content; its content is complete once an "out" piece came.
type outJoin struct{}

func (outJoin) ScopeAwaitsContent(pcommon.InstrumentationScope) bool { return true }

func (outJoin) AwaitsContent(span ptrace.Span) bool {
	return span.Name() == "chat"
}

func (outJoin) Complete(cs []Content) bool {
	for _, c := range cs {
		if strings.HasPrefix(string(c.(fakeContent)), "out") {
			return true
		}
	}
	return false
}

func (outJoin) Apply(span ptrace.Span, cs []Content) bool {
	var parts []string
	for _, c := range cs {
		parts = append(parts, string(c.(fakeContent)))
	}
	span.Attributes().PutStr("content", strings.Join(parts, "+"))
	return true
}

// contentOf is the content joined onto the delivered span name.
func (d *driver) contentOf(name string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.delivered {
		if s.Name() == name {
			v, _ := s.Attributes().Get("content")
			return v.Str()
		}
	}
	return "<not delivered>"
}

// Review of findings 5/6, R1 and R2: content a refused call's span took (gathered while it was
// held, or joined) waits again for the client's resend, from the abort, for
// max(content_join.wait, remember_duration): the resend comes after the client's retry backoff
// (exporterhelper and the SDKs: 5s +-50%, growing).
func TestAbortedCallsContentWaitsForTheResend(t *testing.T) {
	for _, tc := range []struct {
		name string
		join Join
		// span is the refused call's span, content the pieces that came before it (first arrives
		// before, after arrives after the resend).
		span          string
		before, after []string
		// arrivedEarly: how long before the refused call the content came.
		arrivedEarly, resendAfter time.Duration
		want                      string
	}{
		{name: "gathered content, resend inside content wait from the abort (R1)", join: outJoin{}, span: "chat",
			before: []string{"in"}, after: []string{"out"}, arrivedEarly: 3 * time.Second, resendAfter: 3 * time.Second, want: "in+out"},
		{name: "gathered content, resend after the client's backoff (R2)", join: outJoin{}, span: "chat",
			before: []string{"in"}, after: []string{"out"}, arrivedEarly: time.Second, resendAfter: 7 * time.Second, want: "in+out"},
		{name: "joined content, resend after the client's backoff (R2)", join: fakeJoin{}, span: "tool",
			before: []string{"x"}, resendAfter: 6 * time.Second, want: "x"},
		{name: "joined content, resend near remember_duration (R2)", join: fakeJoin{}, span: "tool",
			before: []string{"x"}, resendAfter: 29 * time.Second, want: "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, nil)
			cfg := testConfig(d.clock)
			cfg.Journaled = true
			d.m = New(cfg, d.journal, tc.join, d.observe)
			for _, c := range tc.before {
				require.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf(tc.span), fakeContent(c), nil))
			}
			d.advance(tc.arrivedEarly)
			a, _ := d.admitOnly(sp{name: tc.span, kept: true})
			a.Abort() // the journal append failed: the client sends the batch again
			d.advance(tc.resendAfter)
			require.NoError(t, d.send(sp{name: tc.span, kept: true}))
			for _, c := range tc.after {
				d.m.AddContent(testTrace, idOf(tc.span), fakeContent(c), nil)
			}
			d.deliver(d.m.TakeReady())
			assert.Equal(t, tc.want, d.contentOf(tc.span))
			assert.Zero(t, d.stats.ContentUnmatched[UnmatchedNoSpan], "no content expired")
			d.checkInvariants(t, true, false)
		})
	}
}

// Given-back content still expires, once the longer wait is over: counted, never kept forever.
func TestGivenBackContentExpires(t *testing.T) {
	d := newJoinDriver(t)
	require.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf("tool"), fakeContent("x"), nil))
	a, _ := d.admitOnly(sp{name: "tool", kept: true})
	a.Abort()
	d.advance(31 * time.Second) // remember_duration (30s) from the abort: the client never came back
	assert.Equal(t, int64(1), d.stats.ContentUnmatched[UnmatchedNoSpan])
	assert.Zero(t, d.m.Bytes())
}

// R3: a refused call's span, deferred, is not brought back by the abort of a call whose copy took
// its place (it would be delivered, then delivered again by the client's next try); and that
// copy's Commit does not finish the records of content the refused call had joined (they went
// back to wait, and the copy gathered them).
func TestAbortedCallsReplacedSpanStaysAborted(t *testing.T) {
	t.Run("both calls refused", func(t *testing.T) {
		d := newDriver(t, nil)
		a, _ := d.admitOnly(sp{name: "chat", parent: "agent", kept: true}) // held, A's append pending
		require.NoError(t, d.send(sp{name: "agent", kept: true}))          // chat settled, deferred
		b, _ := d.admitOnly(sp{name: "chat", parent: "agent", kept: true}) // the client's copy (timeout retry)
		a.Abort()
		b.Abort()
		d.deliver(d.m.TakeReady())
		assert.Equal(t, map[string]string{"agent": ""}, d.tree(), "no refused copy goes on")
		require.NoError(t, d.send(sp{name: "chat", parent: "agent", kept: true})) // the client's next try
		d.deliver(d.m.TakeReady())
		d.checkInvariants(t, true, false)
		assert.Empty(t, d.journal.records())
	})
	t.Run("refused call, its copy committed", func(t *testing.T) {
		d := newJoinDriver(t)
		id, err := d.journal.Append(context.Background(), journal.KindContent, d.clock.Now(), nil, []byte("content"))
		require.NoError(t, err)
		require.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf("tool"), fakeContent("x"), d.m.NewRecordRef(id, 1)))
		a, _ := d.admitOnly(sp{name: "tool", parent: "agent", kept: true}) // joins x, held for agent
		b, _ := d.admitOnly(sp{name: "tool", parent: "agent", kept: true}) // the client's copy
		a.Abort()                                                          // x waits again: b's copy gathers it
		d.commitOnly(b)
		assert.True(t, d.journal.has(id), "x is on b's held copy, not handed on")
		require.NoError(t, d.send(sp{name: "agent", kept: true}))
		d.deliver(d.m.TakeReady())
		assert.Equal(t, "x", d.contentOf("tool"))
		d.checkInvariants(t, true, false)
		assert.Empty(t, d.journal.records())
	})
}

// M3: a refused call's abort holds again the copy its batch replaced while that copy's own call
// commits and releases it (releaseDeferred): the item's trace is read there before the shard lock
// is taken, so hold must not write it (go test -race). The span goes on once either way.
func TestAbortHoldsAgainWhileItsCallCommits(t *testing.T) {
	for i := 0; i < 50; i++ {
		d := newDriver(t, nil)
		a, _ := d.admitOnly(sp{name: "chat", parent: "agent", kept: true}) // held, A's append pending
		require.NoError(t, d.send(sp{name: "agent", kept: true}))          // chat settled, deferred
		b, _ := d.admitOnly(sp{name: "chat", parent: "agent", kept: true}) // the client's copy
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); b.Abort() }()
		go func() { defer wg.Done(); d.commitOnly(a) }()
		wg.Wait()
		d.deliver(a.Deliveries)
		d.deliver(d.m.TakeReady())
		d.checkInvariants(t, true, false)
	}
}
