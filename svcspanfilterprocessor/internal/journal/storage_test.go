package journal

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func newClient() *storagetest.TestClient {
	return storagetest.NewInMemoryClient(component.KindProcessor, component.MustNewID("svcspanfilter"), "journal")
}

// open is a process starting on the storage another one left: same client, new journal.
func open(t *testing.T, c storage.Client) (*Storage, []Record, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	s, recs, err := Open(context.Background(), c, zap.New(core))
	require.NoError(t, err)
	return s, recs, logs
}

func ids(recs []Record) []uint64 {
	out := make([]uint64, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

func appendN(t *testing.T, s *Storage, n int) []uint64 {
	t.Helper()
	var out []uint64
	for i := range n {
		id, err := s.Append(context.Background(), KindSpans, time.Unix(1700000000, int64(i)), nil, []byte(fmt.Sprintf("payload %d", i)))
		require.NoError(t, err)
		out = append(out, id)
	}
	return out
}

func TestRecoverReturnsWhatWasAppended(t *testing.T) {
	c := newClient()
	s, recs, _ := open(t, c)
	require.Empty(t, recs)
	heldAt := time.Date(2026, 11, 23, 11, 50, 0, 123456789, time.UTC)
	want := []Record{
		{Kind: KindSpans, HeldAt: heldAt, Metadata: map[string][]string{"authorization": {"Basic cGs6c2s="}, "x-multi": {"a", "", "c"}}, Payload: []byte{0x0a, 0x00, 0xff}},
		{Kind: KindContent, HeldAt: heldAt.Add(time.Second), Payload: []byte("content")},
		{Kind: KindSpans, HeldAt: heldAt.Add(2 * time.Second), Metadata: map[string][]string{"empty": {}}, Payload: nil},
		{Kind: KindOpen, HeldAt: heldAt.Add(3 * time.Second), Payload: make([]byte, 24)},
	}
	for i, r := range want {
		id, err := s.Append(context.Background(), r.Kind, r.HeldAt, r.Metadata, r.Payload)
		require.NoError(t, err)
		want[i].ID = id
	}
	assert.Equal(t, []uint64{1, 2, 3, 4}, ids(want))

	_, got, logs := open(t, c)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].ID, got[i].ID)
		assert.Equal(t, want[i].Kind, got[i].Kind)
		assert.True(t, want[i].HeldAt.Equal(got[i].HeldAt), "held at %v, want %v", got[i].HeldAt, want[i].HeldAt)
		assert.Equal(t, string(want[i].Payload), string(got[i].Payload))
		assert.Equal(t, len(want[i].Metadata), len(got[i].Metadata))
		for k, v := range want[i].Metadata {
			assert.Equal(t, v, got[i].Metadata[k], "metadata %q", k)
		}
	}
	assert.Equal(t, 1, logs.FilterMessage("journal: recovered held state").Len())
}

func TestRemoveOutOfOrder(t *testing.T) {
	tests := []struct {
		name      string
		remove    [][]uint64 // Remove calls, in order
		recovered []uint64
		nextID    uint64 // id of the next Append after the restart
	}{
		{name: "nothing removed", recovered: []uint64{1, 2, 3, 4, 5}, nextID: 6},
		{name: "holes in the middle", remove: [][]uint64{{2}, {4}}, recovered: []uint64{1, 3, 5}, nextID: 6},
		{name: "oldest first", remove: [][]uint64{{1, 2}}, recovered: []uint64{3, 4, 5}, nextID: 6},
		{name: "newest first", remove: [][]uint64{{5}, {4, 3}}, recovered: []uint64{1, 2}, nextID: 6},
		{name: "all, in any order", remove: [][]uint64{{3}, {1, 5}, {2, 4}}, recovered: nil, nextID: 6},
		{name: "unknown and repeated ids ignored", remove: [][]uint64{{0, 2, 2, 99}, {2}}, recovered: []uint64{1, 3, 4, 5}, nextID: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient()
			s, _, _ := open(t, c)
			appendN(t, s, 5)
			for _, r := range tt.remove {
				require.NoError(t, s.Remove(context.Background(), r...))
			}
			s2, recs, _ := open(t, c)
			assert.Equal(t, tt.recovered, nilIfEmpty(ids(recs)))
			assert.Equal(t, len(tt.recovered), len(s2.live))
			id, err := s2.Append(context.Background(), KindSpans, time.Now(), nil, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.nextID, id, "ids are never reused")
			// The records of the first process can be removed by the second.
			require.NoError(t, s2.Remove(context.Background(), tt.recovered...))
			_, recs, _ = open(t, c)
			assert.Equal(t, []uint64{tt.nextID}, ids(recs))
		})
	}
}

