package journal // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"
)

// Layout (the storage client lists no keys): each record under "r/<id>", and "journal/index", the
// range [first, next) of ids that may be live, written in every Batch; ids whose key is gone are holes.
const (
	recordPrefix  = "r/"
	indexKey      = "journal/index"
	indexVersion  = 1 // the versions tag the encodings, so a later format can read older ones
	recordVersion = 1
	recoverChunk  = 256           // records one Batch of gets reads at recovery
	recordHeader  = 1 + 1 + 4 + 8 // version, kind, crc32 of what follows, held-at unix nanos
	rangeSlack    = 1024          // compactRange: how far the range may exceed twice the live records
	maxMoves      = 64            // and how many records it moves forward at once
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Storage is the journal in a collector storage extension client (file_storage: a bbolt file;
// a Batch is one transaction, so a record is durable against SIGKILL once Append returns).
type Storage struct {
	client storage.Client
	// mu guards the fields below, not a transaction: while one runs, writers queue their
	// operations in pending and wait (on turn); the first of them to go next writes them all.
	mu      sync.Mutex
	turn    sync.Cond
	pending *write
	running bool
	// first and next bound the ids that may be live; live holds those that are, each with the id
	// its caller knows it by (its own, unless compactRange moved it; moved maps that id back).
	first, next uint64
	live        map[uint64]liveRecord
	moved       map[uint64]uint64
	// owed are records no longer live whose delete is not written yet: every later transaction
	// deletes them until one succeeds, and until then a restart recovers them (at least once).
	owed map[uint64]struct{}
	lazy []Kind
}

// write is one transaction's operations and its outcome, shared by the writers waiting for it.
type write struct {
	ops      []*storage.Operation
	appended []uint64 // the ids of the records it writes, in order: no longer live if it fails
	done     bool
	err      error
}

// liveRecord is lazy when a late delete only restores what is already forgotten or over (lazyKinds
// and the kinds Open adds; not held spans or content, which would deliver again): its delete waits for the next
// Append (or Flush), so a call that drops spans costs one transaction, not two.
type liveRecord struct {
	id   uint64
	lazy bool
}

var lazyKinds = []Kind{KindOpen, KindDropped, KindOpenParents}

var _ Journal = (*Storage)(nil)

// Open returns the journal and the records a previous process left, oldest first; one that cannot
// be decoded is logged, deleted and skipped; an unreadable index is an error. lazy: kinds of other
// owners whose late delete is harmless (liveRecord).
func Open(ctx context.Context, client storage.Client, logger *zap.Logger, lazy ...Kind) (*Storage, []Record, error) {
	s := &Storage{client: client, first: 1, next: 1, live: map[uint64]liveRecord{}, moved: map[uint64]uint64{},
		owed: map[uint64]struct{}{}, lazy: append(slices.Clip(lazyKinds), lazy...)}
	s.turn.L = &s.mu
	raw, err := client.Get(ctx, indexKey)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: read the index: %w", err)
	}
	if raw == nil {
		return s, nil, nil // a new journal
	}
	if s.first, s.next, err = decodeIndex(raw); err != nil {
		return nil, nil, fmt.Errorf("journal: index %q: %w", indexKey, err)
	}
	var records []Record
	for from := s.first; from < s.next; from += recoverChunk {
		to := min(from+recoverChunk, s.next)
		ops := make([]*storage.Operation, 0, to-from)
		for id := from; id < to; id++ {
			ops = append(ops, storage.GetOperation(recordKey(id)))
		}
		if err := client.Batch(ctx, ops...); err != nil {
			return nil, nil, fmt.Errorf("journal: read records %d..%d: %w", from, to-1, err)
		}
		for i, op := range ops {
			id := from + uint64(i)
			if op.Value == nil {
				continue // removed out of order: a hole
			}
			rec, err := decodeRecord(op.Value)
			if err != nil {
				logger.Warn("journal: skipping a corrupt record", zap.Uint64("id", id), zap.Int("bytes", len(op.Value)), zap.Error(err))
				s.owed[id] = struct{}{}
				continue
			}
			rec.ID = id
			records = append(records, rec)
			s.live[id] = liveRecord{id: id, lazy: slices.Contains(s.lazy, rec.Kind)}
		}
	}
	// Oldest first by time: compactRange may have moved an old record past newer ones.
	slices.SortStableFunc(records, func(a, b Record) int { return a.HeldAt.Compare(b.HeldAt) })
	corrupt := len(s.owed)
	s.mu.Lock()
	err = s.commit(ctx)
	s.mu.Unlock()
	if err != nil { // the corrupt records go, the range stored tightened
		return nil, nil, writeError("journal: rewrite the index", err)
	}
	if len(records) > 0 || corrupt > 0 {
		logger.Info("journal: recovered held state", zap.Int("records", len(records)), zap.Int("corrupt", corrupt))
	}
	return s, records, nil
}

func (s *Storage) Append(ctx context.Context, kind Kind, heldAt time.Time, metadata map[string][]string, payload []byte) (uint64, error) {
	value := encodeRecord(kind, heldAt, metadata, payload)
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.next
	s.next++
	s.live[id] = liveRecord{id: id, lazy: slices.Contains(s.lazy, kind)}
	if err := s.commit(ctx, storage.SetOperation(recordKey(id), value)); err != nil {
		return 0, writeError("journal: append", err)
	}
	return id, nil
}

// Remove deletes the records, in one transaction; ids that are not live are ignored. The delete of
// lazy records is left owed, and so is a failed one: every later write retries it until it succeeds.
func (s *Storage) Remove(ctx context.Context, ids ...uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := false
	for _, id := range ids {
		if at, ok := s.moved[id]; ok {
			delete(s.moved, id)
			id = at
		}
		if rec, ok := s.live[id]; ok {
			delete(s.live, id)
			s.owed[id] = struct{}{}
			now = now || !rec.lazy
		}
	}
	if !now {
		return nil
	}
	return writeError("journal: remove", s.commit(ctx))
}

// Flush writes the owed deletes, if any. It first waits for the transaction under way and the
// writers queued behind it: a failed one gives its deletes back to owed, which Flush must see.
func (s *Storage) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.running || s.pending != nil {
		s.turn.Wait()
	}
	if len(s.owed) == 0 {
		return nil
	}
	return writeError("journal: remove", s.commit(ctx))
}

