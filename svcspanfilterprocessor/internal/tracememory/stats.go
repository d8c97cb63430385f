package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

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

	NumReparentReasons
)

func (r ReparentReason) String() string {
	return [...]string{"dropped_parent", "no_kept_ancestor", "open_ancestor"}[r]
}

// Stats are the events of one memory operation, handed to the Observer outside the locks.
type Stats struct {
	Released   [NumReleaseReasons]int64
	Reparented [NumReparentReasons]int64
	// Evicted counts traces evicted (forgotten or whose held spans were released) by reason.
	Evicted [NumEvictReasons]int64
	// EvictedWaiting counts the evicted traces that held spans (they went on early).
	EvictedWaiting   int64
	Connectors       int64
	ContentDiscarded int64
}

func (s *Stats) add(o *Stats) {
	for i := range s.Released {
		s.Released[i] += o.Released[i]
	}
	for i := range s.Reparented {
		s.Reparented[i] += o.Reparented[i]
	}
	for i := range s.Evicted {
		s.Evicted[i] += o.Evicted[i]
	}
	s.EvictedWaiting += o.EvictedWaiting
	s.Connectors += o.Connectors
	s.ContentDiscarded += o.ContentDiscarded
}

func (s *Stats) empty() bool { return *s == Stats{} }

// Observer receives the Stats of every operation that had events.
type Observer func(*Stats)
