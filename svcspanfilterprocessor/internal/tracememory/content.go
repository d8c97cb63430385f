package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Content is GenAI content waiting for its span (issue 18); the content join defines the concrete
// type. Size is its estimated memory, counted in the budget.
type Content interface {
	Size() int64
}

// Join is the content join's hook into the memory. Both methods are called under a shard lock:
// they must be pure and quick (no I/O, no locks).
type Join interface {
	// AwaitsContent reports whether a kept span without waiting content should be held until its
	// content arrives (or ContentWait ends).
	AwaitsContent(span ptrace.Span, scope pcommon.InstrumentationScope) bool
	// Apply joins content to its span.
	Apply(span ptrace.Span, content []Content)
}

type noJoin struct{}

func (noJoin) AwaitsContent(ptrace.Span, pcommon.InstrumentationScope) bool { return false }
func (noJoin) Apply(ptrace.Span, []Content)                                 { panic("tracememory: no content join") }

type waitingContent struct {
	content Content
	at      time.Time
	ref     *RecordRef
}

// ContentOutcome is what AddContent did with content.
type ContentOutcome uint8

const (
	ContentJoined    ContentOutcome = iota // its span was held waiting for it: joined, maybe released
	ContentWaiting                         // kept until its span arrives or ContentWait ends
	ContentDiscarded                       // its span was dropped or already went on
)

// AddContent gives content for span (traceID, spanID) to the memory. ref (may be nil) is the
// journal record it came in; it is marked done when the content is joined or discarded. Spans
// released by the join are queued for the releaser.
func (m *Memory) AddContent(traceID pcommon.TraceID, spanID pcommon.SpanID, c Content, ref *RecordRef) ContentOutcome {
	now := m.cfg.Now()
	var out released
	outcome := ContentWaiting
	sh := m.shards[m.shardOf(traceID)]
	sh.mu.Lock()
	t := sh.touch(m, traceID, now)
	rec, seen := t.records[spanID]
	switch it := t.held[spanID]; {
	case it != nil && it.reason&WaitContent != 0:
		m.join.Apply(it.span, []Content{c})
		it.reason &^= WaitContent
		if it.reason == 0 {
			sh.release(m, t, it, ReleaseContent, &out)
		}
		outcome = ContentJoined
	case seen && (rec.state != stateKept || it == nil):
		outcome = ContentDiscarded
		out.stats.ContentDiscarded++
	default:
		if t.content == nil {
			t.content = map[pcommon.SpanID][]waitingContent{}
		}
		t.content[spanID] = append(t.content[spanID], waitingContent{content: c, at: now, ref: ref})
		m.addBytes(t, c.Size()+contentCost)
		sh.withContent[t] = struct{}{}
	}
	sh.mu.Unlock()
	if outcome != ContentWaiting {
		ref.Done(1)
	}
	m.finish(&out)
	m.Enforce()
	return outcome
}

// joinWaitingContent joins the content waiting for a kept span that just arrived.
func (sh *shard) joinWaitingContent(m *Memory, t *trace, span ptrace.Span, out *released) bool {
	cs, ok := t.content[span.SpanID()]
	if !ok {
		return false
	}
	contents := make([]Content, len(cs))
	for i, c := range cs {
		contents[i] = c.content
	}
	m.join.Apply(span, contents)
	sh.removeContent(m, t, span.SpanID(), cs)
	return true
}

func (sh *shard) dropContent(m *Memory, t *trace, id pcommon.SpanID, cs []waitingContent, out *released) {
	out.stats.ContentDiscarded += int64(len(cs))
	sh.removeContent(m, t, id, cs)
}

func (sh *shard) removeContent(m *Memory, t *trace, id pcommon.SpanID, cs []waitingContent) {
	for _, c := range cs {
		m.addBytes(t, -(c.content.Size() + contentCost))
		c.ref.Done(1)
	}
	delete(t.content, id)
	if len(t.content) == 0 {
		delete(sh.withContent, t)
	}
}

// expireContent discards content that waited ContentWait for its span.
func (sh *shard) expireContent(m *Memory, t *trace, now time.Time, out *released) {
	for id, cs := range t.content {
		keep := cs[:0]
		var gone []waitingContent
		for _, c := range cs {
			if now.Sub(c.at) >= m.cfg.ContentWait {
				gone = append(gone, c)
			} else {
				keep = append(keep, c)
			}
		}
		if len(gone) == 0 {
			continue
		}
		sh.dropContent(m, t, id, gone, out)
		if len(keep) > 0 {
			t.content[id] = keep
			sh.withContent[t] = struct{}{}
		}
	}
}
