package svcspanfilterprocessor

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/svc/svc-collector/pkg/golden"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// refusingJournal is a journal whose next span appends fail (a full disk), optionally running
// another call while the refused call is being written, as a concurrent request or logs call would
// (staged at that very point: no sleep).
type refusingJournal struct {
	fakeJournal
	refuseSpans int
	// panicSpans: the next span appends panic (a bug in the journal or the storage extension).
	panicSpans int
	during     func()
	// refuseScores: the next appends of held score records fail.
	refuseScores int
}

func (j *refusingJournal) Append(ctx context.Context, kind journal.Kind, heldAt time.Time, md map[string][]string, payload []byte) (uint64, error) {
	if kind == journal.KindSpans && j.panicSpans > 0 {
		j.panicSpans--
		panic("journal bug")
	}
	if kind == outcome.KindScores && j.refuseScores > 0 {
		j.refuseScores--
		return 0, errors.New("disk full")
	}
	if kind == journal.KindSpans && j.refuseSpans > 0 {
		j.refuseSpans--
		if f := j.during; f != nil {
			j.during = nil
			f()
		}
		return 0, errors.New("disk full")
	}
	return j.fakeJournal.Append(ctx, kind, heldAt, md, payload)
}

// refusalFixture is the processor with a journal that can refuse appends, driven without its
// releaser goroutine: the test moves the clock and runs the releaser's rounds.
type refusalFixture struct {
	t       *testing.T
	j       *refusingJournal
	clock   *fakeClock
	sink    *consumertest.TracesSink
	refuse  atomic.Bool // the next consumer refuses (retryably)
	p       *spanFilterProcessor
	proc    processor.Traces
	content plog.Logs // the content records of the golden call (inputs and choice)
}

func newRefusalFixture(t *testing.T, j *refusingJournal) *refusalFixture {
	f := &refusalFixture{t: t, j: j, clock: &fakeClock{now: time.Unix(1_763_899_200, 0)}, sink: new(consumertest.TracesSink)}
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		if f.refuse.Load() {
			return errors.New("exporter queue is full")
		}
		return f.sink.ConsumeTraces(ctx, td)
	})
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	set := processortest.NewNopSettings(metadata.Type)
	var jj journal.Journal = journal.Nop // nil: no storage
	if j != nil {
		jj = j
	}
	f.p, err = newSpanFilterProcessor(set, cfg, next, jj)
	require.NoError(t, err)
	f.p.now = f.clock.Now
	f.p.running.Store(true)
	f.proc, err = processorhelper.NewTraces(context.Background(), set, cfg, next, f.p.processTraces,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
	require.NoError(t, err)
	f.content = golden.ReadLogs(t, filepath.Join("internal", "genaicontent", "testdata", joinCase, "logs.json"))
	return f
}

// chatCall is the golden inference span whose content comes as log records (a content candidate),
// with extra spans in the same batch.
func (f *refusalFixture) chatCall(extra ...testSpan) ptrace.Traces {
	td := golden.ReadTraces(f.t, filepath.Join("internal", "genaicontent", "testdata", joinCase, "span.json"))
	if len(extra) > 0 {
		batch(extra...).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	return td
}

func (f *refusalFixture) send(td ptrace.Traces) error {
	return f.proc.ConsumeTraces(context.Background(), td)
}

func (f *refusalFixture) addContent() {
	ld := plog.NewLogs()
	f.content.CopyTo(ld)
	require.NoError(f.t, f.p.AddContent(context.Background(), ld))
}

// releaser runs one round of the releaser after d.
func (f *refusalFixture) releaser(d time.Duration) {
	f.clock.Advance(d)
	f.p.mem.Expire()
	f.p.deliverReady(context.Background(), false)
}

// delivered is every span that reached the next consumer, by name; a span delivered twice fails.
func (f *refusalFixture) delivered() map[string]ptrace.Span {
	out := map[string]ptrace.Span{}
	for _, td := range f.sink.AllTraces() {
		forEachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, s ptrace.Span) {
			_, dup := out[s.Name()]
			assert.False(f.t, dup, "span %q was delivered twice", s.Name())
			out[s.Name()] = s
		})
	}
	return out
}

