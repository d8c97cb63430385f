package tracememory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func (j *fakeJournal) setFail(fail bool) {
	j.mu.Lock()
	j.fail = fail
	j.mu.Unlock()
}

// contentOfCopies is the "content" attribute of every delivered copy of span name, in order.
func (d *driver) contentOfCopies(name string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, s := range d.delivered {
		if s.Name() != name {
			continue
		}
		v, ok := s.Attributes().Get("content")
		if !ok {
			out = append(out, "")
			continue
		}
		out = append(out, v.AsString())
	}
	return out
}

// A copy of a span sent again after it went on with joined content (a client retrying after a
// timeout) goes on with that content too: the platform keeps the last copy of a span id, which
// must not be one without the content.
func TestResentSpanKeepsJoinedContent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(d *driver)
	}{
		{name: "span waited for its content", first: func(d *driver) {
			require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "chat", parent: "agent", kept: true}))
			require.Equal(t, ContentJoined, d.m.AddContent(testTrace, idOf("chat"), fakeContent("prompt"), nil))
			d.deliver(d.m.TakeReady())
		}},
		{name: "content waited for its span", first: func(d *driver) {
			require.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf("chat"), fakeContent("prompt"), nil))
			require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "chat", parent: "agent", kept: true}))
		}},
		{name: "span held for its parent gathered its content", first: func(d *driver) {
			require.NoError(t, d.send(sp{name: "chat", parent: "agent", kept: true}))
			require.Equal(t, ContentJoined, d.m.AddContent(testTrace, idOf("chat"), fakeContent("prompt"), nil))
			require.NoError(t, d.send(sp{name: "agent", kept: true}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newJoinDriver(t)
			tc.first(d)
			d.advance(8 * time.Second)
			require.NoError(t, d.send(sp{name: "chat", parent: "agent", kept: true}))
			assert.Zero(t, d.m.HeldSpans(), "the copy sent again waits for no content")
			assert.Equal(t, []string{"prompt", "prompt"}, d.contentOfCopies("chat"))
			checkCounts(t, d.m)
		})
	}
}

// The content is remembered as long as the trace (remember_duration after its last span), and
// counted in the budget until then.
func TestJoinedContentRememberedForRememberDuration(t *testing.T) {
	d := newJoinDriver(t)
	require.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf("chat"), fakeContent("prompt"), nil))
	require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "chat", parent: "agent", kept: true}))
	withContent := d.m.Bytes()
	d.advance(time.Minute) // idle past remember_duration: the trace is forgotten
	assert.Zero(t, d.m.Bytes())
	assert.Positive(t, withContent)
	require.NoError(t, d.send(sp{name: "chat", parent: "agent", kept: true}))
	d.advance(10 * time.Second)
	assert.Equal(t, []string{"prompt", ""}, d.contentOfCopies("chat"), "a copy after the trace was forgotten is a new span")
	checkCounts(t, d.m)
}

// Content joined in a call whose journal write fails is not remembered as joined: it waits again
// for the client's resend, which joins it once.
func TestRefusedCallDoesNotRememberContent(t *testing.T) {
	d := newJoinDriver(t)
	require.Equal(t, ContentWaiting, d.m.AddContent(testTrace, idOf("chat"), fakeContent("prompt"), nil))
	d.journal.setFail(true)
	require.Error(t, d.send(sp{name: "chat", parent: "agent", kept: true}))
	d.journal.setFail(false)
	require.NoError(t, d.send(sp{name: "agent", kept: true}, sp{name: "chat", parent: "agent", kept: true}))
	d.shutdown()
	var attrs []ptrace.Span
	d.mu.Lock()
	for _, s := range d.delivered {
		if s.Name() == "chat" {
			attrs = append(attrs, s)
		}
	}
	d.mu.Unlock()
	require.Len(t, attrs, 1)
	v, _ := attrs[0].Attributes().Get("content")
	assert.Equal(t, "prompt", v.AsString())
	checkCounts(t, d.m)
}
