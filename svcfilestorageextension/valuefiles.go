package svcfilestorageextension

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"
)

var _ storage.Walker = (*valueFileClient)(nil)

// bbolt keeps values in the leaves of its B+tree and rewrites a whole leaf, every value in it,
// when any key of the leaf changes. An exporter's persistent queue writes three transactions per
// item (queue, read, done), each changing the metadata and the item, so every item of ~190 KB
// was written to disk several times over. With large_value_files a value of largeValueBytes or
// more is appended once to a value file (segment.go) and bbolt keeps under its key a pointer of
// 36 bytes (segment.go): the leaves bbolt rewrites hold pointers, not span batches.
//
// Durable state is written before it is applied: a value is appended (and with fsync, synced)
// before the bbolt transaction that points at it; what this client remembers (which key's value
// is in which segment, how many live values a segment holds) changes only once that transaction
// committed. A transaction that fails, or a SIGKILL before or after it, leaves at most bytes that
// nothing points at. A segment that holds no live value and is not the one being appended to is
// removed; at open each segment's records are checked against bbolt (openValueFiles), which
// reclaims what a crash left. There is no index besides bbolt: the segments describe themselves.

const (
	// largeValueBytes: the smallest value kept in a value file. A queue item is a gzip span batch
	// of tens to hundreds of KiB, the queue's metadata a few bytes.
	largeValueBytes = 16 << 10
	// segmentBytes: a segment takes no more appends once this size is reached. Small enough that
	// a queue that keeps up empties a segment, and the next one is written over it (the spare),
	// while its pages are still dirty in the page cache: they then reach the disk once, not at
	// each reuse (BenchmarkQueueWrites' dirtied-KB/item: 2-8 KB per item of 190 KB, 65 KB with
	// segments of 64 MiB).
	segmentBytes = 8 << 20
)

// valueFileOptions are the settings of one component's value files.
type valueFileOptions struct {
	dir          string // the component's directory of segments
	writeLarge   bool   // large_value_files: large values go to the segments
	fsync        bool   // contrib's fsync: sync a segment before the transaction that points at it
	maxBytes     int64  // contrib's max_size, also the bound of the segments' bytes (0: none)
	largeValue   int
	segmentBytes int64
	logger       *zap.Logger
}

// valueFileClient is a component's storage client whose large values are in segments.
type valueFileClient struct {
	inner storage.Client
	opts  valueFileOptions

	mu       sync.Mutex // one operation at a time: appends, commits and what is remembered of them
	segments map[uint64]*segment
	active   *segment // the segment appended to; nil until the first large value
	// spare is an emptied segment that the next rotation renames and writes over from its start:
	// writing over a file's pages costs the kernel less than growing a new file (measured in
	// BenchmarkQueueWrites), and bbolt reuses its pages likewise.
	spare *segment
	next  uint64 // the number of the next new segment
	bytes int64  // the bytes on disk of all segments, the spare included, for maxBytes
	where map[string]recordRef
}

// recordRef is where the value bbolt points at for a key lives.
type recordRef struct {
	seg uint64
	off int64
}

