package svcfilestorageextension

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

var (
	queueID   = component.MustNewID("svc")
	queueName = "traces"
)

// randomBytes are n bytes that do not compress, like a gzip span batch.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return b
}

// testStore is contrib's file_storage on dir with this package's value files on top, as GetClient
// builds it, but with the segment size and the contrib client (e.g. one whose commits fail) of
// the test. reopen closes it and opens it again on the same directory, as a restart does.
type testStore struct {
	t        *testing.T
	dir      string
	opts     valueFileOptions
	wrap     func(storage.Client) storage.Client
	ext      extension.Extension
	client   storage.Client
	isClosed bool
}

func openTestStore(t *testing.T, dir string, segBytes int64, wrap func(storage.Client) storage.Client) *testStore {
	s := &testStore{t: t, dir: dir, wrap: wrap, opts: valueFileOptions{
		dir:          filepath.Join(dir, valueDirName(component.KindExporter, queueID, queueName)),
		writeLarge:   true,
		largeValue:   largeValueBytes,
		segmentBytes: segBytes,
		logger:       zap.NewNop(),
	}}
	s.open()
	t.Cleanup(s.close)
	return s
}

func (s *testStore) open() {
	ctx := context.Background()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = s.dir
	ext, err := f.Create(ctx, extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(s.t, err)
	require.NoError(s.t, ext.Start(ctx, componenttest.NewNopHost()))
	inner, err := ext.(storage.Extension).GetClient(ctx, component.KindExporter, queueID, queueName)
	require.NoError(s.t, err)
	if s.wrap != nil {
		inner = s.wrap(inner)
	}
	s.ext = ext
	s.client, err = openValueFiles(ctx, inner, s.opts)
	require.NoError(s.t, err)
	s.isClosed = false
}

func (s *testStore) close() {
	if s.isClosed {
		return
	}
	s.isClosed = true
	require.NoError(s.t, s.client.Close(context.Background()))
	require.NoError(s.t, s.ext.Shutdown(context.Background()))
}

func (s *testStore) reopen() {
	s.close()
	s.open()
}

// segments lists the segment files.
func (s *testStore) segments() []string {
	entries, err := os.ReadDir(s.opts.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(s.t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// stored is what bbolt itself holds under key (a pointer or the value).
func (s *testStore) stored(key string) []byte {
	v, err := unobserved(s.client).(*valueFileClient).inner.Get(context.Background(), key)
	require.NoError(s.t, err)
	return v
}

func TestValueFilesRoundTrip(t *testing.T) {
	small, large, larger := []byte("metadata"), randomBytes(190<<10), randomBytes(300<<10)
	tests := []struct {
		name  string
		write func(ctx context.Context, c storage.Client) error
		want  map[string][]byte // nil: absent
		// inFiles are the keys whose value bbolt keeps as a pointer
		inFiles []string
	}{
		{
			name: "set small and large",
			write: func(ctx context.Context, c storage.Client) error {
				return errors.Join(c.Set(ctx, "s", small), c.Set(ctx, "l", large))
			},
			want: map[string][]byte{"s": small, "l": large}, inFiles: []string{"l"},
		},
		{
			name: "batch of sets, a get of a value set in the same batch",
			write: func(ctx context.Context, c storage.Client) error {
				get := storage.GetOperation("l")
				if err := c.Batch(ctx, storage.SetOperation("s", small), storage.SetOperation("l", large), get); err != nil {
					return err
				}
				if !bytes.Equal(get.Value, large) {
					return errors.New("the batch's get did not read the value back")
				}
				return nil
			},
			want: map[string][]byte{"s": small, "l": large}, inFiles: []string{"l"},
		},
		{
			name: "delete of a large value",
			write: func(ctx context.Context, c storage.Client) error {
				return errors.Join(c.Set(ctx, "l", large), c.Set(ctx, "l2", larger), c.Delete(ctx, "l"))
			},
			want: map[string][]byte{"l": nil, "l2": larger}, inFiles: []string{"l2"},
		},
		{
			name: "get and delete in one batch (a queue's recovery of dispatched items)",
			write: func(ctx context.Context, c storage.Client) error {
				if err := c.Set(ctx, "l", large); err != nil {
					return err
				}
				get := storage.GetOperation("l")
				if err := c.Batch(ctx, get, storage.DeleteOperation("l")); err != nil {
					return err
				}
				if !bytes.Equal(get.Value, large) {
					return errors.New("the batch's get did not read the value back")
				}
				return nil
			},
			want: map[string][]byte{"l": nil},
		},
		{
			name: "large overwritten by small",
			write: func(ctx context.Context, c storage.Client) error {
				return errors.Join(c.Set(ctx, "k", large), c.Set(ctx, "k", small))
			},
			want: map[string][]byte{"k": small},
		},
		{
			name: "small overwritten by large, then by a larger",
			write: func(ctx context.Context, c storage.Client) error {
				return errors.Join(c.Set(ctx, "k", small), c.Set(ctx, "k", large), c.Set(ctx, "k", larger))
			},
			want: map[string][]byte{"k": larger}, inFiles: []string{"k"},
		},
	}
	for _, tt := range tests {
		for _, fsync := range []bool{false, true} {
			t.Run(tt.name+"/fsync="+strconv.FormatBool(fsync), func(t *testing.T) {
				ctx := context.Background()
				s := openTestStore(t, t.TempDir(), segmentBytes, nil)
				s.opts.fsync = fsync
				s.reopen()
				require.NoError(t, tt.write(ctx, s.client))
				check := func() {
					for k, want := range tt.want {
						got, err := s.client.Get(ctx, k)
						require.NoError(t, err, k)
						assert.Equal(t, want, got, k)
						_, isPointer := decodePointer(s.stored(k))
						assert.Equal(t, slices.Contains(tt.inFiles, k), isPointer, "bbolt holds a pointer for %s", k)
					}
				}
				check()
				s.reopen()
				check()
				if len(tt.inFiles) == 0 {
					assert.Empty(t, s.segments(), "nothing is in a value file: no segment is kept after a restart")
				}
			})
		}
	}
}

// A file written by contrib's file_storage (values inline) reads as before, with the setting on.
func TestValueFilesReadContribsFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	large := randomBytes(190 << 10)
	f, contribCfg := storageFactories["contrib"](dir)
	ext, err := f.Create(ctx, extensiontest.NewNopSettings(f.Type()), contribCfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	c, err := ext.(storage.Extension).GetClient(ctx, component.KindExporter, queueID, queueName)
	require.NoError(t, err)
	require.NoError(t, c.Batch(ctx, storage.SetOperation("qmv0", []byte("meta")), storage.SetOperation("0", large)))
	require.NoError(t, c.Close(ctx))
	require.NoError(t, ext.Shutdown(ctx))

	f, cfg := storageFactories["valuefiles"](dir)
	ext, err = f.Create(ctx, extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	c, err = ext.(storage.Extension).GetClient(ctx, component.KindExporter, queueID, queueName)
	require.NoError(t, err)
	got, err := c.Get(ctx, "0")
	require.NoError(t, err)
	assert.Equal(t, large, got)
	meta, err := c.Get(ctx, "qmv0")
	require.NoError(t, err)
	assert.Equal(t, []byte("meta"), meta)
	require.NoError(t, c.Close(ctx))
	require.NoError(t, ext.Shutdown(ctx))
}

// The extension puts a component's segments in a directory next to its bbolt file, named after
// it; with the setting off (the default) it writes none and returns contrib's client as it is.
func TestValueFilesDirectoryNextToBboltFile(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run("large_value_files="+strconv.FormatBool(on), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			ext := newStorage(t, dir)
			ext.(*exclusiveStorage).cfg.LargeValueFiles = on
			require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
			c, err := ext.(storage.Extension).GetClient(ctx, component.KindProcessor, component.MustNewIDWithName("svcspanfilter", "a/b"), "held")
			require.NoError(t, err)
			require.NoError(t, c.Set(ctx, "r1", randomBytes(64<<10)))
			_, wrapped := unobserved(c).(*valueFileClient)
			assert.Equal(t, on, wrapped)
			require.NoError(t, c.Close(ctx))
			require.NoError(t, ext.Shutdown(ctx))
			assert.FileExists(t, filepath.Join(dir, "processor_svcspanfilter_a~002Fb_held"))
			segDir := filepath.Join(dir, "processor_svcspanfilter_a~002Fb_held.values")
			if on {
				assert.FileExists(t, filepath.Join(segDir, segmentName(1)))
			} else {
				assert.NoDirExists(t, segDir)
			}
		})
	}
}

// persistentQueue drives a storage with the operations of exporterhelper v0.164's persistent
// queue (internal/queue/persistent_queue.go): Offer writes the metadata and the item in one
// batch, Read writes the metadata and gets the item, OnDone writes the metadata and deletes the
// item. Its indexes stand for the metadata, which it also writes, as the queue does.
type persistentQueue struct {
	t           *testing.T
	client      storage.Client
	read, write uint64
}

func (q *persistentQueue) meta() *storage.Operation {
	return storage.SetOperation("qmv0", []byte(strconv.FormatUint(q.read, 10)+"/"+strconv.FormatUint(q.write, 10)))
}

func (q *persistentQueue) offer(item []byte) {
	q.write++
	require.NoError(q.t, q.client.Batch(context.Background(), q.meta(), storage.SetOperation(strconv.FormatUint(q.write-1, 10), item)))
}

func (q *persistentQueue) readItem() (uint64, []byte) {
	index := q.read
	q.read++
	get := storage.GetOperation(strconv.FormatUint(index, 10))
	require.NoError(q.t, q.client.Batch(context.Background(), q.meta(), get))
	return index, get.Value
}

func (q *persistentQueue) onDone(index uint64) {
	require.NoError(q.t, q.client.Batch(context.Background(), q.meta(), storage.DeleteOperation(strconv.FormatUint(index, 10))))
}

// The queue's items come back once each across a restart, including items read and not yet done
// (the queue reads those again after a restart: here, by index), and the segments go as the queue
// drains, rotated at the segment size.
func TestValueFilesPersistentQueueAcrossRestart(t *testing.T) {
	items := make([][]byte, 20)
	for i := range items {
		items[i] = randomBytes(100<<10 + i)
	}
	// Three items a segment.
	s := openTestStore(t, t.TempDir(), 3*(100<<10+30), nil)
	q := &persistentQueue{t: t, client: s.client}
	for _, item := range items[:10] {
		q.offer(item)
	}
	assert.Len(t, s.segments(), 4, "10 items, 3 a segment")
	var delivered []uint64
	for range 4 { // read and done
		i, v := q.readItem()
		require.Equal(t, items[i], v)
		q.onDone(i)
		delivered = append(delivered, i)
	}
	assert.Equal(t, []string{segmentName(1), segmentName(2), segmentName(3), segmentName(4)}, s.segments(),
		"the first segment, its 3 items done, is kept as the spare")
	inFlight, v := q.readItem() // read, not done when the process stops
	require.Equal(t, items[inFlight], v)
	for _, item := range items[10:15] {
		q.offer(item)
	}
	assert.Equal(t, []string{segmentName(2), segmentName(3), segmentName(4), segmentName(5)}, s.segments(),
		"segment 5 is the spare renamed")

	s.reopen()
	q.client = s.client
	for _, item := range items[15:] {
		q.offer(item)
	}
	// The queue puts what was in flight back (persistent_queue.go retrieveAndEnqueueNotDispatchedReqs).
	get := storage.GetOperation(strconv.FormatUint(inFlight, 10))
	require.NoError(t, s.client.Batch(context.Background(), get))
	require.Equal(t, items[inFlight], get.Value)
	q.onDone(inFlight)
	delivered = append(delivered, inFlight)
	for q.read < q.write {
		i, v := q.readItem()
		require.Equal(t, items[i], v, "item %d", i)
		q.onDone(i)
		delivered = append(delivered, i)
	}
	slices.Sort(delivered)
	assert.Equal(t, []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, delivered, "every item once")
	assert.Len(t, s.segments(), 2, "drained: only the segment being appended to and the spare are left")
	s.reopen()
	assert.Empty(t, s.segments(), "drained and restarted: no segment left")
}

// failingCommits is a contrib client whose next batch fails without committing, as bbolt's
// transaction does when its commit fails.
type failingCommits struct {
	storage.Client
	fail bool
}

func (f *failingCommits) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if f.fail {
		f.fail = false
		return errors.New("commit failed")
	}
	return f.Client.Batch(ctx, ops...)
}

// Crashes and failures at each step of a write leave nothing live lost, and their garbage is gone
// after the next open. Each staged as the files a crash leaves: stage runs on the open storage,
// crash on the files once it is closed.
func TestValueFilesCrashShapes(t *testing.T) {
	kept, other := randomBytes(100<<10), randomBytes(100<<10)
	tests := []struct {
		name  string
		stage func(t *testing.T, s *testStore, fail *failingCommits) // writes "kept" under "k"
		crash func(t *testing.T, s *testStore)
		// segments before and after the open
		segmentsBeforeOpen, segmentsAfter int
	}{
		{
			name: "an appended record whose commit failed (or a SIGKILL before the commit)",
			stage: func(t *testing.T, s *testStore, fail *failingCommits) {
				require.NoError(t, s.client.Set(context.Background(), "k", kept))
				fail.fail = true
				require.Error(t, s.client.Set(context.Background(), "lost", other))
				got, err := s.client.Get(context.Background(), "lost")
				require.NoError(t, err)
				require.Nil(t, got, "a failed batch stores nothing")
			},
			segmentsBeforeOpen: 2, segmentsAfter: 1,
		},
		{
			name: "a segment whose last delete committed but whose file was not removed",
			stage: func(t *testing.T, s *testStore, _ *failingCommits) {
				require.NoError(t, s.client.Set(context.Background(), "gone", other))
				require.NoError(t, s.client.Set(context.Background(), "k", kept))
				require.NoError(t, s.client.Delete(context.Background(), "gone"))
			},
			crash: func(t *testing.T, s *testStore) {
				// As if the process died before removing it: segment 1 as it was.
				writeSegment(t, s, 1, "gone", other)
			},
			segmentsBeforeOpen: 2, segmentsAfter: 1,
		},
		{
			name: "a torn last record in a segment of its own (a SIGKILL in the middle of an append)",
			stage: func(t *testing.T, s *testStore, _ *failingCommits) {
				require.NoError(t, s.client.Set(context.Background(), "k", kept))
			},
			crash: func(t *testing.T, s *testStore) {
				seg := writeSegment(t, s, 7, "torn", other)
				require.NoError(t, seg.file.Truncate(seg.size-100))
			},
			segmentsBeforeOpen: 2, segmentsAfter: 1,
		},
		{
			name: "a torn record after a live one",
			stage: func(t *testing.T, s *testStore, _ *failingCommits) {
				require.NoError(t, s.client.Set(context.Background(), "k", kept))
			},
			crash: func(t *testing.T, s *testStore) {
				f, err := os.OpenFile(filepath.Join(s.opts.dir, segmentName(1)), os.O_WRONLY|os.O_APPEND, 0)
				require.NoError(t, err)
				_, err = f.Write([]byte{1, 2, 3, 4, 4, 0, 0, 0, 0, 0, 1, 0, 't', 'o', 'r', 'n', 9})
				require.NoError(t, err)
				require.NoError(t, f.Close())
			},
			segmentsBeforeOpen: 1, segmentsAfter: 1,
		},
		{
			name: "a record whose value was not written in a reused segment (stale bytes after its header)",
			stage: func(t *testing.T, s *testStore, _ *failingCommits) {
				require.NoError(t, s.client.Set(context.Background(), "k", kept))
			},
			crash: func(t *testing.T, s *testStore) {
				seg := writeSegment(t, s, 7, "old", other)
				head := make([]byte, recordHeaderBytes+len("new"))
				head[4], head[8] = 3, 10
				copy(head[recordHeaderBytes:], "new")
				_, err := seg.file.WriteAt(head, 0)
				require.NoError(t, err)
			},
			segmentsBeforeOpen: 2, segmentsAfter: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fail := &failingCommits{}
			// One record a segment: garbage is in segments of its own.
			s := openTestStore(t, t.TempDir(), 1, func(c storage.Client) storage.Client {
				fail.Client = c
				return fail
			})
			tt.stage(t, s, fail)
			s.close()
			if tt.crash != nil {
				tt.crash(t, s)
			}
			assert.Len(t, s.segments(), tt.segmentsBeforeOpen)
			s.open()
			assert.Len(t, s.segments(), tt.segmentsAfter, "garbage gone after the open")
			got, err := s.client.Get(context.Background(), "k")
			require.NoError(t, err)
			assert.Equal(t, kept, got)
			// And writing goes on, in a new segment.
			require.NoError(t, s.client.Set(context.Background(), "k2", other))
			got, err = s.client.Get(context.Background(), "k2")
			require.NoError(t, err)
			assert.Equal(t, other, got)
		})
	}
}

// writeSegment writes segment num with one record, as a run that crashed left it.
func writeSegment(t *testing.T, s *testStore, num uint64, key string, value []byte) *segment {
	seg, err := createSegment(s.opts.dir, num)
	require.NoError(t, err)
	t.Cleanup(func() { _ = seg.file.Close() })
	_, _, err = seg.append(key, value)
	require.NoError(t, err)
	return seg
}

// A value whose segment is missing or corrupt is an error that names the file, never a nil.
func TestValueFilesMissingOrCorruptSegment(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(path string) error
		wantErr string
	}{
		{name: "missing", damage: os.Remove, wantErr: "is missing"},
		{name: "corrupt", damage: func(path string) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b[len(b)-1] ^= 1
			return os.WriteFile(path, b, 0o600)
		}, wantErr: "the record is corrupt"},
		// A record cut short is a torn append to the open: with nothing else live, its file goes.
		{name: "truncated", damage: func(path string) error { return os.Truncate(path, 1000) }, wantErr: "is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTestStore(t, t.TempDir(), segmentBytes, nil)
			require.NoError(t, s.client.Set(context.Background(), "k", randomBytes(100<<10)))
			s.close()
			path := filepath.Join(s.opts.dir, segmentName(1))
			require.NoError(t, tt.damage(path))
			core, logs := observer.New(zap.ErrorLevel)
			s.opts.logger = zap.New(core)
			s.open()
			got, err := s.client.Get(context.Background(), "k")
			require.Error(t, err)
			assert.Nil(t, got)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tt.wantErr)
			// The queue drops an item it cannot read with a debug line: the error is logged here.
			require.Equal(t, 1, logs.Len())
			assert.Contains(t, logs.All()[0].ContextMap()["error"], path)
		})
	}
}