// commit writes ops (of at most one appended record, the last id handed out) with the next
// transaction and waits for it; every transaction also carries the owed deletes and the index
// range [first live id, next). Callers hold mu; it is released while a transaction runs, so
// writers that come meanwhile share the next one. Transactions run one at a time, in the order
// their ids were handed out: the range stored never shrinks below a record written.
func (s *Storage) commit(ctx context.Context, ops ...*storage.Operation) error {
	w := s.pending
	if w == nil {
		w = &write{}
		s.pending = w
	}
	w.ops = append(w.ops, ops...)
	if len(ops) > 0 {
		w.appended = append(w.appended, s.next-1)
	}
	for s.running && !w.done {
		s.turn.Wait()
	}
	if w.done {
		return w.err
	}
	s.running, s.pending = true, nil
	if len(w.appended) > 0 {
		s.compactRange(ctx)
	}
	first, owed := s.firstLive(s.first, s.next), s.owed
	if len(owed) > 0 {
		s.owed = map[uint64]struct{}{}
	}
	for id := range owed {
		w.ops = append(w.ops, storage.DeleteOperation(recordKey(id)))
	}
	w.ops = append(w.ops, storage.SetOperation(indexKey, encodeIndex(first, s.next)))
	s.mu.Unlock()
	err := s.client.Batch(ctx, w.ops...)
	s.mu.Lock()
	if err == nil {
		s.first = max(s.first, first)
	} else { // nothing written: its records are not live, its deletes still owed
		for _, id := range w.appended {
			delete(s.live, id)
		}
		if n := len(w.appended); n > 0 && s.next == w.appended[n-1]+1 {
			s.next = w.appended[0] // no id handed out since: they are used again
		}
		maps.Copy(s.owed, owed)
	}
	w.done, w.err, s.running = true, err, false
	s.turn.Broadcast()
	return err
}

// firstLive is the first live id in [from, next), or next.
func (s *Storage) firstLive(from, next uint64) uint64 {
	for from < next && s.live[from] == (liveRecord{}) { // each id is passed once: amortized O(1)
		from++
	}
	return from
}

// compactRange keeps the ids a restart reads within twice the live records and rangeSlack (a record
// live for hours would keep the range from advancing): it moves the oldest live records forward,
// each under a new id, in a transaction of its own (callers still remove them by the id they
// know); a failure changes nothing. The one place mu is held across a transaction (rare: once in
// about rangeSlack writes), so that no Remove sees a record half moved. Callers hold mu.
func (s *Storage) compactRange(ctx context.Context) {
	if s.next-s.first <= rangeSlack+2*uint64(len(s.live)) {
		return
	}
	next := s.next
	moves := map[uint64]uint64{} // new id: old id
	var ops []*storage.Operation
	for id := s.first; id < s.next && len(moves) < maxMoves; id++ {
		if _, ok := s.live[id]; !ok {
			continue
		}
		value, err := s.client.Get(ctx, recordKey(id))
		if err != nil || value == nil {
			break
		}
		ops = append(ops, storage.SetOperation(recordKey(next), value), storage.DeleteOperation(recordKey(id)))
		moves[next] = id
		next++
	}
	if len(moves) == 0 {
		return
	}
	move := func(to, from uint64) {
		s.live[to] = s.live[from]
		delete(s.live, from)
	}
	for to, from := range moves {
		move(to, from)
	}
	for id := range s.owed { // the range passes them: their keys go with it
		ops = append(ops, storage.DeleteOperation(recordKey(id)))
	}
	first := s.firstLive(s.first, next)
	if s.client.Batch(ctx, append(ops, storage.SetOperation(indexKey, encodeIndex(first, next)))...) != nil {
		for to, from := range moves {
			move(from, to)
		}
		return
	}
	for to := range moves {
		s.moved[s.live[to].id] = to
	}
	clear(s.owed)
	s.first, s.next = first, next
}

