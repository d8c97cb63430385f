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
	mu     sync.Mutex
	// first and next bound the ids that may be live; live holds those that are, each with the id
	// its caller knows it by (its own, unless compactRange moved it; moved maps that id back).
	first, next uint64
	live        map[uint64]liveRecord
	moved       map[uint64]uint64
	// owed are records no longer live whose delete is not written yet: every later transaction
	// deletes them until one succeeds, and until then a restart recovers them (at least once).
	owed map[uint64]struct{}
}

// liveRecord is lazy when a late delete only restores what is already forgotten or over (lazyKinds:
// all but held spans, content and scores, which would deliver again): its delete waits for the next
// Append (or Flush), so a call that drops spans costs one transaction, not two.
type liveRecord struct {
	id   uint64
	lazy bool
}

var lazyKinds = []Kind{KindOpen, KindDropped, KindOpenParents, KindDecided, KindSession}

var _ Journal = (*Storage)(nil)

// Open returns the journal and the records a previous process left, oldest first; one that cannot
// be decoded is logged, deleted and skipped; an unreadable index is an error.
func Open(ctx context.Context, client storage.Client, logger *zap.Logger) (*Storage, []Record, error) {
	s := &Storage{client: client, first: 1, next: 1, live: map[uint64]liveRecord{}, moved: map[uint64]uint64{},
		owed: map[uint64]struct{}{}}
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
			s.live[id] = liveRecord{id: id, lazy: slices.Contains(lazyKinds, rec.Kind)}
		}
	}
	// Oldest first by time: compactRange may have moved an old record past newer ones.
	slices.SortStableFunc(records, func(a, b Record) int { return a.HeldAt.Compare(b.HeldAt) })
	corrupt := len(s.owed)
	if err := s.commit(ctx, s.next); err != nil { // the corrupt records go, the range stored tightened
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
	s.compactRange(ctx)
	id := s.next
	s.live[id] = liveRecord{id: id, lazy: slices.Contains(lazyKinds, kind)}
	if err := s.commit(ctx, id+1, storage.SetOperation(recordKey(id), value)); err != nil {
		delete(s.live, id)
		return 0, writeError("journal: append", err)
	}
	return id, nil
}

// Remove deletes the records; ids that are not live are ignored. The delete of lazy records is left
// owed, and so is a failed one: every later write retries it until it succeeds.
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
	return writeError("journal: remove", s.commit(ctx, s.next))
}

// Flush writes the owed deletes, if any.
func (s *Storage) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.owed) == 0 {
		return nil
	}
	return writeError("journal: remove", s.commit(ctx, s.next))
}

// commit runs ops, the owed deletes and the index range [first live id, next) in one transaction;
// when it fails nothing changed but what the caller undoes. Callers hold mu.
func (s *Storage) commit(ctx context.Context, next uint64, ops ...*storage.Operation) error {
	first := s.first // each id is passed once: amortized O(1)
	for first < next && s.live[first] == (liveRecord{}) {
		first++
	}
	for id := range s.owed {
		ops = append(ops, storage.DeleteOperation(recordKey(id)))
	}
	ops = append(ops, storage.SetOperation(indexKey, encodeIndex(first, next)))
	if err := s.client.Batch(ctx, ops...); err != nil {
		return err
	}
	clear(s.owed)
	s.first, s.next = first, next
	return nil
}

// compactRange keeps the ids a restart reads within twice the live records and rangeSlack (a record
// live for hours would keep the range from advancing): it moves the oldest live records forward,
// each under a new id, in one transaction (callers still remove them by the id they know); a
// failure changes nothing. Callers hold mu.
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
	if len(moves) == 0 || s.commit(ctx, next, ops...) != nil {
		return
	}
	for to, from := range moves { // the range on disk tightens with the caller's commit
		s.live[to] = s.live[from]
		delete(s.live, from)
		s.moved[s.live[to].id] = to
	}
	for s.first < s.next && s.live[s.first] == (liveRecord{}) {
		s.first++
	}
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
	if rec.Kind < KindSpans || rec.Kind > KindScores {
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
