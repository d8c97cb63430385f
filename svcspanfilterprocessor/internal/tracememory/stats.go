package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import "time"

// ReleaseReason is why held spans went on.
type ReleaseReason uint8

const (
	ReleaseParentArrived ReleaseReason = iota // the parent (or, through dropped spans, an ancestor) arrived
	ReleaseWaitExpired                        // the trace was idle for wait_duration
	ReleaseMaxWait                            // the span waited max_wait_duration
	ReleaseEvicted                            // the memory limit or max_traces was reached
	ReleaseShutdown                           // the collector stopped
	ReleaseContent                            // its content arrived or its content wait ended
	NumReleaseReasons
)

func (r ReleaseReason) String() string {
	return [...]string{"parent_arrived", "wait_expired", "max_wait", "evicted", "shutdown", "content"}[r]
}

// EvictReason is the bound that made the memory evict a trace.
type EvictReason uint8

const (
	EvictMemoryLimit EvictReason = iota
	EvictMaxTraces
	NumEvictReasons
)

func (r EvictReason) String() string { return [...]string{"memory_limit", "max_traces"}[r] }

// ReparentReason is why a kept span's parent id was changed.
type ReparentReason uint8

const (
	ReparentDroppedParent  ReparentReason = iota // moved to the nearest kept (or connector) ancestor
	ReparentNoKeptAncestor                       // every ancestor is known dropped: made a root
	ReparentOpenAncestor                         // the wait ended at an unknown ancestor above a dropped parent
	ReparentCycle                                // its parent chain led back to it (a hostile tree): made a root
	NumReparentReasons
)

func (r ReparentReason) String() string {
	return [...]string{"dropped_parent", "no_kept_ancestor", "open_ancestor", "cycle"}[r]
}

// UnmatchedReason is why content records were not joined onto their span.
type UnmatchedReason uint8

const (
	UnmatchedSpanDropped    UnmatchedReason = iota // the filter dropped its span
	UnmatchedSpanGone                              // its span had already gone on
	UnmatchedNoSpan                                // it waited ContentWait (or its trace was forgotten) without its span
	UnmatchedSpanHasContent                        // the span carried its own content, which takes precedence
	UnmatchedOtherTenant                           // its span came with another tenant's credentials
	NumUnmatchedReasons
)

func (r UnmatchedReason) String() string {
	return [...]string{"span_dropped", "span_gone", "no_span", "span_has_content", "other_tenant"}[r]
}

// Stats are the events of one memory operation, handed to the observer outside the locks.
type Stats struct {
	Released   [NumReleaseReasons]int64
	Reparented [NumReparentReasons]int64
	// Evicted counts traces evicted; EvictedWaiting those of them that held spans (released early).
	Evicted          [NumEvictReasons]int64
	EvictedWaiting   int64
	Connectors       int64
	ContentJoined    int64 // spans that received joined content
	ContentUnmatched [NumUnmatchedReasons]int64
	ContentWaits     []time.Duration // how long each span held for its content waited
}

// empty reports whether s has no event (every field of Stats belongs here).
func (s *Stats) empty() bool {
	return s.Released == [NumReleaseReasons]int64{} && s.Reparented == [NumReparentReasons]int64{} &&
		s.Evicted == [NumEvictReasons]int64{} && s.EvictedWaiting == 0 && s.Connectors == 0 &&
		s.ContentJoined == 0 && s.ContentUnmatched == [NumUnmatchedReasons]int64{} && len(s.ContentWaits) == 0
}
