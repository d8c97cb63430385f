package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Content is GenAI content waiting for its span; the content join defines the concrete type.
type Content interface {
	Size() int64    // estimated memory, counted in the budget
	Records() int   // log records it holds (what the unmatched count counts)
	Tenant() string // TenantOf its logs request: it joins only spans of that tenant
}

// Join is the content join's hook, called under a shard lock (but ScopeAwaitsContent): pure and quick.
type Join interface {
	ScopeAwaitsContent(scope pcommon.InstrumentationScope) bool // spans of scope may wait for content
	AwaitsContent(span ptrace.Span) bool                        // a kept span of such a scope waits
	Complete(content []Content) bool                            // the pieces are all a span needs
	// Apply joins every piece gathered for span, once; false when the span keeps its own (precedence).
	Apply(span ptrace.Span, content []Content) bool
}

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

// AddContent gives content for span (traceID, spanID) to the memory; ref, its journal record (or
// nil), is done when the content is joined or discarded.
func (m *Memory) AddContent(traceID pcommon.TraceID, spanID pcommon.SpanID, c Content, ref *RecordRef) ContentOutcome {
	now := m.cfg.Now()
	var out released
	outcome := ContentWaiting
	wc := waitingContent{content: c, at: now, ref: ref}
	sh := m.shards[m.shardOf(traceID)]
	sh.mu.Lock()
	t := sh.touch(m, traceID, now)
	it := t.held[spanID]
	rec, seen := t.records[spanID]
	switch {
	case it != nil && it.tenant() == c.Tenant():
		// Held: it gathers the pieces (a call's input often comes a logs batch before its output).
		it.content = append(it.content, wc)
		m.addBytes(t, wc.bytes())
		if it.reason&WaitContent != 0 && m.join.Complete(contentsOf(it.content)) {
			sh.endWaits(m, it, WaitContent, now, ReleaseContent, &out)
		}
		if it.reason&WaitContent == 0 { // its record is done when the gathered content is joined
			outcome = ContentJoined
		}
	case it == nil && !seen:
		sh.setContent(t, spanID, append(t.content[spanID], wc))
		m.addBytes(t, wc.bytes())
	default: // held for another tenant, dropped (also gone on as a connector), or gone on: discarded
		outcome = ContentDiscarded
		why := UnmatchedSpanDropped
		if it != nil {
			why = UnmatchedOtherTenant
		} else if rec.state == stateKept {
			why = UnmatchedSpanGone
		}
		out.stats.ContentUnmatched[why] += int64(c.Records())
		out.done = append(out.done, ref)
	}
	sh.unlock(m)
	m.finish(&out)
	m.Enforce()
	return outcome
}

// apply joins cs onto span and remembers own for a copy of it sent again (in the budget until the
// trace is forgotten or compacted); when the span keeps its own content, own counts unmatched.
func (m *Memory) apply(t *trace, span ptrace.Span, cs, own []waitingContent, out *released) {
	if !m.join.Apply(span, contentsOf(cs)) {
		out.stats.ContentUnmatched[UnmatchedSpanHasContent] += sumOf(own, waitingContent.records)
		return
	}
	out.stats.ContentJoined++
	for _, c := range own { // the map is made only for content to remember
		joined := made(&t.keepRefs().joined)
		joined[span.SpanID()] = append(joined[span.SpanID()], waitingContent{content: c.content})
		m.addBytes(t, c.bytes())
	}
}

// setContent makes cs the content waiting for span id of t (its bytes are the caller's to count).
func (sh *shard) setContent(t *trace, id pcommon.SpanID, cs []waitingContent) {
	made(&t.content)[id] = cs
	sh.withContent[t] = struct{}{}
}

// ownContent is cs's content with tenant's credentials (usually cs); the rest is discarded in out.
func ownContent(cs []waitingContent, tenant string, out *released) []waitingContent {
	foreign := func(c waitingContent) bool { return c.content.Tenant() != tenant }
	if !slices.ContainsFunc(cs, foreign) {
		return cs
	}
	if out != nil {
		gone := slices.DeleteFunc(slices.Clone(cs), func(c waitingContent) bool { return !foreign(c) })
		out.stats.ContentUnmatched[UnmatchedOtherTenant] += sumOf(gone, waitingContent.records)
		out.done = append(out.done, refsOf(gone)...)
	}
	return slices.DeleteFunc(slices.Clone(cs), foreign)
}

func (sh *shard) dropContent(m *Memory, t *trace, id pcommon.SpanID, cs []waitingContent, why UnmatchedReason, out *released) {
	out.stats.ContentUnmatched[why] += sumOf(cs, waitingContent.records)
	out.done = append(out.done, refsOf(cs)...) // after the shard lock: Done writes to the journal
	sh.removeContent(m, t, id, cs)
}

// removeContent takes content out of the trace; its journal records are the caller's to finish.
func (sh *shard) removeContent(m *Memory, t *trace, id pcommon.SpanID, cs []waitingContent) {
	m.addBytes(t, -sumOf(cs, waitingContent.bytes))
	delete(t.content, id)
	if len(t.content) == 0 {
		delete(sh.withContent, t)
	}
}

func (c waitingContent) bytes() int64   { return c.content.Size() + contentCost }
func (c waitingContent) records() int64 { return int64(c.content.Records()) }

// sumOf sums f (waitingContent.bytes or records) over cs.
func sumOf(cs []waitingContent, f func(waitingContent) int64) (n int64) {
	for _, c := range cs {
		n += f(c)
	}
	return n
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

func contentsOf(cs []waitingContent) []Content {
	out := make([]Content, len(cs))
	for i, c := range cs {
		out[i] = c.content
	}
	return out
}
