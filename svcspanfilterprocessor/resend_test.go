package svcspanfilterprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A client exports the same chat span and its content log records again 8 seconds later (an SDK
// retrying after a timeout): every copy that reaches the next component carries the input and
// output joined onto the first, so the platform's last copy is never one without them.
func TestResentChatSpanKeepsItsContent(t *testing.T) {
	for _, storage := range []bool{false, true} {
		t.Run(map[bool]string{false: "without storage", true: "with storage"}[storage], func(t *testing.T) {
			var j *refusingJournal
			if storage {
				j = &refusingJournal{}
			}
			f := newRefusalFixture(t, j)
			td := f.chatCall()
			resend := cloneTraces(td)
			require.NoError(t, f.send(td))
			f.addContent()
			f.releaser(0)
			f.releaser(8 * time.Second)
			f.addContent() // the records come again too, before or after the span
			require.NoError(t, f.send(resend))
			f.releaser(0)
			f.releaser(time.Minute)

			var copies []ptrace.Span
			for _, td := range f.sink.AllTraces() {
				forEachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, s ptrace.Span) {
					if s.Name() == "chat gpt-4o" {
						copies = append(copies, s)
					}
				})
			}
			require.Len(t, copies, 2)
			for _, c := range copies {
				in, _ := c.Attributes().Get("gen_ai.input.messages")
				out, _ := c.Attributes().Get("gen_ai.output.messages")
				assert.Contains(t, in.Str(), "lookup_order", "the prompt is on every copy")
				assert.Contains(t, out.Str(), "Order A-1042 has shipped.", "the answer is on every copy")
			}
		})
	}
}
