// Package journal is the durable record of what the span filter acknowledged and still holds, so that
// a restart (or SIGKILL) does not lose it. This file is the contract; storage.go implements it.
package journal // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/client"
)

// Kind of a journal record, and the layout of its payload (ids are bytes, the span ids 8).
type Kind uint8

const (
	KindSpans   Kind = 1 // ptrace proto (ptrace.ProtoMarshaler) of the held spans of one call
	KindContent Kind = 2 // plog proto of the content log records absorbed by one logs call
	KindOpen    Kind = 3 // open parents as v0.1.0 wrote them (read only): trace id, span id
	// KindDropped: dropped spans, so that a kept span arriving after a restart finds its nearest kept
	// ancestor: trace id, span id, parent span id (zero for a root), 1 if it went on as a connector, else 0.
	KindDropped Kind = 4
	// KindOpenParents: unseen parents delivered spans point at (after a restart still bridged by a
	// connector, a parent closing a cycle still cut): trace id, span id, a span that went on below it.
	KindOpenParents Kind = 5
	// Kinds 6 to MaxKind are internal/outcome's.
	MaxKind Kind = 8
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

// Nop is the journal when no storage is configured: nil, so a call its users did not guard fails loudly.
var Nop Journal

// Metadata is the client metadata of a request, as the journal keeps it.
func Metadata(info client.Info) map[string][]string {
	var md map[string][]string
	for k := range info.Metadata.Keys() {
		if md == nil {
			md = map[string][]string{}
		}
		md[k] = info.Metadata.Get(k)
	}
	return md
}
