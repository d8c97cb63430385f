package svcfilestorageextension

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/svc/svc-collector/svcfilestorageextension/internal/metadata"
	"github.com/svc/svc-collector/svcfilestorageextension/internal/metadatatest"
)

// unobserved is the client an observed client wraps (the value-file client, or contrib's).
func unobserved(c storage.Client) storage.Client {
	switch o := c.(type) {
	case *observedClient:
		return o.Client
	case observedWalker:
		return o.Client
	}
	return c
}

// gaugeOf returns the value of an int gauge of tt for directory dir, and whether it has one.
func gaugeOf(t *testing.T, tt *componenttest.Telemetry, name, dir string) (int64, bool) {
	t.Helper()
	m, err := tt.GetMetric(name)
	if err != nil {
		return 0, false
	}
	for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
		if v, _ := dp.Attributes.Value("directory"); v.AsString() == dir {
			return dp.Value, true
		}
	}
	return 0, false
}

// TestStorageMetrics: a started storage publishes its directory's bytes, its volume's free bytes
// and size, and one duration per write transaction of a component's client (reads are not
// timed); no write error.
func TestStorageMetrics(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(ctx)) })
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Directory = dir
	ext, err := f.Create(ctx, metadatatest.NewSettings(tt), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	client, err := ext.(storage.Extension).GetClient(ctx, component.KindExporter, component.MustNewID("svc"), "traces")
	require.NoError(t, err)
	_, walks := client.(storage.Walker)
	assert.True(t, walks, "contrib's client lists its keys: so does the observed one")
	require.NoError(t, client.Set(ctx, "0", make([]byte, 1<<20)))
	require.NoError(t, client.Batch(ctx, storage.SetOperation("qmv0", []byte("m")), storage.DeleteOperation("0")))
	_, err = client.Get(ctx, "qmv0")
	require.NoError(t, err)

	used, ok := gaugeOf(t, tt, "otelcol_svc_file_storage_directory_bytes", dir)
	require.True(t, ok, "directory bytes published")
	assert.GreaterOrEqual(t, used, int64(1<<20), "the bbolt file that held 1 MiB")
	if runtime.GOOS != "windows" {
		free, ok := gaugeOf(t, tt, "otelcol_svc_file_storage_volume_free_bytes", dir)
		require.True(t, ok, "free bytes published")
		size, ok := gaugeOf(t, tt, "otelcol_svc_file_storage_volume_size_bytes", dir)
		require.True(t, ok, "volume size published")
		assert.Positive(t, free)
		assert.GreaterOrEqual(t, size, free+used)
	}
	m, err := tt.GetMetric("otelcol_svc_file_storage_write_duration")
	require.NoError(t, err)
	var writes uint64
	for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		c, _ := dp.Attributes.Value("component")
		if c.AsString() == "exporter/svc/traces" {
			writes += dp.Count
		}
	}
	// The Set and the Batch; the Get is a read.
	assert.Equal(t, uint64(2), writes)
	_, err = tt.GetMetric("otelcol_svc_file_storage_write_errors")
	assert.Error(t, err, "no write failed")

	require.NoError(t, client.Close(ctx))
	require.NoError(t, ext.Shutdown(ctx))
}

// memClient is a storage client in memory.
type memClient struct{ kv map[string][]byte }

func newMemClient() *memClient { return &memClient{kv: map[string][]byte{}} }

func (m *memClient) Get(ctx context.Context, key string) ([]byte, error) {
	op := storage.GetOperation(key)
	return op.Value, m.Batch(ctx, op)
}

func (m *memClient) Set(ctx context.Context, key string, value []byte) error {
	return m.Batch(ctx, storage.SetOperation(key, value))
}

func (m *memClient) Delete(ctx context.Context, key string) error {
	return m.Batch(ctx, storage.DeleteOperation(key))
}

func (m *memClient) Batch(_ context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			op.Value = m.kv[op.Key]
		case storage.Set:
			m.kv[op.Key] = op.Value
		case storage.Delete:
			delete(m.kv, op.Key)
		}
	}
	return nil
}

func (*memClient) Close(context.Context) error { return nil }

// failingClient is a storage client whose writes fail with err while err is set.
type failingClient struct {
	storage.Client
	err error
}

func (c *failingClient) Get(ctx context.Context, key string) ([]byte, error) {
	op := storage.GetOperation(key)
	return op.Value, c.Batch(ctx, op)
}

func (c *failingClient) Set(ctx context.Context, key string, value []byte) error {
	return c.Batch(ctx, storage.SetOperation(key, value))
}

func (c *failingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if c.err != nil {
		return c.err
	}
	return c.Client.Batch(ctx, ops...)
}

// TestFailedWritesCountedAndTold: a failed write is counted by reason; one for want of room says
// so with the directory, the component and the remedy, and keeps its cause for errors.Is; the log
// tells the first failure at once, not each one after it, and the first success after them.
func TestFailedWritesCountedAndTold(t *testing.T) {
	enospc := &fs.PathError{Op: "write", Path: "/data/exporter_svc__traces", Err: syscall.ENOSPC}
	tests := []struct {
		name     string
		err      error
		reason   string
		fullText bool
	}{
		{name: "disk full", err: enospc, reason: "full", fullText: true},
		{name: "quota", err: fmt.Errorf("value file x: %w", syscall.EDQUOT), reason: "full", fullText: true},
		{name: "max_size", err: storage.ErrStorageFull, reason: "full", fullText: true},
		{name: "other", err: errors.New("input/output error"), reason: "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			tel := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tel.Shutdown(ctx)) })
			tb, err := metadata.NewTelemetryBuilder(metadatatest.NewSettings(tel).TelemetrySettings)
			require.NoError(t, err)
			core, logs := observer.New(zapcore.InfoLevel)
			inner := &failingClient{Client: newMemClient(), err: tt.err}
			c := newObservedClient(inner, tb, zap.New(core), "/data", "exporter/svc/traces")

			for range 3 {
				err := c.Set(ctx, "0", []byte("item"))
				require.ErrorIs(t, err, tt.err, "the cause stays visible to the caller")
				if tt.fullText {
					assert.Contains(t, err.Error(), "svc_file_storage directory /data is full: exporter/svc/traces's write is refused")
				}
			}
			_, err = c.Get(ctx, "0")
			require.Error(t, err, "reads are not counted") // the fake fails every Batch
			metadatatest.AssertEqualSvcFileStorageWriteErrors(t, tel, []metricdata.DataPoint[int64]{{
				Value: 3,
				Attributes: attribute.NewSet(attribute.String("directory", "/data"),
					attribute.String("component", "exporter/svc/traces"), attribute.String("reason", tt.reason)),
			}}, metricdatatest.IgnoreTimestamp())
			errs := logs.FilterLevelExact(zapcore.ErrorLevel).All()
			require.Len(t, errs, 1, "the first failure is told at once, the next ones within a minute are counted")
			assert.Equal(t, "/data", errs[0].ContextMap()["directory"])

			inner.err = nil
			require.NoError(t, c.Set(ctx, "0", []byte("item")))
			back := logs.FilterMessage("svc_file_storage: writes succeed again").All()
			require.Len(t, back, 1)
			assert.Equal(t, int64(3), back[0].ContextMap()["failed_writes"])
		})
	}
}
