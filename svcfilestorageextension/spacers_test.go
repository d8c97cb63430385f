package svcfilestorageextension

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Reading an item of an exporter's persistent queue writes the queue's metadata in the same
// transaction (exporterhelper v0.164): with this file_storage that write leaves the queued items
// on disk as they are, where contrib's rewrites them. Measured as the bytes the process writes.
func TestQueueReadDoesNotRewriteQueuedItems(t *testing.T) {
	item := make([]byte, 190<<10)
	for name, tt := range map[string]struct {
		factory   func(dir string) (extension.Factory, component.Config)
		rewritten bool
	}{
		"contrib's file_storage":               {factory: storageFactories["contrib"], rewritten: true},
		"this file_storage":                    {factory: storageFactories["spaced"]},
		"this file_storage, large_value_files": {factory: storageFactories["valuefiles"]},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			client := startClient(t, tt.factory)
			for i := range 3 {
				require.NoError(t, client.Batch(ctx, storage.SetOperation("qmv0", []byte("meta")),
					storage.SetOperation(strconv.Itoa(i), item)))
			}
			before := wchar(t)
			get := storage.GetOperation("0")
			require.NoError(t, client.Batch(ctx, storage.SetOperation("qmv0", []byte("meta2")), get))
			require.Equal(t, item, get.Value)
			written := wchar(t) - before
			if tt.rewritten {
				assert.Greater(t, written, int64(len(item)), "contrib's rewrites the items with the metadata")
			} else {
				assert.Less(t, written, int64(len(item)/4), "the metadata's leaf holds no item")
			}
		})
	}
}

// Only exporters' storages (the persistent queue) get the spacers; a second start adds none.
func TestLeafSpacersOnlyInExporterStorage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for range 2 {
		ext := newStorage(t, dir)
		require.NoError(t, ext.Start(ctx, nil))
		exp, err := ext.(storage.Extension).GetClient(ctx, component.KindExporter, component.MustNewID("svc"), "traces")
		require.NoError(t, err)
		proc, err := ext.(storage.Extension).GetClient(ctx, component.KindProcessor, component.MustNewID("svcspanfilter"), "held")
		require.NoError(t, err)
		for _, k := range leafSpacers {
			v, err := exp.Get(ctx, k)
			require.NoError(t, err)
			assert.Equal(t, []byte{0}, v, k)
			v, err = proc.Get(ctx, k)
			require.NoError(t, err)
			assert.Nil(t, v, k)
		}
		require.NoError(t, exp.Close(ctx))
		require.NoError(t, proc.Close(ctx))
		require.NoError(t, ext.Shutdown(ctx))
	}
}
