package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Content is GenAI content waiting for its span (issue 18); the content join defines the concrete
// type. Size is its estimated memory, counted in the budget; Records the log records it holds
// (what the unmatched count counts).
type Content interface {
	Size() int64
	Records() int
	// Tenant is TenantOf the logs request the content came in: it joins only spans of that tenant.
	Tenant() string
}

// Join is the content join's hook into the memory. Its methods are called under a shard lock (all
// but ScopeAwaitsContent) and on every batch: they must be pure and quick (no I/O, no locks).
type Join interface {
	// ScopeAwaitsContent reports whether any span of scope may wait for its content: asked once per
	// scope of a batch, so that AwaitsContent runs only for the spans of such scopes.
	ScopeAwaitsContent(scope pcommon.InstrumentationScope) bool
	// AwaitsContent reports whether a kept span without waiting content, of a scope for which
	// ScopeAwaitsContent holds, should be held until its content arrives (or ContentWait ends).
	AwaitsContent(span ptrace.Span) bool
	// Complete reports whether content (every piece that arrived for one span) is all a waiting span
	// needs: the call's output arrived. A span waiting for content gathers pieces until then.
	Complete(content []Content) bool
	// Apply joins content to its span, once: every piece gathered for it. It reports false when the
	// span keeps its own content instead (precedence): the records are then counted unmatched.
	Apply(span ptrace.Span, content []Content) bool
}

type noJoin struct{}

func (noJoin) ScopeAwaitsContent(pcommon.InstrumentationScope) bool { return false }
func (noJoin) AwaitsContent(ptrace.Span) bool                       { return false }
func (noJoin) Complete([]Content) bool                              { return true }
func (noJoin) Apply(ptrace.Span, []Content) bool                    { panic("tracememory: no content join") }

type waitingContent struct {
	content Content
	at      time.Time // its wait (ContentWait) started
	ref     *RecordRef
}

// ContentOutcome is what AddContent did with content.
type ContentOutcome uint8

const (
	ContentJoined    ContentOutcome = iota // its span was held waiting for it: joined, maybe released
	ContentWaiting                         // kept until its span arrives or ContentWait ends
	ContentDiscarded                       // its span was dropped or already went on
)

// recordsOf is the number of log records in cs.
func recordsOf(cs []waitingContent) int64 {
	var n int64
	for _, c := range cs {
		n += int64(c.content.Records())
	}
	return n
}

// applyContent joins cs onto span and counts the outcome.
func (m *Memory) applyContent(span ptrace.Span, cs []waitingContent, out *released) bool {
	if len(cs) == 0 {
		return false
	}
	if m.join.Apply(span, contentsOf(cs)) {
		out.stats.ContentJoined++
		return true
	}
	out.stats.ContentUnmatched[UnmatchedSpanHasContent] += recordsOf(cs)
	return false
}

// contentWaitEnded ends the content wait of a held span and records how long it waited.
func (it *item) contentWaitEnded(now time.Time, out *released) {
	it.reason &^= WaitContent
	out.stats.ContentWaits = append(out.stats.ContentWaits, now.Sub(it.heldAt))
}

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
	_, seen := t.records[spanID]
	switch it := t.held[spanID]; {
	case it != nil && it.tenant() != c.Tenant():
		outcome = ContentDiscarded
		out.stats.ContentUnmatched[UnmatchedOtherTenant] += int64(c.Records())
	case it != nil:
		// Held (for its content or its parent): not delivered yet. It gathers the pieces (the input
		// of a call often comes in an earlier logs batch than its output); they are joined when it
		// is released. A span waiting for its content goes once the content is complete.
		it.content = append(it.content, waitingContent{content: c, at: now, ref: ref})
		m.addBytes(t, c.Size()+contentCost)
		ref = nil // done when the gathered content is joined
		outcome = ContentJoined
		if it.reason&WaitContent != 0 {
			if m.join.Complete(it.contents()) {
				it.contentWaitEnded(now, &out)
				if it.reason == 0 {
					sh.release(m, t, it, ReleaseContent, &out)
				}
			} else {
				outcome = ContentWaiting
			}
		}
	case seen:
		// Dropped, or already gone on: too late.
		outcome = ContentDiscarded
		why := UnmatchedSpanDropped // also when it went on as a connector span
		if t.records[spanID].state == stateKept {
			why = UnmatchedSpanGone
		}
		out.stats.ContentUnmatched[why] += int64(c.Records())
	default:
		if t.content == nil {
			t.content = map[pcommon.SpanID][]waitingContent{}
		}
		t.content[spanID] = append(t.content[spanID], waitingContent{content: c, at: now, ref: ref})
		m.addBytes(t, c.Size()+contentCost)
		sh.withContent[t] = struct{}{}
	}
	sh.unlock(m)
	if outcome != ContentWaiting {
		ref.Done(1)
	}
	m.finish(&out)
	m.Enforce()
	return outcome
}

// joinWaitingContent joins the content waiting for a kept span that just arrived and returns the
// content's journal records: the caller attaches them to the span, done when it is handed on.
// The content joined onto an earlier copy of the span (sent again) is joined with it.
func (sh *shard) joinWaitingContent(m *Memory, t *trace, span ptrace.Span, tenant string, out *released) []*RecordRef {
	id := span.SpanID()
	cs := t.content[id]
	own := ownContent(cs, tenant, out)
	before := ownContent(t.joinedOf(id), tenant, nil)
	if len(own)+len(before) == 0 {
		sh.removeContent(m, t, id, cs)
		return refsOf(cs)
	}
	if m.join.Apply(span, contentsOf(append(append([]waitingContent(nil), before...), own...))) {
		out.stats.ContentJoined++
		sh.removeContent(m, t, id, cs)
		sh.rememberJoined(m, t, id, own)
	} else {
		out.stats.ContentUnmatched[UnmatchedSpanHasContent] += recordsOf(own)
		sh.removeContent(m, t, id, cs)
	}
	return refsOf(cs)
}

