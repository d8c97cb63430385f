package svcfilestorageextension

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// An exporter's persistent queue (exporterhelper) keeps each item under its index in decimal
// ("0", "1", ...) and its metadata under "qmv0", in the one bucket of the component's bbolt
// file, and writes the metadata in every transaction: when an item is queued, read and done.
// bbolt rewrites a leaf whole when any key of it changes, and never splits a leaf of four keys
// or fewer: with a few items queued (the usual state of a queue that keeps up), the metadata
// shares a leaf with every queued item, and each of the three writes of an item rewrites all the
// queued items' bytes (measured with the distribution's config at 12,000 spans/s: ~10 times the
// bytes queued written to disk, where spans of ~190 KB gzip each are queued).
//
// leafSpacers are keys that sort between the items (digits) and the metadata, so that a leaf
// holding items can split from the metadata's: reading an item then writes only the metadata's
// small leaf, and queueing one rewrites only the items that share its leaf. They hold no data,
// nothing reads them, and a release without them ignores them (the queue never lists keys).
var leafSpacers = func() []string {
	keys := make([]string, 4) // more than bbolt's 2*MinKeysPerPage with the metadata key
	for i := range keys {
		keys[i] = fmt.Sprintf(":svc-leaf-spacer-%d", i) // ':' sorts right after '9'
	}
	return keys
}()

// addLeafSpacers writes the spacers into an exporter's storage if it does not have them yet.
func addLeafSpacers(ctx context.Context, client storage.Client) error {
	last, err := client.Get(ctx, leafSpacers[len(leafSpacers)-1])
	if err != nil || last != nil {
		return err
	}
	ops := make([]*storage.Operation, len(leafSpacers))
	for i, k := range leafSpacers {
		ops[i] = storage.SetOperation(k, []byte{0})
	}
	return client.Batch(ctx, ops...)
}