func nilIfEmpty(s []uint64) []uint64 {
	if len(s) == 0 {
		return nil
	}
	return s
}

// Removed records leave no key behind, and the index range shrinks to the live records, so a
// long run does not make recovery read every id ever written.
func TestRemovedRecordsLeaveNoKeys(t *testing.T) {
	c := newClient()
	s, _, _ := open(t, c)
	appendN(t, s, 1000)
	for id := uint64(1); id < 1000; id++ {
		require.NoError(t, s.Remove(context.Background(), id))
	}
	for id := uint64(1); id < 1000; id++ {
		v, err := c.Get(context.Background(), recordKey(id))
		require.NoError(t, err)
		require.Nil(t, v, "record %d still stored", id)
	}
	raw, err := c.Get(context.Background(), indexKey)
	require.NoError(t, err)
	first, next, err := decodeIndex(raw)
	require.NoError(t, err)
	assert.Equal(t, [2]uint64{1000, 1001}, [2]uint64{first, next})
}

func TestCorruptRecordIsSkipped(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func([]byte) []byte
	}{
		{name: "flipped payload byte", corrupt: func(b []byte) []byte { b[len(b)-1] ^= 0x40; return b }},
		{name: "truncated header", corrupt: func(b []byte) []byte { return b[:5] }},
		{name: "truncated metadata", corrupt: func(b []byte) []byte { return reseal(b[:recordHeader+3]) }},
		{name: "unknown version", corrupt: func(b []byte) []byte { b[0] = 9; return b }},
		{name: "unknown kind", corrupt: func(b []byte) []byte { b[1] = byte(MaxKind) + 1; return reseal(b) }},
		{name: "empty value", corrupt: func([]byte) []byte { return []byte{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient()
			s, _, _ := open(t, c)
			_, err := s.Append(context.Background(), KindSpans, time.Now(), map[string][]string{"k": {"v"}}, []byte("first"))
			require.NoError(t, err)
			_, err = s.Append(context.Background(), KindSpans, time.Now(), map[string][]string{"k": {"v"}}, []byte("second"))
			require.NoError(t, err)
			raw, err := c.Get(context.Background(), recordKey(1))
			require.NoError(t, err)
			require.NoError(t, c.Set(context.Background(), recordKey(1), tt.corrupt(append([]byte(nil), raw...))))

			_, recs, logs := open(t, c)
			require.Len(t, recs, 1, "the good record is recovered")
			assert.Equal(t, "second", string(recs[0].Payload))
			assert.Equal(t, 1, logs.FilterMessage("journal: skipping a corrupt record").Len())
			gone, err := c.Get(context.Background(), recordKey(1))
			require.NoError(t, err)
			assert.Nil(t, gone, "the corrupt record is deleted, not reported at every start")
			_, recs, _ = open(t, c)
			assert.Equal(t, []uint64{2}, ids(recs))
		})
	}
}

// reseal recomputes the checksum, so the damage is found by the decoder's other checks.
func reseal(b []byte) []byte {
	if len(b) >= recordHeader {
		sum := crc32.Checksum(b[6:], crcTable)
		b[2], b[3], b[4], b[5] = byte(sum>>24), byte(sum>>16), byte(sum>>8), byte(sum)
	}
	return b
}

