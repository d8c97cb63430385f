package svcfilestorageextension

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bolterrors "go.etcd.io/bbolt/errors"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcfilestorageextension/internal/metadata"
)

// LockFileName is the file in the storage directory that the running instance holds locked.
const LockFileName = ".svc-otelcol.lock"

// exclusiveStorage is contrib's file storage with its directory locked from Start to Shutdown,
// and its clients observed (telemetry.go).
type exclusiveStorage struct {
	storage.Extension
	cfg    *Config
	logger *zap.Logger
	tb     *metadata.TelemetryBuilder
	lock   *os.File
}

// Start locks the directory before contrib's extension starts, so that a second instance on the
// same directory fails here, at once and by name, instead of in an exporter's queue after the
// bbolt lock times out. The upstream issue, drafted: docs/upstream.md §3.
func (s *exclusiveStorage) Start(ctx context.Context, host component.Host) error {
	lock, err := lockDirectory(s.cfg.Directory)
	if err != nil {
		return err
	}
	s.lock = lock
	if err := s.Extension.Start(ctx, host); err != nil {
		s.unlock()
		return err
	}
	return nil
}

// Shutdown stops contrib's extension, then lets the directory go.
func (s *exclusiveStorage) Shutdown(ctx context.Context) error {
	err := s.Extension.Shutdown(ctx)
	s.unlock()
	s.tb.Shutdown()
	return err
}

func (s *exclusiveStorage) unlock() {
	if s.lock != nil {
		_ = s.lock.Close() // closing the file releases the lock
		s.lock = nil
	}
}

// GetClient opens a component's storage file and its value files (valuefiles.go: written with
// large_value_files, read whenever some are left); a failure names the directory. A bbolt lock
// timeout (a process that does not take the directory lock, e.g. another build of the collector,
// holds the file) says what to do about it.
func (s *exclusiveStorage) GetClient(ctx context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	client, err := s.Extension.GetClient(ctx, kind, id, name)
	if err == nil {
		if kind == component.KindExporter {
			// Only what the queue writes costs more without them: a storage that cannot take them
			// fails the queue's own first write, with the queue's error.
			_ = addLeafSpacers(ctx, client)
		}
		wrapped, err := openValueFiles(ctx, client, valueFileOptions{
			dir:          filepath.Join(s.cfg.Directory, valueDirName(kind, id, name)),
			writeLarge:   s.cfg.LargeValueFiles,
			fsync:        s.cfg.FSync,
			maxBytes:     s.cfg.MaxSize,
			largeValue:   largeValueBytes,
			segmentBytes: segmentBytes,
			logger:       s.logger,
		})
		if err != nil {
			_ = client.Close(ctx)
			return nil, fmt.Errorf("svc_file_storage directory %s: storage of %s: %w", s.cfg.Directory, id, err)
		}
		return newObservedClient(wrapped, s.tb, s.logger, s.cfg.Directory, componentName(kind, id, name)), nil
	}
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w (svc_file_storage timed out waiting for the lock of its file for %s)", inUseError(s.cfg.Directory), id)
	}
	return nil, fmt.Errorf("svc_file_storage directory %s: storage of %s: %w", s.cfg.Directory, id, err)
}

// componentName names the component a storage file belongs to, as the file's name does:
// kind/type[/name] of the component, then the name it asked for (exporter/svc/traces).
func componentName(kind component.Kind, id component.ID, name string) string {
	if name == "" {
		return kindString(kind) + "/" + id.String()
	}
	return kindString(kind) + "/" + id.String() + "/" + name
}

// errDirectoryInUse is the error of a storage directory another instance holds.
var errDirectoryInUse = errors.New("is in use by another collector instance")

func inUseError(dir string) error {
	return fmt.Errorf("svc_file_storage directory %s %w: give each instance its own directory "+
		"(SVC_STORAGE_DIR with the distribution's config.yaml, svc_file_storage::directory otherwise)", dir, errDirectoryInUse)
}

// lockDirectory takes the directory's lock file without waiting.
func lockDirectory(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("svc_file_storage directory %s: cannot create its lock file: %w", dir, err)
	}
	if err := tryLock(f); err != nil {
		_ = f.Close()
		if errors.Is(err, errLocked) {
			return nil, inUseError(dir)
		}
		return nil, fmt.Errorf("svc_file_storage directory %s: cannot lock %s: %w", dir, path, err)
	}
	return f, nil
}