// Close makes a last attempt at the owed deletes and releases the storage client.
func (s *Storage) Close(ctx context.Context) error {
	return errors.Join(s.Flush(ctx), s.client.Close(ctx))
}

// writeError keeps storage.ErrStorageFull recognizable (errors.Is) for the caller's refusal.
func writeError(what string, err error) error {
	if errors.Is(err, storage.ErrStorageFull) {
		what += ": storage full"
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

func recordKey(id uint64) string { return recordPrefix + strconv.FormatUint(id, 10) }

func encodeIndex(first, next uint64) []byte {
	b := append(make([]byte, 0, 1+8+8), indexVersion)
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(b, first), next)
}

func decodeIndex(b []byte) (first, next uint64, err error) {
	if len(b) != 17 || b[0] != indexVersion {
		return 0, 0, fmt.Errorf("unknown encoding (%d bytes, version %d)", len(b), b[0])
	}
	first, next = binary.BigEndian.Uint64(b[1:]), binary.BigEndian.Uint64(b[9:])
	if first == 0 || first > next {
		return 0, 0, fmt.Errorf("invalid range [%d, %d)", first, next)
	}
	return first, next, nil
}

// encodeRecord: version, kind, crc32c of the rest, held-at unix nanos, the metadata (uvarint
// count of keys in sorted order; each key, its count of values and the values, each as uvarint
// length + bytes), then the payload to the end.
func encodeRecord(kind Kind, heldAt time.Time, metadata map[string][]string, payload []byte) []byte {
	b := make([]byte, recordHeader, recordHeader+len(payload)+64*(1+len(metadata)))
	b[0], b[1] = recordVersion, byte(kind)
	binary.BigEndian.PutUint64(b[6:], uint64(heldAt.UnixNano()))
	b = binary.AppendUvarint(b, uint64(len(metadata)))
	for _, k := range slices.Sorted(maps.Keys(metadata)) {
		b = binary.AppendUvarint(appendString(b, k), uint64(len(metadata[k])))
		for _, v := range metadata[k] {
			b = appendString(b, v)
		}
	}
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], crcTable))
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

var errTruncated = errors.New("truncated")

func decodeRecord(b []byte) (Record, error) {
	if len(b) < recordHeader {
		return Record{}, errTruncated
	}
	if b[0] != recordVersion {
		return Record{}, fmt.Errorf("unknown record version %d", b[0])
	}
	if want, got := binary.BigEndian.Uint32(b[2:]), crc32.Checksum(b[6:], crcTable); want != got {
		return Record{}, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	rec := Record{Kind: Kind(b[1]), HeldAt: time.Unix(0, int64(binary.BigEndian.Uint64(b[6:])))}
	if rec.Kind < KindSpans || rec.Kind > MaxKind {
		return Record{}, fmt.Errorf("unknown record kind %d", rec.Kind)
	}
	// The metadata's uvarint-prefixed fields; short once one is cut off (what is read then is unused).
	b, short := b[recordHeader:], false
	uvarint := func() uint64 {
		v, n := binary.Uvarint(b)
		short = short || n <= 0
		b = b[max(n, 0):]
		return v
	}
	str := func() string {
		n := uvarint()
		if n > uint64(len(b)) {
			short, n = true, 0
		}
		s := string(b[:n])
		b = b[n:]
		return s
	}
	for i, n := uint64(0), uvarint(); i < n && !short; i++ {
		if rec.Metadata == nil {
			rec.Metadata = make(map[string][]string, min(n, 64))
		}
		k, nv := str(), uvarint()
		vs := make([]string, 0, min(nv, 64))
		for j := uint64(0); j < nv && !short; j++ {
			vs = append(vs, str())
		}
		rec.Metadata[k] = vs
	}
	if short {
		return Record{}, fmt.Errorf("metadata: %w", errTruncated)
	}
	rec.Payload = b
	return rec, nil
}