func TestCorruptIndexFailsOpen(t *testing.T) {
	c := newClient()
	require.NoError(t, c.Set(context.Background(), indexKey, []byte("not an index")))
	_, _, err := Open(context.Background(), c, zap.NewNop())
	require.ErrorContains(t, err, `journal: index "journal/index"`)
}

// failingClient fails every Batch with err once armed.
type failingClient struct {
	storage.Client
	err error
}

// Close leaves the in-memory client open, for the test to look at what was stored.
func (f *failingClient) Close(context.Context) error { return nil }

func (f *failingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if f.err != nil {
		return f.err
	}
	return f.Client.Batch(ctx, ops...)
}

func TestWriteErrorsWriteNothing(t *testing.T) {
	tests := []struct {
		name string
		err  error
		full bool
	}{
		{name: "storage full", err: storage.ErrStorageFull, full: true},
		{name: "i/o error", err: errors.New("write /data/file_storage: input/output error")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &failingClient{Client: newClient()}
			s, _, _ := open(t, c)
			appendN(t, s, 2)
			c.err = tt.err

			_, err := s.Append(context.Background(), KindSpans, time.Now(), nil, []byte("refused"))
			require.Error(t, err)
			assert.Equal(t, tt.full, errors.Is(err, storage.ErrStorageFull), "storage full stays recognizable: %v", err)
			assert.ErrorContains(t, err, "journal: append")
			require.Error(t, s.Remove(context.Background(), 1))
			assert.Len(t, s.live, 1, "a failed remove is owed, the record is no longer live")
			assert.Len(t, s.owed, 1)

			c.err = nil
			id, err := s.Append(context.Background(), KindSpans, time.Now(), nil, []byte("accepted"))
			require.NoError(t, err)
			assert.Equal(t, uint64(3), id, "the refused append used no id")
			assert.Empty(t, s.owed, "the append deleted the owed record in its transaction")
			_, recs, _ := open(t, c)
			assert.Equal(t, []uint64{2, 3}, ids(recs))
		})
	}
}

// A failed Remove is retried by the journal itself (with the next write, or at
// Close), so the record neither stays stored for ever nor pins the index range that recovery
// reads from; until it succeeds, a restart recovers the record (at least once, never lost).
func TestFailedRemoveIsRetried(t *testing.T) {
	tests := []struct {
		name  string
		retry func(t *testing.T, s *Storage)
	}{
		{name: "by the next append", retry: func(t *testing.T, s *Storage) {
			_, err := s.Append(context.Background(), KindSpans, time.Now(), nil, []byte("next"))
			require.NoError(t, err)
		}},
		{name: "by the next remove", retry: func(t *testing.T, s *Storage) {
			require.NoError(t, s.Remove(context.Background(), 3))
		}},
		{name: "at close", retry: func(t *testing.T, s *Storage) {
			require.NoError(t, s.Close(context.Background()))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &failingClient{Client: newClient()}
			s, _, _ := open(t, c)
			appendN(t, s, 3)
			c.err = errors.New("write /data/file_storage: input/output error")
			require.Error(t, s.Remove(context.Background(), 1))
			c.err = nil
			v, err := c.Client.Get(context.Background(), recordKey(1))
			require.NoError(t, err)
			require.NotNil(t, v, "until the retry succeeds the record stays (a restart recovers it)")

			tt.retry(t, s)
			v, err = c.Client.Get(context.Background(), recordKey(1))
			require.NoError(t, err)
			assert.Nil(t, v, "record 1 is deleted by the retry")
			raw, err := c.Client.Get(context.Background(), indexKey)
			require.NoError(t, err)
			first, _, err := decodeIndex(raw)
			require.NoError(t, err)
			assert.Greater(t, first, uint64(1), "the index range no longer starts at the removed record")
			assert.Empty(t, s.owed)
		})
	}
}