// With the setting turned off, values in value files still read, new large values go inline, and
// the segments go once nothing points at them: then the client is contrib's again.
func TestValueFilesTurnedOff(t *testing.T) {
	ctx := context.Background()
	large, newer := randomBytes(100<<10), randomBytes(100<<10)
	s := openTestStore(t, t.TempDir(), segmentBytes, nil)
	require.NoError(t, s.client.Set(ctx, "old", large))
	s.opts.writeLarge = false
	s.reopen()
	got, err := s.client.Get(ctx, "old")
	require.NoError(t, err)
	assert.Equal(t, large, got)
	require.NoError(t, s.client.Set(ctx, "new", newer))
	assert.Equal(t, newer, s.stored("new"), "inline")
	require.NoError(t, s.client.Delete(ctx, "old"))
	assert.Empty(t, s.segments())
	s.reopen()
	_, wrapped := unobserved(s.client).(*valueFileClient)
	assert.False(t, wrapped, "nothing in value files: contrib's client as it is")
	assert.NoDirExists(t, s.opts.dir)
	got, err = s.client.Get(ctx, "new")
	require.NoError(t, err)
	assert.Equal(t, newer, got)
}

// Walk gives the values, not the pointers, and applies what fn returns: a large value deleted
// by it frees its segment.
func TestValueFilesWalk(t *testing.T) {
	ctx := context.Background()
	small, large := []byte("small"), randomBytes(100<<10)
	s := openTestStore(t, t.TempDir(), 1, nil)
	require.NoError(t, s.client.Batch(ctx, storage.SetOperation("a", small), storage.SetOperation("b", large), storage.SetOperation("c", large)))
	seen := map[string][]byte{}
	require.NoError(t, s.client.(storage.Walker).Walk(ctx, func(key string, value []byte) ([]*storage.Operation, error) {
		seen[key] = slices.Clone(value)
		if key == "b" {
			return []*storage.Operation{storage.DeleteOperation(key)}, nil
		}
		return nil, nil
	}))
	assert.Equal(t, map[string][]byte{"a": small, "b": large, "c": large}, seen)
	got, err := s.client.Get(ctx, "b")
	require.NoError(t, err)
	assert.Nil(t, got)
	// Segment 1 (b) is the spare now, segment 2 (c) the active one; the walk stops at SkipAll.
	seen = map[string][]byte{}
	require.NoError(t, s.client.(storage.Walker).Walk(ctx, func(key string, value []byte) ([]*storage.Operation, error) {
		seen[key] = value
		return nil, storage.SkipAll
	}))
	assert.Len(t, seen, 1)
	s.reopen()
	assert.Equal(t, []string{segmentName(2)}, s.segments(), "b's segment went")
}

// contrib's max_size bounds the value files too: an append beyond it fails the write, and bbolt
// keeps what it had.
func TestValueFilesMaxSize(t *testing.T) {
	ctx := context.Background()
	first := randomBytes(100 << 10)
	s := openTestStore(t, t.TempDir(), segmentBytes, nil)
	s.opts.maxBytes = 150 << 10
	s.reopen()
	require.NoError(t, s.client.Set(ctx, "k", first))
	err := s.client.Batch(ctx, storage.SetOperation("qmv0", []byte("meta")), storage.SetOperation("k2", randomBytes(100<<10)))
	require.ErrorContains(t, err, "the storage extension has run out of available space")
	got, err := s.client.Get(ctx, "qmv0")
	require.NoError(t, err)
	assert.Nil(t, got, "nothing of the refused batch is stored")
	require.NoError(t, s.client.Delete(ctx, "k"))
	require.NoError(t, s.client.Set(ctx, "k2", randomBytes(100<<10)), "room again once deleted")
}