// assertChatWithContent: the chat span reached the platform once, carrying its prompt and answer.
func (f *refusalFixture) assertChatWithContent(spans map[string]ptrace.Span) {
	chat, ok := spans["chat gpt-4o"]
	require.True(f.t, ok, "the chat span was delivered")
	in, _ := chat.Attributes().Get("gen_ai.input.messages")
	out, _ := chat.Attributes().Get("gen_ai.output.messages")
	assert.Contains(f.t, in.Str(), "lookup_order", "the prompt is on the span")
	assert.Contains(f.t, out.Str(), "Order A-1042 has shipped.", "the answer is on the span")
}

// Another call (its content records arriving, or its parent in a concurrent request) while a call
// is being written sees nothing of it: when the write fails, the call is refused, nothing of it
// went on, and the client's resend goes on once, with its content.
func TestCallBeingWrittenIsNotReleasedByAnotherCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		// held is the refused call; during runs while it waits for its append.
		held   func(f *refusalFixture) ptrace.Traces
		during func(f *refusalFixture)
		want   []string
	}{
		{
			name: "its content arrives",
			held: func(f *refusalFixture) ptrace.Traces { return f.chatCall() },
			during: func(f *refusalFixture) {
				f.addContent() // complete: the chat span would go on at once
			},
			want: []string{"chat gpt-4o"},
		},
		{
			name: "its parent arrives in a concurrent request",
			held: func(*refusalFixture) ptrace.Traces {
				return batch(testSpan{name: "chat", scope: scopeSDK, parent: "agent"})
			},
			during: func(f *refusalFixture) {
				require.NoError(f.t, f.send(batch(testSpan{name: "agent", scope: scopeSDK})))
			},
			want: []string{"agent", "chat"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRefusalFixture(t, &refusingJournal{refuseSpans: 1})
			f.j.during = func() { tc.during(f) }
			td := tc.held(f)
			resend := cloneTraces(td)
			err := f.send(td)
			require.Error(t, err, "the append failed: the call is refused")
			assert.False(t, consumererror.IsPermanent(err), "retryably")
			f.releaser(0)

			require.NoError(t, f.send(resend), "the client sends the call again")
			f.releaser(0)
			f.releaser(time.Minute) // every wait is over

			spans := f.delivered()
			assert.ElementsMatch(t, tc.want, keys(spans))
			if _, ok := spans["chat gpt-4o"]; ok {
				f.assertChatWithContent(spans)
			}
			if chat, ok := spans["chat"]; ok {
				assert.Equal(t, idOf("agent"), chat.ParentSpanID())
			}
			assert.Zero(t, f.p.mem.HeldSpans())
			assert.Empty(t, spanRecords(&f.j.fakeJournal), "every span record is removed once handed on")
		})
	}
}

// A refused call (its write failed) delivers nothing of its own: the waiting content it would have
// joined still waits for the client's resend, which joins it; the platform, which keeps the last
// copy of a span id, never gets a copy without the content.
func TestRefusedCallDeliversNothingOfItsOwn(t *testing.T) {
	for _, tc := range []struct {
		name string
		// refusing: the next consumer refuses while the call is made (a call that holds nothing
		// hands its spans on before its journal write, and writes only what was refused).
		refusing bool
		extra    []testSpan
		// contentBetween: the content comes after the refusal, before the resend (else first).
		contentBetween bool
	}{
		{name: "joined content, the call also holds a span", extra: []testSpan{{name: "tool", scope: scopeSDK, parent: "not yet"}}},
		{name: "joined content, handed on first and refused", refusing: true},
		{name: "content arrives between the refusal and the resend", contentBetween: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRefusalFixture(t, &refusingJournal{})
			if !tc.contentBetween {
				f.addContent() // the content comes first and waits for its span
			}
			td := f.chatCall(tc.extra...)
			resend := cloneTraces(td)
			f.j.refuseSpans = 1
			f.refuse.Store(tc.refusing)
			err := f.send(td)
			require.Error(t, err, "the append failed: the call is refused")
			f.refuse.Store(false)
			f.releaser(0)
			assert.Zero(t, f.sink.SpanCount(), "nothing of the refused call went on")
			if tc.contentBetween {
				f.addContent() // the refused span is not seen yet: its content waits for the resend
			}

			require.NoError(t, f.send(resend), "the client sends the call again")
			f.releaser(0)
			f.releaser(time.Minute) // the held tool goes on by rule 1, any content wait is over
			spans := f.delivered()
			f.assertChatWithContent(spans)
			assert.Len(t, spans, 1+len(tc.extra))
			assert.Empty(t, spanRecords(&f.j.fakeJournal), "every span record is removed once handed on")
			assert.Empty(t, kindRecords(&f.j.fakeJournal, journal.KindContent), "the content record is removed once joined and handed on")
		})
	}
}