// countingClient counts the records read through Batch (Open reads the index range that way).
type countingClient struct {
	storage.Client
	gets, batches int
}

func (c *countingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	c.batches++
	for _, op := range ops {
		if op.Type == storage.Get {
			c.gets++
		}
	}
	return c.Client.Batch(ctx, ops...)
}

// A record that stays live while many others come and go (the dropped spans of a trace active for
// hours) does not keep the index range from advancing: a restart reads about as many ids as are
// live, not every id written since, and the record is still removed by the id it was appended with.
func TestLongLivedRecordDoesNotPinTheRange(t *testing.T) {
	c := newClient()
	s, _, _ := open(t, c)
	heldAt := time.Unix(1700000000, 0)
	pinned, err := s.Append(context.Background(), KindDropped, heldAt, nil, []byte("dropped spans"))
	require.NoError(t, err)
	for range 10 * rangeSlack {
		id := appendN(t, s, 1)[0]
		require.NoError(t, s.Remove(context.Background(), id))
	}
	reads := &countingClient{Client: c}
	_, recs, _ := open(t, reads)
	require.Len(t, recs, 1)
	assert.Equal(t, "dropped spans", string(recs[0].Payload))
	assert.True(t, heldAt.Equal(recs[0].HeldAt), "moved forward with its own time")
	assert.LessOrEqual(t, reads.gets, 2*rangeSlack, "ids read at the restart")

	require.NoError(t, s.Remove(context.Background(), pinned))
	require.NoError(t, s.Flush(context.Background()))
	_, recs, _ = open(t, c)
	assert.Empty(t, recs, "removed by the id it was appended with")
}

// Removing a record of open parents or dropped spans writes nothing by itself: the next append,
// or Flush when none comes, carries the delete. Until then a restart recovers the record (harmless:
// its traces are forgotten again); a record of held spans is deleted at once, as ever.
func TestRemovalOfOpenAndDroppedRecordsWaitsForTheNextWrite(t *testing.T) {
	tests := []struct {
		name  string
		write func(t *testing.T, s *Storage)
	}{
		{name: "the next append", write: func(t *testing.T, s *Storage) { appendN(t, s, 1) }},
		{name: "flush", write: func(t *testing.T, s *Storage) {
			require.NoError(t, s.Flush(context.Background()))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &countingClient{Client: newClient()}
			s, _, _ := open(t, c)
			var lazy []uint64
			for _, kind := range []Kind{KindOpen, KindDropped, KindOpenParents} {
				id, err := s.Append(context.Background(), kind, time.Now(), nil, []byte("ids"))
				require.NoError(t, err)
				lazy = append(lazy, id)
			}
			held := appendN(t, s, 1)[0]
			writes := c.batches
			require.NoError(t, s.Remove(context.Background(), lazy...))
			assert.Equal(t, writes, c.batches, "no transaction of its own")
			_, recs, _ := open(t, c.Client)
			assert.ElementsMatch(t, append(lazy, held), ids(recs), "a restart before the next write recovers them")

			tt.write(t, s)
			_, recs, _ = open(t, c.Client)
			assert.NotContains(t, ids(recs), lazy[0])
			assert.NotContains(t, ids(recs), lazy[1])
			writes = c.batches
			require.NoError(t, s.Remove(context.Background(), held))
			assert.Equal(t, writes+1, c.batches, "a record of held spans is deleted at once")
		})
	}
}

