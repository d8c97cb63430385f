package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
)

// journalStorageName names the processor's client within the storage extension (its file, for
// file_storage), beside the exporters' queue clients in the same extension.
const journalStorageName = "held"

// validateStorage checks the `storage` option: when given it must name an extension.
func validateStorage(id *component.ID) error {
	if id != nil && id.Type().String() == "" {
		return errors.New("storage: name a storage extension, e.g. `storage: file_storage/queue`")
	}
	return nil
}

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

// openJournal is the start-time half of crash safety: it acquires the storage client named by
// cfg.Storage and recovers the held state a previous process left (oldest first). Without
// storage it returns journal.Nop and no records. closeJournal releases the client at shutdown.
func openJournal(ctx context.Context, host component.Host, cfg *Config, owner component.ID, logger *zap.Logger) (j journal.Journal, recovered []journal.Record, closeJournal func(context.Context) error, err error) {
	if cfg.Storage == nil {
		return journal.Nop, nil, func(context.Context) error { return nil }, nil
	}
	client, err := storageClient(ctx, host, *cfg.Storage, owner)
	if err != nil {
		return nil, nil, nil, err
	}
	s, recovered, err := journal.Open(ctx, client, logger)
	if err != nil {
		_ = client.Close(ctx)
		return nil, nil, nil, fmt.Errorf("storage: extension %q: recover the held state: %w", *cfg.Storage, err)
	}
	return s, recovered, s.Close, nil
}
