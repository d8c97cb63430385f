package svcspanfilterprocessor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
)

func TestStorageOption(t *testing.T) {
	tests := []struct {
		name    string
		raw     map[string]any
		want    *component.ID
		wantErr string
	}{
		{name: "absent", raw: map[string]any{}},
		{name: "file storage", raw: map[string]any{"storage": "file_storage/held"}, want: ptr(component.MustNewIDWithName("file_storage", "held"))},
		{name: "empty", raw: map[string]any{"storage": ""}, wantErr: "storage"},
		{name: "bad name", raw: map[string]any{"storage": "file storage"}, wantErr: "storage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			err := confmap.NewFromStringMap(tt.raw).Unmarshal(cfg)
			if err == nil {
				err = cfg.Validate()
			}
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.Storage)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// brokenStorage is a storage extension whose client cannot be opened (a directory that is not
// writable, a file locked by another collector).
type brokenStorage struct {
	component.StartFunc
	component.ShutdownFunc
}

func (brokenStorage) GetClient(context.Context, component.Kind, component.ID, string) (storage.Client, error) {
	return nil, errors.New("open /data/processor_svcspanfilter__held: permission denied")
}

func TestJournalStartFailsClearly(t *testing.T) {
	owner := component.NewID(metadata.Type)
	broken := component.MustNewIDWithName("file_storage", "broken")
	host := storagetest.NewStorageHost().
		WithNonStorageExtension("other").
		WithExtension(broken, brokenStorage{})
	tests := []struct {
		name    string
		storage component.ID
		wantErr []string
	}{
		{name: "missing extension", storage: component.MustNewIDWithName("file_storage", "absent"),
			wantErr: []string{`extension "file_storage/absent" is not running`, "service::extensions"}},
		{name: "not a storage extension", storage: storagetest.NewNonStorageID("other"),
			wantErr: []string{`"non_storage/other" is not a storage extension`}},
		{name: "client cannot be opened", storage: broken,
			wantErr: []string{`"file_storage/broken" cannot open the processor's storage (is its directory writable`, "permission denied"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.Storage = &tt.storage
			_, err := newProcessorJournal(cfg, owner, zap.NewNop()).(*storageJournal).start(context.Background(), host)
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}

func TestJournalWithoutStorageIsNop(t *testing.T) {
	j := newProcessorJournal(createDefaultConfig().(*Config), component.NewID(metadata.Type), zap.NewNop())
	assert.Equal(t, journal.Nop, j)
}

// Before Start the journal refuses (the processor refuses the data, retryably) instead of
// holding spans that would not survive a crash.
func TestJournalBeforeStartRefuses(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Storage = ptr(component.MustNewIDWithName("file_storage", "held"))
	j := newProcessorJournal(cfg, component.NewID(metadata.Type), zap.NewNop())
	_, err := j.Append(context.Background(), journal.KindSpans, time.Now(), nil, []byte("x"))
	require.ErrorIs(t, err, errJournalNotStarted)
}

// A restart finds what the previous start appended and did not remove.
func TestJournalRecoversAcrossRestarts(t *testing.T) {
	owner := component.NewID(metadata.Type)
	ext := storagetest.NewFileBackedStorageExtension("held", t.TempDir())
	host := storagetest.NewStorageHost().WithExtension(ext.ID, ext)
	cfg := createDefaultConfig().(*Config)
	cfg.Storage = &ext.ID
	ctx := context.Background()

	j := newProcessorJournal(cfg, owner, zap.NewNop()).(*storageJournal)
	recovered, err := j.start(ctx, host)
	require.NoError(t, err)
	require.Empty(t, recovered)
	heldAt := time.Unix(1763900000, 0)
	kept, err := j.Append(ctx, journal.KindSpans, heldAt, map[string][]string{"authorization": {"Basic x"}}, []byte("held spans"))
	require.NoError(t, err)
	done, err := j.Append(ctx, journal.KindSpans, heldAt, nil, []byte("delivered spans"))
	require.NoError(t, err)
	require.NoError(t, j.Remove(ctx, done))
	require.NoError(t, j.s.Swap(nil).Close(ctx))
	_, err = j.Append(ctx, journal.KindSpans, heldAt, nil, []byte("after shutdown"))
	require.ErrorIs(t, err, errJournalNotStarted)

	j = newProcessorJournal(cfg, owner, zap.NewNop()).(*storageJournal)
	recovered, err = j.start(ctx, host)
	require.NoError(t, err)
	defer func() { require.NoError(t, j.s.Swap(nil).Close(ctx)) }()
	require.Len(t, recovered, 1)
	assert.Equal(t, kept, recovered[0].ID)
	assert.Equal(t, "held spans", string(recovered[0].Payload))
	assert.Equal(t, []string{"Basic x"}, recovered[0].Metadata["authorization"])
	assert.True(t, heldAt.Equal(recovered[0].HeldAt))
}

// deleteCountingStorage is a storage extension whose client counts the deletes it writes.
type deleteCountingStorage struct {
	component.StartFunc
	component.ShutdownFunc
	storage.Client
	deletes *atomic.Int64
}

func (s deleteCountingStorage) GetClient(context.Context, component.Kind, component.ID, string,
) (storage.Client, error) {
	return s, nil
}

func (s deleteCountingStorage) Batch(ctx context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		if op.Type == storage.Delete {
			s.deletes.Add(1)
		}
	}
	return s.Client.Batch(ctx, ops...)
}

// The delete of a record of dropped spans rides on the next write; on an idle gateway, where no
// write comes, the releaser's tick writes it (not only the shutdown).
func TestIdleGatewayRemovesRecordsOfForgottenTraces(t *testing.T) {
	ctx := context.Background()
	id := component.MustNewIDWithName("file_storage", "counting")
	ext := deleteCountingStorage{Client: storagetest.NewInMemoryClient(component.KindProcessor, id, "held"),
		deletes: &atomic.Int64{}}
	cfg := createDefaultConfig().(*Config)
	cfg.Storage = &id
	cfg.TraceIntegrity.WaitDuration = 50 * time.Millisecond // the releaser ticks every 10 ms
	j := newProcessorJournal(cfg, component.NewID(metadata.Type), zap.NewNop())
	settings := processortest.NewNopSettings(metadata.Type)
	p, err := newSpanFilterProcessor(settings, cfg, new(consumertest.TracesSink), j)
	require.NoError(t, err)
	require.NoError(t, p.start(ctx, storagetest.NewStorageHost().WithExtension(id, ext)))
	defer func() { require.NoError(t, p.shutdown(ctx)) }()

	rec, err := j.Append(ctx, journal.KindDropped, time.Now(), nil, make([]byte, 33))
	require.NoError(t, err)
	require.NoError(t, j.Remove(ctx, rec))
	assert.Eventually(t, func() bool { return ext.deletes.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
}
