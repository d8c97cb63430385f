package svcfilestorageextension

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

func newStorage(t *testing.T, dir string) extension.Extension {
	t.Helper()
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Directory = dir
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	return ext
}

// TestSecondInstanceOnOneDirectoryFailsByName: the second instance on a directory fails at start
// with an error naming the directory and the remedy; once the first stops, the directory is free.
func TestSecondInstanceOnOneDirectoryFailsByName(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	first := newStorage(t, dir)
	require.NoError(t, first.Start(ctx, componenttest.NewNopHost()))

	second := newStorage(t, dir)
	err := second.Start(ctx, componenttest.NewNopHost())
	require.ErrorIs(t, err, errDirectoryInUse)
	assert.Contains(t, err.Error(), "svc_file_storage directory "+dir+" is in use by another collector instance")
	assert.Contains(t, err.Error(), "give each instance its own directory (SVC_STORAGE_DIR")

	require.NoError(t, first.Shutdown(ctx))
	require.NoError(t, second.Start(ctx, componenttest.NewNopHost()), "the directory is free once the first instance stopped")
	require.NoError(t, second.Shutdown(ctx))
}

// TestClientsWorkAsContribs: the storage itself is contrib's, unchanged.
func TestClientsWorkAsContribs(t *testing.T) {
	ctx := context.Background()
	ext := newStorage(t, t.TempDir())
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	client, err := ext.(storage.Extension).GetClient(ctx, component.KindExporter, component.MustNewID("svc"), "traces")
	require.NoError(t, err)
	require.NoError(t, client.Set(ctx, "k", []byte("v")))
	got, err := client.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []byte("v"), got)
	require.NoError(t, client.Close(ctx))
	require.NoError(t, ext.Shutdown(ctx))
}

// TestTypeIsNotContribs: contrib's file_storage can be in the same build.
func TestTypeIsNotContribs(t *testing.T) {
	assert.Equal(t, "svc_file_storage", NewFactory().Type().String())
	assert.NotEqual(t, filestorage.NewFactory().Type(), NewFactory().Type())
}

// TestClientFileHeldElsewhereNamesTheDirectory: when a process that takes no directory lock (an
// older build) holds a component's file, the bbolt lock timeout names the directory and the remedy
// instead of a bare "timeout".
func TestClientFileHeldElsewhereNamesTheDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	held, err := bolt.Open(filepath.Join(dir, "exporter_svc__traces"), 0o600, nil)
	require.NoError(t, err)
	defer held.Close()

	ext := newStorage(t, dir)
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	defer func() { require.NoError(t, ext.Shutdown(ctx)) }()
	_, err = ext.(storage.Extension).GetClient(ctx, component.KindExporter, component.MustNewID("svc"), "traces")
	require.ErrorIs(t, err, errDirectoryInUse)
	assert.Contains(t, err.Error(), "svc_file_storage directory "+dir+" is in use by another collector instance")
	assert.Contains(t, err.Error(), "timed out waiting for the lock of its file for svc")
}