// openValueFiles opens the segments of a component's storage, keeps those that hold a value
// bbolt points at and removes the others. Without large_value_files and with no segment left, it
// returns the inner client itself: the files are contrib's, nothing changes.
func openValueFiles(ctx context.Context, inner storage.Client, opts valueFileOptions) (storage.Client, error) {
	c := &valueFileClient{
		inner:    inner,
		opts:     opts,
		segments: map[uint64]*segment{},
		where:    map[string]recordRef{},
		next:     1,
	}
	entries, err := os.ReadDir(opts.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("value files %s: %w", opts.dir, err)
	}
	type found struct {
		seg *segment
		rec scannedRecord
		get *storage.Operation
	}
	var records []found
	var gets []*storage.Operation
	for _, e := range entries {
		num, ok := parseSegmentName(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		seg, recs, err := openSegment(filepath.Join(opts.dir, e.Name()), num)
		if err != nil {
			c.closeSegments()
			return nil, err
		}
		c.segments[num] = seg
		c.bytes += seg.fileSize
		c.next = max(c.next, num+1)
		for _, r := range recs {
			get := storage.GetOperation(r.key)
			gets = append(gets, get)
			records = append(records, found{seg: seg, rec: r, get: get})
		}
	}
	if len(gets) > 0 {
		if err := inner.Batch(ctx, gets...); err != nil {
			c.closeSegments()
			return nil, fmt.Errorf("value files %s: reading the keys of their records: %w", opts.dir, err)
		}
	}
	for _, f := range records {
		if p, ok := decodePointer(f.get.Value); ok && p.seg == f.seg.num && p.off == f.rec.off {
			f.seg.live++
			c.where[f.rec.key] = recordRef{seg: f.seg.num, off: f.rec.off}
		}
	}
	c.sweep(false)
	if !opts.writeLarge && len(c.segments) == 0 {
		_ = os.Remove(opts.dir) // empty once drained; a leftover directory is harmless
		return inner, nil
	}
	if opts.writeLarge {
		if err := os.MkdirAll(opts.dir, 0o750); err != nil {
			c.closeSegments()
			return nil, fmt.Errorf("value files %s: %w", opts.dir, err)
		}
	}
	return c, nil
}

func (c *valueFileClient) Get(ctx context.Context, key string) ([]byte, error) {
	op := storage.GetOperation(key)
	if err := c.Batch(ctx, op); err != nil {
		return nil, err
	}
	return op.Value, nil
}

func (c *valueFileClient) Set(ctx context.Context, key string, value []byte) error {
	return c.Batch(ctx, storage.SetOperation(key, value))
}

func (c *valueFileClient) Delete(ctx context.Context, key string) error {
	return c.Batch(ctx, storage.DeleteOperation(key))
}

// Batch appends the large values of its Set operations to the active segment, commits the
// operations to bbolt with pointers in their place, then reads back the values of its Get
// operations that are pointers, and only then counts which segments lost or gained live values.
func (c *valueFileClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.batch(ctx, ops)
}

func (c *valueFileClient) batch(ctx context.Context, ops []*storage.Operation) error {
	var unsynced []*segment // the segments appended to in this batch
	defer func() {
		for _, seg := range unsynced {
			seg.pending = false
		}
		c.sweep(c.opts.writeLarge) // what nothing points at any more, also after a failed commit
	}()

	stored := ops
	var appended map[int]recordRef
	for i, op := range ops {
		if op.Type != storage.Set || !c.opts.writeLarge || len(op.Value) < c.opts.largeValue {
			continue
		}
		if appended == nil {
			stored = slices.Clone(ops) // the caller's operations keep their values
			appended = map[int]recordRef{}
		}
		seg, ref, ptr, err := c.append(op.Key, op.Value)
		if err != nil {
			return err
		}
		stored[i] = storage.SetOperation(op.Key, ptr)
		appended[i] = ref
		if !seg.pending {
			seg.pending = true
			unsynced = append(unsynced, seg)
		}
	}
	if c.opts.fsync {
		for _, seg := range unsynced {
			if err := seg.file.Sync(); err != nil {
				return fmt.Errorf("value file %s: %w", seg.path, err)
			}
		}
	}
	if err := c.inner.Batch(ctx, stored...); err != nil {
		return err
	}

	var errs []error
	for _, op := range stored {
		if op.Type == storage.Get {
			value, err := c.resolve(op.Key, op.Value)
			op.Value = value
			errs = append(errs, err)
		}
	}
	for i, op := range stored {
		switch op.Type {
		case storage.Set, storage.Delete:
			c.forget(op.Key)
			if ref, ok := appended[i]; ok {
				c.where[op.Key] = ref
				c.segments[ref.seg].live++
			}
		}
	}
	return errors.Join(errs...)
}

// Walk is contrib's (storage.Walker), with the values of pointers read back. The operations fn
// returns are applied once the walk is over, as one Batch; no other operation of this client runs
// in between.
func (c *valueFileClient) Walk(ctx context.Context, fn storage.WalkFunc) error {
	walker, ok := c.inner.(storage.Walker)
	if !ok {
		return errors.New("svc_file_storage: this storage cannot list its keys")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var ops []*storage.Operation
	err := walker.Walk(ctx, func(key string, stored []byte) ([]*storage.Operation, error) {
		value, err := c.resolve(key, stored)
		if err != nil {
			return nil, err
		}
		more, err := fn(key, value)
		ops = append(ops, more...)
		return nil, err
	})
	if err != nil || len(ops) == 0 {
		return err
	}
	return c.batch(ctx, ops)
}

// append writes a record to the active segment, starting a new one when it is full.
func (c *valueFileClient) append(key string, value []byte) (*segment, recordRef, []byte, error) {
	size := recordSize(key, value)
	full := func() bool { return c.opts.maxBytes > 0 && c.bytes+size > c.opts.maxBytes }
	if full() && c.active != nil && c.active.live == 0 && !c.active.pending {
		// The active segment holds only values that are gone: let it go to make room.
		c.active = nil
	}
	if full() {
		c.sweep(false)
		c.dropSpare()
	}
	if full() {
		return nil, recordRef{}, nil, fmt.Errorf("value files %s: max_size of %d bytes reached: %w", c.opts.dir, c.opts.maxBytes, storage.ErrStorageFull)
	}
	if c.active == nil || (c.active.size > 0 && c.active.size+size > c.opts.segmentBytes) {
		if err := c.rotate(); err != nil {
			return nil, recordRef{}, nil, err
		}
	}
	seg := c.active
	grown := seg.fileSize
	off, crc, err := seg.append(key, value)
	c.bytes += seg.fileSize - grown
	if err != nil {
		// What was written of it stays in a segment that takes no more appends: a torn record,
		// which nothing points at.
		c.active = nil
		return nil, recordRef{}, nil, fmt.Errorf("value file %s: %w", seg.path, err)
	}
	ptr := encodePointer(pointer{seg: seg.num, off: off, valueLen: uint32(len(value)), crc: crc})
	return seg, recordRef{seg: seg.num, off: off}, ptr, nil
}

// rotate starts a new active segment, the spare renamed or a new file; the old one goes in sweep
// once nothing points at it.
func (c *valueFileClient) rotate() error {
	c.active = nil
	num := c.next
	seg := c.spare
	if seg != nil {
		c.spare = nil
		if err := seg.reuse(c.opts.dir, num); err != nil {
			c.bytes -= seg.fileSize
			_ = seg.remove()
			seg = nil
		}
	}
	if seg == nil {
		var err error
		if seg, err = createSegment(c.opts.dir, num); err != nil {
			return err
		}
	}
	c.next++
	c.segments[num] = seg
	if c.opts.fsync {
		// The segment's name must last as long as the pointers to its records.
		if err := syncDir(c.opts.dir); err != nil {
			return fmt.Errorf("value files %s: %w", c.opts.dir, err) // not active: sweep takes it back
		}
	}
	c.active = seg
	return nil
}

// resolve returns the value a stored value stands for: itself, or the record it points at.
func (c *valueFileClient) resolve(key string, stored []byte) ([]byte, error) {
	p, ok := decodePointer(stored)
	if !ok {
		return stored, nil
	}
	seg := c.segments[p.seg]
	var value []byte
	var err error
	if seg == nil {
		err = fmt.Errorf("value of key %q: value file %s is missing", key, filepath.Join(c.opts.dir, segmentName(p.seg)))
	} else {
		value, err = seg.read(key, p)
	}
	if err != nil {
		// Logged here as well: exporterhelper's queue drops an item it cannot read with a debug line.
		c.opts.logger.Error("svc_file_storage: a stored value cannot be read back", zap.Error(err))
	}
	return value, err
}

// forget records that key no longer points at the record it pointed at, if any.
func (c *valueFileClient) forget(key string) {
	ref, ok := c.where[key]
	if !ok {
		return
	}
	delete(c.where, key)
	if seg := c.segments[ref.seg]; seg != nil {
		seg.live--
	}
}

// sweep removes the segments that hold no live value, except the active one and one being
// appended to by the batch under way; with keepSpare the first of them becomes the spare.
func (c *valueFileClient) sweep(keepSpare bool) {
	for num, seg := range c.segments {
		if seg.live > 0 || seg == c.active || seg.pending {
			continue
		}
		if keepSpare && c.spare == nil {
			delete(c.segments, num)
			c.spare = seg
			continue
		}
		// A segment that cannot be removed now is removed at the next open.
		if seg.remove() == nil {
			delete(c.segments, num)
			c.bytes -= seg.fileSize
		}
	}
}

// dropSpare removes the spare segment, if any.
func (c *valueFileClient) dropSpare() {
	if c.spare != nil && c.spare.remove() == nil {
		c.bytes -= c.spare.fileSize
		c.spare = nil
	}
}

func (c *valueFileClient) closeSegments() error {
	var errs []error
	for _, seg := range c.segments {
		errs = append(errs, seg.file.Close())
	}
	return errors.Join(errs...)
}

// Close leaves the segments that hold live values (and the active one: the next open removes it
// if it holds none) and removes the spare.
func (c *valueFileClient) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropSpare()
	if c.spare != nil { // not removed: the next open does
		_ = c.spare.file.Close()
	}
	return errors.Join(c.closeSegments(), c.inner.Close(ctx))
}
