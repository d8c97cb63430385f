// Package journal is the durable record of what the span filter acknowledged and still holds, so that
// a restart (or SIGKILL) does not lose it. This file is the contract; storage.go implements it.
package journal // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"

import (
	"context"
	"time"
)

// Kind of a journal record.
type Kind uint8

const (
	KindSpans   Kind = 1 // payload: ptrace proto (ptrace.ProtoMarshaler) of the held spans of one call
	KindContent Kind = 2 // payload: plog proto of the content log records absorbed by one logs call
	// KindOpen: open parents as v0.1.0 wrote them (read only): 24 bytes each, trace id and span id.
	KindOpen Kind = 3
	// KindDropped: dropped spans, so that a kept span arriving after a restart still finds its
	// nearest kept ancestor. 33 bytes per span: its trace id, span id, parent span id (zero for a
	// root), then 1 when it went on as a connector span (else 0).
	KindDropped Kind = 4
	// KindOpenParents: parents that delivered spans point at and that were not seen, so that after a
	// restart they are still bridged by a connector span, and a parent closing a cycle is cut. 32
	// bytes per parent: its trace id, span id, then the id of a span that went on pointing at it.
	KindOpenParents Kind = 5
	// KindDecided: traces outcome sampling decided kept, whose spans went on, so that their later
	// spans follow after a restart. Per trace: its trace id, the length of the reason (1 byte),
	// then the reason (the rule's name, experiment, session or sample). HeldAt: the decision's time.
	KindDecided Kind = 6
	// KindSession: a session an outcome rule kept (decide_per: session). Its session key (8 bytes,
	// big endian), then the reason; HeldAt: when it was kept (session_keep_duration runs from it).
	KindSession Kind = 7
	// KindScores: payload: plog proto of the score records of one logs call held for their
	// trace's outcome sampling decision.
	KindScores Kind = 8
)

// Record is one durable record.
type Record struct {
	ID       uint64
	Kind     Kind
	HeldAt   time.Time           // when the processor accepted it (original deadlines resume from it)
	Metadata map[string][]string // client.Info metadata of the request (multi-tenant credentials)
	Payload  []byte
}

// Journal is where held data is made durable before the processor acknowledges it.
type Journal interface {
	// Append makes a record durable and returns its id. An error means nothing was written: the
	// caller must refuse the data with a retryable error.
	Append(ctx context.Context, kind Kind, heldAt time.Time, metadata map[string][]string, payload []byte) (uint64, error)
	// Remove forgets records whose every item has been handed on (or deliberately discarded).
	Remove(ctx context.Context, ids ...uint64) error
}

// Nop is the journal when no storage is configured.
var Nop Journal = nop{}

type nop struct{}

func (nop) Append(context.Context, Kind, time.Time, map[string][]string, []byte) (uint64, error) {
	return 0, nil
}

func (nop) Remove(context.Context, ...uint64) error { return nil }
