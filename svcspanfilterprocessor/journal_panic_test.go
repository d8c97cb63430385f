package svcspanfilterprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A panic in a call's write ahead (a bug in the journal or the storage extension; the HTTP server
// survives a handler's panic) comes before the call changed anything: none of its spans is left
// held, and the client's resend goes on once, with content.
func TestPanicInTheWriteLeavesNothingHeld(t *testing.T) {
	for _, tc := range []struct {
		name         string
		contentFirst bool
	}{
		{name: "span held for its content"},
		{name: "span joined its content, held with another", contentFirst: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRefusalFixture(t, &refusingJournal{panicSpans: 1})
			var extra []testSpan
			if tc.contentFirst {
				f.addContent()
				extra = []testSpan{{name: "tool", scope: scopeSDK, parent: "not yet"}}
			}
			td := f.chatCall(extra...)
			resend := cloneTraces(td)
			assert.PanicsWithValue(t, "journal bug", func() { _ = f.send(td) })
			assert.Zero(t, f.p.mem.HeldSpans(), "the refused call holds nothing")
			if !tc.contentFirst {
				f.addContent()
			}
			f.releaser(0)
			assert.Zero(t, f.sink.SpanCount(), "nothing of the refused call went on")

			require.NoError(t, f.send(resend), "the client sends the call again")
			f.releaser(0)
			f.releaser(time.Minute)
			spans := f.delivered()
			f.assertChatWithContent(spans)
			assert.Len(t, spans, 1+len(extra))
			assert.Empty(t, spanRecords(&f.j.fakeJournal), "every span record is removed once handed on")
		})
	}
}
