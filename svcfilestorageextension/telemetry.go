package svcfilestorageextension

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcfilestorageextension/internal/metadata"
)

// A full disk is the one way a gateway with its queues on disk loses what it accepted
// (docs/operations.md), so the storage says how full its volume is, and what its writes cost and
// how often they fail, where an alert can read it (distribution/monitoring/alerts.yaml).

// registerVolumeGauges publishes the directory's bytes and its volume's free bytes and size,
// read at each collection.
func registerVolumeGauges(tb *metadata.TelemetryBuilder, dir string) error {
	attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("directory", dir)))
	volume := func(pick func(free, size int64) int64) metric.Int64Callback {
		return func(_ context.Context, o metric.Int64Observer) error {
			if free, size, ok := volumeOf(dir); ok {
				o.Observe(pick(free, size), attrs)
			}
			return nil
		}
	}
	return errors.Join(
		tb.RegisterSvcFileStorageDirectoryBytesCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(directoryBytes(dir), attrs)
			return nil
		}),
		tb.RegisterSvcFileStorageVolumeFreeBytesCallback(volume(func(free, _ int64) int64 { return free })),
		tb.RegisterSvcFileStorageVolumeSizeBytesCallback(volume(func(_, size int64) int64 { return size })),
	)
}

// failureLogInterval: while a component's writes keep failing, the log repeats the error this
// often, with how many failed since.
const failureLogInterval = time.Minute

// observedClient is a component's storage client whose write transactions (a Batch, Set or
// Delete that writes) are timed, and whose failed writes are counted and logged: the first
// failure at once, then once a minute while they go on, and the first success after them.
type observedClient struct {
	storage.Client
	tb        *metadata.TelemetryBuilder
	logger    *zap.Logger
	dir       string
	component string // kind/type/name of the component the file belongs to
	attrs     metric.MeasurementOption

	mu       sync.Mutex
	failed   int       // failed writes since the last success
	loggedAt time.Time // when the last failure was logged
	unlogged int       // failures since then
}

// observedWalker is an observedClient of a client that lists its keys (storage.Walker).
type observedWalker struct{ *observedClient }

func newObservedClient(inner storage.Client, tb *metadata.TelemetryBuilder, logger *zap.Logger, dir, component string) storage.Client {
	c := &observedClient{
		Client: inner, tb: tb, logger: logger, dir: dir, component: component,
		attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("directory", dir), attribute.String("component", component))),
	}
	if _, ok := inner.(storage.Walker); ok {
		return observedWalker{c}
	}
	return c
}

func (c *observedClient) Get(ctx context.Context, key string) ([]byte, error) {
	return c.Client.Get(ctx, key) // a read: not timed
}

func (c *observedClient) Set(ctx context.Context, key string, value []byte) error {
	return c.write(ctx, func(ctx context.Context) error { return c.Client.Set(ctx, key, value) })
}

func (c *observedClient) Delete(ctx context.Context, key string) error {
	return c.write(ctx, func(ctx context.Context) error { return c.Client.Delete(ctx, key) })
}

func (c *observedClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		if op.Type != storage.Get {
			return c.write(ctx, func(ctx context.Context) error { return c.Client.Batch(ctx, ops...) })
		}
	}
	return c.Client.Batch(ctx, ops...)
}

// Walk may write (the operations its function returns): it is timed and counted as a write.
func (w observedWalker) Walk(ctx context.Context, fn storage.WalkFunc) error {
	return w.write(ctx, func(ctx context.Context) error { return w.Client.(storage.Walker).Walk(ctx, fn) })
}

func (c *observedClient) write(ctx context.Context, do func(context.Context) error) error {
	start := time.Now()
	err := do(ctx)
	c.tb.SvcFileStorageWriteDuration.Record(ctx, time.Since(start).Seconds(), c.attrs)
	if err == nil {
		c.succeeded()
		return nil
	}
	full := isFull(err)
	reason := "other"
	if full {
		reason = "full"
		err = fmt.Errorf("svc_file_storage directory %s is full: %s's write is refused, and so is the data it "+
			"was to keep (senders retry): free space on its volume or raise max_size: %w", c.dir, c.component, err)
	}
	c.tb.SvcFileStorageWriteErrors.Add(ctx, 1, c.attrs,
		metric.WithAttributes(attribute.String("reason", reason)))
	c.failedWith(err)
	return err
}

// isFull tells a write that failed for want of room: the volume (ENOSPC), a quota (EDQUOT),
// bbolt's max_size (storage.ErrStorageFull, also the value files' max_size).
func isFull(err error) bool {
	return errors.Is(err, storage.ErrStorageFull) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func (c *observedClient) failedWith(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed++
	c.unlogged++
	if c.failed > 1 && time.Since(c.loggedAt) < failureLogInterval {
		return
	}
	c.logger.Error("svc_file_storage: a write failed; the data it was to keep is refused until writes succeed again",
		zap.String("directory", c.dir), zap.String("component", c.component),
		zap.Int("failed_writes", c.unlogged), zap.Error(err))
	c.loggedAt, c.unlogged = time.Now(), 0
}

func (c *observedClient) succeeded() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed == 0 {
		return
	}
	c.logger.Info("svc_file_storage: writes succeed again",
		zap.String("directory", c.dir), zap.String("component", c.component), zap.Int("failed_writes", c.failed))
	c.failed, c.unlogged = 0, 0
}
