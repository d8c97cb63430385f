package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

import (
	"time"

	"go.uber.org/zap"
)

// Config of a Memory. Durations follow the processor's trace_integrity options.
type Config struct {
	// WaitDuration: held spans of a trace go on when the trace received no span for this long.
	WaitDuration time.Duration
	// MaxWaitDuration caps the wait of one held span however busy its trace is.
	MaxWaitDuration time.Duration
	// RememberDuration: how long an idle trace keeps its span records.
	RememberDuration time.Duration
	// LateParentWindow: how long an idle trace keeps its open parents (parents that delivered spans
	// point at and that were not seen yet) and the records of its dropped spans, so that a late
	// dropped parent still becomes a connector below its nearest kept ancestor.
	LateParentWindow time.Duration
	// ContentWait bounds the wait of a span for its content, and of content for its span.
	ContentWait time.Duration
	// MaxTraces bounds the traces in memory.
	MaxTraces int
	// MemoryLimitBytes bounds records, held spans, ready spans and waiting content together.
	MemoryLimitBytes int64
	// ConnectorSpans: a dropped span that delivered spans point at is delivered as a stripped
	// connector span.
	ConnectorSpans bool
	// Journaled: the memory writes to its journal what it may hold (ahead of the call), the open
	// parents and the ids and parents of dropped spans (dropped.go).
	Journaled bool
	// Shards splits the memory by trace id, each shard under its own lock (default 32).
	Shards int
	// Now is the clock (tests inject theirs); default time.Now.
	Now    func() time.Time
	Logger *zap.Logger
}

func (c *Config) setDefaults() {
	if c.Shards <= 0 {
		c.Shards = 32
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.LateParentWindow < c.RememberDuration {
		c.LateParentWindow = c.RememberDuration
	}
}