// The connector span of a refused call is not delivered; its parent stays open (in memory and in
// the journal), so the resend makes the connector, also after a crash between the refusal and the
// resend.
func TestConnectorOfRefusedCallComesWithTheResend(t *testing.T) {
	for _, crash := range []bool{false, true} {
		name := "resend to the same process"
		if crash {
			name = "the process dies before the resend"
		}
		t.Run(name, func(t *testing.T) {
			f := newRefusalFixture(t, &refusingJournal{})
			require.NoError(t, f.send(batch(testSpan{name: "chat", scope: scopeSDK, parent: "tool http"})))
			f.releaser(time.Minute) // chat goes on by rule 1: "tool http" is an open parent
			require.Contains(t, openParents(&f.j.fakeJournal), idOf("tool http"))

			// The open parent ends, dropped, in a call that also holds a span; its append fails.
			td := batch(testSpan{name: "tool http", scope: scopeHTTPClient, parent: "agent"},
				testSpan{name: "retry", scope: scopeSDK, parent: "not yet"})
			resend := cloneTraces(td)
			f.j.refuseSpans = 1
			require.Error(t, f.send(td))
			if !crash {
				f.releaser(0)
				assert.NotContains(t, f.delivered(), "tool http", "the refused call's connector is not delivered")
			}
			assert.Contains(t, openParents(&f.j.fakeJournal), idOf("tool http"), "the open parent stays journaled")

			g := f
			if crash {
				// SIGKILL: a new process recovers the journal; its sink is what reaches the platform next.
				g = newRefusalFixture(t, f.j)
				require.NoError(t, g.p.recoverJournal(f.j.records()))
			}
			require.NoError(t, g.send(resend))
			require.NoError(t, g.send(batch(testSpan{name: "agent", scope: scopeSDK})))
			g.releaser(0)
			g.releaser(time.Minute)
			spans := f.delivered()
			if crash {
				for k, v := range g.delivered() {
					spans[k] = v
				}
			}
			require.Contains(t, spans, "tool http", "the connector reached the platform")
			assert.Equal(t, idOf("tool http"), spans["chat"].ParentSpanID())
			assert.Equal(t, idOf("agent"), spans["tool http"].ParentSpanID())
			_, isConnector := spans["tool http"].Attributes().Get(tracememory.ConnectorAttribute)
			assert.True(t, isConnector)
			assert.ElementsMatch(t, []string{"chat", "tool http", "retry", "agent"}, keys(spans))
		})
	}
}

func kindRecords(fj *fakeJournal, kind journal.Kind) []journal.Record {
	var out []journal.Record
	for _, r := range fj.records() {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// openParents are the span ids of the journal's live open-parent records.
func openParents(fj *fakeJournal) []pcommon.SpanID {
	var out []pcommon.SpanID
	for _, r := range kindRecords(fj, journal.KindOpenParents) {
		for p := r.Payload; len(p) >= 32; p = p[32:] {
			out = append(out, pcommon.SpanID(p[16:24]))
		}
	}
	return out
}

func keys(m map[string]ptrace.Span) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
