package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// journalStorageName names the processor's client within the storage extension (its file, for
// file_storage), beside the exporters' queue clients in the same extension.
const journalStorageName = "held"

// storageClient gets the processor's client from the storage extension the config names, the
// way exporterhelper's persistent queue does. Errors say what to fix: they fail the start.
func storageClient(ctx context.Context, host component.Host, storageID component.ID, owner component.ID) (storage.Client, error) {
	ext, found := host.GetExtensions()[storageID]
	if !found {
		return nil, fmt.Errorf("storage: extension %q is not running: configure it under `extensions:` and list it in `service::extensions`", storageID)
	}
	storageExt, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("storage: extension %q is not a storage extension (use file_storage)", storageID)
	}
	client, err := storageExt.GetClient(ctx, component.KindProcessor, owner, journalStorageName)
	if err != nil {
		return nil, fmt.Errorf("storage: extension %q cannot open the processor's storage (is its directory writable, with free space?): %w", storageID, err)
	}
	return client, nil
}

// newProcessorJournal is the journal the processor is built with: journal.Nop without the
// `storage` option, else a storageJournal that opens at Start, when the host's extensions are
// known (the trace memory takes its journal when it is built, before Start).
func newProcessorJournal(cfg *Config, owner component.ID, logger *zap.Logger) journal.Journal {
	if cfg.Storage == nil {
		return journal.Nop
	}
	return &storageJournal{storageID: *cfg.Storage, owner: owner, logger: logger}
}

// errJournalNotStarted refuses data that arrives before Start opened the storage (retryable).
var errJournalNotStarted = errors.New("storage: the journal of held spans is not open yet")

// storageJournal is the journal in the storage extension named by the `storage` option.
type storageJournal struct {
	storageID component.ID
	owner     component.ID
	logger    *zap.Logger

	mu sync.RWMutex
	s  *journal.Storage
}

var _ journal.Journal = (*storageJournal)(nil)

// start acquires the storage client and recovers the held state a previous process left
// (oldest first), for the processor to re-admit before its first span. An error fails the
// collector's start.
func (j *storageJournal) start(ctx context.Context, host component.Host) ([]journal.Record, error) {
	client, err := storageClient(ctx, host, j.storageID, j.owner)
	if err != nil {
		return nil, err
	}
	s, recovered, err := journal.Open(ctx, client, j.logger)
	if err != nil {
		_ = client.Close(ctx)
		return nil, fmt.Errorf("storage: extension %q: recover the held state: %w", j.storageID, err)
	}
	j.mu.Lock()
	j.s = s
	j.mu.Unlock()
	return recovered, nil
}

// shutdown releases the storage client; what is still in the journal is recovered at the next
// start.
func (j *storageJournal) shutdown(ctx context.Context) error {
	j.mu.Lock()
	s := j.s
	j.s = nil
	j.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Close(ctx)
}

func (j *storageJournal) storage() *journal.Storage {
	j.mu.RLock()
	defer j.mu.RUnlock()
	return j.s
}

func (j *storageJournal) Append(ctx context.Context, kind journal.Kind, heldAt time.Time, metadata map[string][]string, payload []byte) (uint64, error) {
	s := j.storage()
	if s == nil {
		return 0, errJournalNotStarted
	}
	return s.Append(ctx, kind, heldAt, metadata, payload)
}

func (j *storageJournal) Remove(ctx context.Context, ids ...uint64) error {
	s := j.storage()
	if s == nil {
		return errJournalNotStarted
	}
	return s.Remove(ctx, ids...)
}
