package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// journalStorageName names the processor's client within the storage extension (its file, for
// file_storage), beside the exporters' queue clients in the same extension.
const journalStorageName = "held"

// errJournalNotStarted refuses data that arrives before Start opened the storage (retryable).
var errJournalNotStarted = errors.New("storage: the journal of held spans is not open yet")

// newProcessorJournal is journal.Nop without the `storage` option, else a storageJournal that opens
// at Start, when the host's extensions are known (the memory takes its journal before).
func newProcessorJournal(cfg *Config, owner component.ID, logger *zap.Logger) journal.Journal {
	if cfg.Storage == nil {
		return journal.Nop
	}
	return &storageJournal{storageID: *cfg.Storage, owner: owner, logger: logger}
}

// storageJournal is the journal in the storage extension named by the `storage` option.
type storageJournal struct {
	storageID component.ID
	owner     component.ID
	logger    *zap.Logger
	s         atomic.Pointer[journal.Storage] // nil before start and after shutdown
}

// start opens the processor's client in the storage extension, as exporterhelper's persistent queue
// does, and returns what a previous process left (oldest first). Its errors say what to fix.
func (j *storageJournal) start(ctx context.Context, host component.Host) ([]journal.Record, error) {
	ext, found := host.GetExtensions()[j.storageID]
	if !found {
		return nil, fmt.Errorf("storage: extension %q is not running: configure it under `extensions:` "+
			"and list it in `service::extensions`", j.storageID)
	}
	storageExt, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("storage: extension %q is not a storage extension (use file_storage)", j.storageID)
	}
	client, err := storageExt.GetClient(ctx, component.KindProcessor, j.owner, journalStorageName)
	if err != nil {
		return nil, fmt.Errorf("storage: extension %q cannot open the processor's storage (is its directory "+
			"writable, with free space?): %w", j.storageID, err)
	}
	s, recovered, err := journal.Open(ctx, client, j.logger)
	if err != nil {
		_ = client.Close(ctx)
		return nil, fmt.Errorf("storage: extension %q: recover the held state: %w", j.storageID, err)
	}
	j.s.Store(s)
	return recovered, nil
}

// shutdown releases the storage client; what the journal still holds is recovered at the next start.
func (j *storageJournal) shutdown(ctx context.Context) error {
	if s := j.s.Swap(nil); s != nil {
		return s.Close(ctx)
	}
	return nil
}

func (j *storageJournal) Append(ctx context.Context, kind journal.Kind, heldAt time.Time, metadata map[string][]string, payload []byte) (uint64, error) {
	if s := j.s.Load(); s != nil {
		return s.Append(ctx, kind, heldAt, metadata, payload)
	}
	return 0, errJournalNotStarted
}

func (j *storageJournal) Remove(ctx context.Context, ids ...uint64) error {
	if s := j.s.Load(); s != nil {
		return s.Remove(ctx, ids...)
	}
	return errJournalNotStarted
}
