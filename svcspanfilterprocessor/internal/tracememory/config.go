package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"time"

	"go.uber.org/zap"
)

// Config of a Memory. Durations and bounds are the processor's trace_integrity options.
type Config struct {
	WaitDuration, MaxWaitDuration, RememberDuration time.Duration
	// LateParentWindow: how long an idle trace keeps its open parents and the records of its dropped
	// spans, so that a late dropped parent still becomes a connector below its nearest kept ancestor.
	LateParentWindow time.Duration
	// ContentWait bounds the wait of a span for its content, and of content for its span.
	ContentWait time.Duration
	MaxTraces   int
	// MemoryLimitBytes bounds records, held spans, ready spans and waiting content together.
	MemoryLimitBytes int64
	ConnectorSpans   bool
	// Journaled: what it may hold is written ahead, open parents and dropped spans after (dropped.go).
	Journaled bool
	Shards    int              // by trace id, each under its own lock (default 32)
	Now       func() time.Time // the clock (tests inject theirs); default time.Now
	Logger    *zap.Logger
}