// When the transaction that moves records forward fails, nothing moved: the records are where
// they were, and they are still removed by the ids they were appended with.
func TestFailedMoveForwardChangesNothing(t *testing.T) {
	c := &failingClient{Client: newClient()}
	s, _, _ := open(t, c)
	pinned := appendN(t, s, 1)[0]
	for range rangeSlack + 3 { // the next append moves it
		require.NoError(t, s.Remove(context.Background(), appendN(t, s, 1)[0]))
	}
	require.Empty(t, s.moved)
	c.err = errors.New("write /data/file_storage: input/output error")
	_, err := s.Append(context.Background(), KindSpans, time.Now(), nil, []byte("refused"))
	require.Error(t, err)
	assert.Empty(t, s.moved)
	_, recs, _ := open(t, c.Client)
	assert.Equal(t, []uint64{pinned}, ids(recs), "still stored under its own id")

	c.err = nil
	appendN(t, s, 1) // moves it forward
	assert.Contains(t, s.moved, pinned)
	require.NoError(t, s.Remove(context.Background(), pinned))
	_, recs, _ = open(t, c)
	assert.Len(t, recs, 1, "only the last append is left")
}

// blockingClient counts the Batches; once armed, it holds the next one until release is closed.
type blockingClient struct {
	storage.Client
	armed            atomic.Bool
	entered, release chan struct{}
	batches          atomic.Int64
	// failHeld, when set, is what the held Batch returns once released (it writes nothing).
	failHeld error
}

func (c *blockingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	c.batches.Add(1)
	if c.armed.CompareAndSwap(true, false) {
		close(c.entered)
		<-c.release
		if c.failHeld != nil {
			return c.failHeld
		}
	}
	return c.Client.Batch(ctx, ops...)
}

// A Flush (the shutdown's last write) that comes while another call's transaction carries the
// owed deletes waits for it: when that transaction fails, its deletes are owed again and Flush
// writes them, instead of returning at once and leaving the records to be delivered again after
// a restart.
func TestFlushWaitsForTheTransactionUnderWay(t *testing.T) {
	ctx := context.Background()
	c := &blockingClient{Client: newClient(), entered: make(chan struct{}), release: make(chan struct{}),
		failHeld: errors.New("write /data/file_storage: input/output error")}
	s, _, _ := open(t, c)
	id, err := s.Append(ctx, KindSpans, time.Now(), nil, []byte("spans"))
	require.NoError(t, err)
	c.armed.Store(true)
	removed := make(chan error, 1)
	go func() { removed <- s.Remove(ctx, id) }()
	<-c.entered // the removal's transaction is being written

	flushed := make(chan error, 1)
	go func() { flushed <- s.Flush(ctx) }()
	select {
	case err := <-flushed:
		t.Fatalf("Flush returned (%v) while the transaction carrying the owed delete was under way", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(c.release)
	require.Error(t, <-removed, "the held transaction failed")
	require.NoError(t, <-flushed)
	_, recs, _ := open(t, c.Client)
	assert.Empty(t, recs, "the delete the failed transaction gave back was written by Flush")
}

// The journal's lock is not held across a transaction: while one is being written, a removal that
// writes nothing returns at once, and the appends that arrive meanwhile share the next transaction
// (group commit), each durable when its Append returns.
func TestWritesDuringATransactionShareTheNext(t *testing.T) {
	ctx := context.Background()
	c := &blockingClient{Client: newClient(), entered: make(chan struct{}), release: make(chan struct{})}
	s, _, _ := open(t, c)
	lazy, err := s.Append(ctx, KindDropped, time.Now(), nil, []byte("ids"))
	require.NoError(t, err)
	c.armed.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() { appendN(t, s, 1) })
	<-c.entered // the first append's transaction is being written

	removed := make(chan error)
	go func() { removed <- s.Remove(ctx, lazy) }()
	select {
	case err := <-removed:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("a removal that writes nothing waited for another call's transaction")
	}
	const writers = 8
	for range writers {
		wg.Go(func() { appendN(t, s, 1) })
	}
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.pending != nil && len(s.pending.appended) == writers
	}, 5*time.Second, time.Millisecond, "the appends queue while the transaction runs")
	before := c.batches.Load()
	close(c.release)
	wg.Wait()
	assert.Equal(t, before+1, c.batches.Load(), "the queued appends (and the owed delete) take one transaction")
	_, recs, _ := open(t, c.Client)
	assert.Len(t, recs, 1+writers, "every append is durable; the lazy record's delete went with them")
}