// rememberJoined keeps cs, just joined onto span id, for a copy of the span sent again (counted
// in the budget until the trace is forgotten or compacted).
func (sh *shard) rememberJoined(m *Memory, t *trace, id pcommon.SpanID, cs []waitingContent) {
	if len(cs) == 0 {
		return
	}
	r := t.keepRefs()
	if r.joined == nil {
		r.joined = map[pcommon.SpanID][]waitingContent{}
	}
	for _, c := range cs {
		r.joined[id] = append(r.joined[id], waitingContent{content: c.content})
		m.addBytes(t, c.content.Size()+contentCost)
	}
}

// forgetJoined forgets the content remembered as joined onto span id (its trace is compacted).
func (sh *shard) forgetJoined(m *Memory, t *trace, id pcommon.SpanID) {
	for _, j := range t.joinedOf(id) {
		m.addBytes(t, -(j.content.Size() + contentCost))
	}
	if t.refs != nil {
		if delete(t.refs.joined, id); len(t.refs.joined) == 0 {
			t.refs.joined = nil
		}
	}
}

func refsOf(cs []waitingContent) []*RecordRef {
	refs := make([]*RecordRef, 0, len(cs))
	for _, c := range cs {
		if c.ref != nil {
			refs = append(refs, c.ref)
		}
	}
	return refs
}

// takeWaitingContent moves the content waiting for a span that arrived into the held item that
// waits for the rest of it (its bytes stay counted).
func (sh *shard) takeWaitingContent(m *Memory, t *trace, it *item, out *released) {
	id := it.span.SpanID()
	cs := t.content[id]
	own := ownContent(cs, it.tenant(), out)
	for _, c := range cs {
		if c.content.Tenant() != it.tenant() {
			m.addBytes(t, -(c.content.Size() + contentCost))
			out.done = append(out.done, refsOf([]waitingContent{c})...)
		}
	}
	it.content = append(it.content, own...)
	delete(t.content, id)
	if len(t.content) == 0 {
		delete(sh.withContent, t)
	}
}

// joinHeldContent joins the content a held span gathered (complete, or its wait ended). The span
// grows by what was joined: its size is estimated again, so that the budget keeps counting the
// content once it is on the span (held, then ready until the next consumer takes it).
func (sh *shard) joinHeldContent(m *Memory, t *trace, it *item, out *released) {
	if len(it.content) == 0 {
		return
	}
	if m.applyContent(it.span, it.content, out) {
		sh.rememberJoined(m, t, it.span.SpanID(), it.content)
	}
	for _, c := range it.content {
		m.addBytes(t, -(c.content.Size() + contentCost))
	}
	sh.resize(m, it, itemSize(it.span))
	it.contentRefs = append(it.contentRefs, refsOf(it.content)...) // done when it is delivered
	it.content = nil
}

// returnHeldContent puts the content a held span gathered back among the trace's waiting content
// (the held copy is discarded: a copy sent again, or a refused journal append, brings the span back).
func (sh *shard) returnHeldContent(t *trace, it *item) {
	if len(it.content) == 0 {
		return
	}
	if t.content == nil {
		t.content = map[pcommon.SpanID][]waitingContent{}
	}
	id := it.span.SpanID()
	t.content[id] = append(it.content, t.content[id]...)
	sh.withContent[t] = struct{}{}
	it.content = nil
}

// ownContent is the content of cs that came with tenant's credentials; the rest is counted
// unmatched (other_tenant) in out, when out is not nil. It returns cs itself when all of it is
// the tenant's (the usual case).
func ownContent(cs []waitingContent, tenant string, out *released) []waitingContent {
	foreign := 0
	for _, c := range cs {
		if c.content.Tenant() != tenant {
			foreign++
			if out != nil {
				out.stats.ContentUnmatched[UnmatchedOtherTenant] += int64(c.content.Records())
			}
		}
	}
	if foreign == 0 {
		return cs
	}
	own := make([]waitingContent, 0, len(cs)-foreign)
	for _, c := range cs {
		if c.content.Tenant() == tenant {
			own = append(own, c)
		}
	}
	return own
}

func contentsOf(cs []waitingContent) []Content {
	out := make([]Content, len(cs))
	for i, c := range cs {
		out[i] = c.content
	}
	return out
}

func (sh *shard) dropContent(m *Memory, t *trace, id pcommon.SpanID, cs []waitingContent, why UnmatchedReason, out *released) {
	out.stats.ContentUnmatched[why] += recordsOf(cs)
	out.done = append(out.done, refsOf(cs)...) // after the shard lock: Done writes to the journal
	sh.removeContent(m, t, id, cs)
}

// removeContent takes content out of the trace; its journal records are the caller's to finish.
func (sh *shard) removeContent(m *Memory, t *trace, id pcommon.SpanID, cs []waitingContent) {
	for _, c := range cs {
		m.addBytes(t, -(c.content.Size() + contentCost))
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
		sh.dropContent(m, t, id, gone, UnmatchedNoSpan, out)
		if len(keep) > 0 {
			t.content[id] = keep
			sh.withContent[t] = struct{}{}
		}
	}
}
