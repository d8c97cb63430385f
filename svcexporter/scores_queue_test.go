package svcexporter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	pdatareq "go.opentelemetry.io/collector/pdata/xpdata/request"
	"go.uber.org/zap/zapcore"

	"github.com/svc/svc-collector/pkg/scorerecord"
)

// testScoresExporter is an exporter that is not started: enough to make and read score requests.
func testScoresExporter(t *testing.T) (*svcExporter, *testEnv) {
	t.Helper()
	env := newTestEnv(t)
	exp, err := newSvcExporter(testConfig("http://127.0.0.1:9"), env.settings)
	require.NoError(t, err)
	t.Cleanup(exp.releaseVersionCheck)
	return exp, env
}

// trickyScores are score records whose JSON escapes: HTML characters, non-ASCII, line
// separators, nested metadata, a string value, a metadata value JSON cannot carry.
func trickyScores() plog.Logs {
	ld := makeScores(5)
	lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	a := lrs.At(0).Attributes()
	a.PutStr(scorerecord.AttrComment, "<b>fine</b> & \"quoted\" é \u2028 \t end")
	a.PutStr(scorerecord.AttrMetadataPrefix+"model", "gpt-<x>")
	a.PutEmptyMap(scorerecord.AttrMetadataPrefix+"nested").PutDouble("ratio", 0.25)
	a.PutDouble(scorerecord.AttrMetadataPrefix+"nan", math.NaN())
	lrs.At(1).Attributes().Remove(scorerecord.AttrID) // gets its deterministic id
	return ld
}

// The body of each request is byte for byte what json.Marshal made of its batch before.
func TestScoresArrayJSONIsJSONMarshalOfTheBatch(t *testing.T) {
	exp, _ := testScoresExporter(t)
	for name, ld := range map[string]plog.Logs{"tricky": trickyScores(), "250": makeScores(250)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			reqs := exp.readScores(ctx, ld)
			r := exp.newScoresRequest(ctx, ld)
			require.Equal(t, len(reqs), r.count())
			for _, c := range append(evenChunks(len(reqs), scorerecord.MaxBatchSize), itemRange{0, len(reqs)}, itemRange{1, 2}, itemRange{len(reqs) - 1, len(reqs)}) {
				want, err := json.Marshal(reqs[c.lo:c.hi])
				require.NoError(t, err)
				assert.Equal(t, string(want), string(r.arrayJSON(c.lo, c.hi)), "scores [%d, %d)", c.lo, c.hi)
			}
		})
	}
}

// A score request read back from the queue is the one queued: its context (pass-through
// credentials), its scores as they are sent, and the counts the queue sized it by.
func TestScoresQueueEncodingRoundTrip(t *testing.T) {
	exp, _ := testScoresExporter(t)
	enc := scoresQueueEncoding{exp: exp}
	ld := makeScores(250)
	// An invalid record: dropped before the queue, still one of the push's items.
	ld.ResourceLogs().At(1).ScopeLogs().At(0).LogRecords().AppendEmpty().Attributes().PutStr(scorerecord.AttrName, "")
	bigMetadata := client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{
		"authorization": {tenantA.authorization()},
		"x-large":       {strings.Repeat("v", 2*scoresItemRoom(0))},
	})})
	for name, tt := range map[string]struct {
		ctx     context.Context
		r       func() *scoresRequest
		inPlace bool
	}{
		"250 and an invalid one":        {passThroughCtx(), func() *scoresRequest { return exp.newScoresRequest(context.Background(), ld) }, true},
		"metadata larger than the room": {bigMetadata, func() *scoresRequest { return exp.newScoresRequest(context.Background(), ld) }, false},
		"the rest of a retry":           {passThroughCtx(), func() *scoresRequest { return exp.newScoresRequest(context.Background(), ld).from(100) }, false},
		"none":                          {passThroughCtx(), func() *scoresRequest { return exp.newScoresRequest(context.Background(), plog.NewLogs()) }, true},
	} {
		t.Run(name, func(t *testing.T) {
			r := tt.r()
			item, err := enc.Marshal(tt.ctx, r)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(item, scoresQueueMagic))
			if tt.inPlace && len(r.body) > 0 {
				assert.Same(t, &r.body[0], &item[len(item)-queueItemTrailer-len(r.body)], "the item is framed around the scores, not a copy")
			}
			ctx, got, err := enc.Unmarshal(item)
			require.NoError(t, err)
			assert.Equal(t, metadataOf(tt.ctx), metadataOf(ctx))
			read := got.(*scoresRequest)
			assert.Equal(t, r.ItemsCount(), read.ItemsCount())
			assert.Equal(t, r.BytesSize(), read.BytesSize())
			assert.Equal(t, r.count(), read.count())
			for _, c := range evenChunks(r.count(), scorerecord.MaxBatchSize) {
				assert.Equal(t, string(r.arrayJSON(c.lo, c.hi)), string(read.arrayJSON(c.lo, c.hi)))
			}
		})
	}
}

// Items queued by the release before (exporterhelper's own logs encoding) are read after the
// upgrade: their records read as the push reads them, with their context, and sized as
// exporterhelper sized them when it queued them (else the persistent queue's size drifts).
func TestScoresQueueEncodingReadsItemsOfTheStockEncoding(t *testing.T) {
	exp, env := testScoresExporter(t)
	enc := scoresQueueEncoding{exp: exp}
	ld := trickyScores()
	ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty().Attributes().PutStr(scorerecord.AttrName, "")
	stock := xexporterhelper.NewLogsQueueBatchSettings().Encoding
	xpdataItem, err := pdatareq.MarshalLogs(passThroughCtx(), ld)
	require.NoError(t, err)
	_, stockReq, err := stock.Unmarshal(xpdataItem)
	require.NoError(t, err)
	stockBytes, err := stock.Marshal(passThroughCtx(), stockReq)
	require.NoError(t, err)
	require.Len(t, stockBytes, len(xpdataItem), "what the stock encoding stores, up to the order of the metadata keys")
	plainItem, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	require.NoError(t, err)
	want, err := json.Marshal(exp.readScores(context.Background(), ld))
	require.NoError(t, err)

	for name, tt := range map[string]struct {
		item         []byte
		wantMetadata map[string][]string
	}{
		"xpdata request format with client metadata": {stockBytes, metadataOf(passThroughCtx())},
		"plain OTLP protobuf":                        {plainItem, map[string][]string{}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, got, err := enc.Unmarshal(tt.item)
			require.NoError(t, err)
			assert.Equal(t, tt.wantMetadata, metadataOf(ctx))
			r := got.(*scoresRequest)
			assert.Equal(t, stockReq.ItemsCount(), r.ItemsCount())
			assert.Equal(t, stockReq.BytesSize(), r.BytesSize())
			assert.Equal(t, string(want), string(r.arrayJSON(0, r.count())))
		})
	}
	made := exp.newScoresRequest(context.Background(), ld)
	assert.Equal(t, stockReq.ItemsCount(), made.ItemsCount(), "a queue bounded in items holds what it held before")
	assert.Equal(t, stockReq.BytesSize(), made.BytesSize(), "a queue bounded in bytes holds what it held before")
	assert.NotEmpty(t, env.logs.FilterMessage("Dropping an invalid score record").All(), "an invalid record is logged as before")

	// The other way round: the new format is not taken for the stock one.
	ours, err := enc.Marshal(context.Background(), exp.newScoresRequest(context.Background(), ld))
	require.NoError(t, err)
	_, _, err = stock.Unmarshal(ours)
	require.Error(t, err)
}

func TestScoresQueueEncodingRefusesCorruptItems(t *testing.T) {
	exp, env := testScoresExporter(t)
	enc := scoresQueueEncoding{exp: exp}
	good, err := enc.Marshal(passThroughCtx(), exp.newScoresRequest(context.Background(), makeScores(10)))
	require.NoError(t, err)
	flip := func(i int) []byte {
		out := bytes.Clone(good)
		out[i] ^= 0x40
		return out
	}
	// The first score one byte longer, the second one shorter: the lengths still add up.
	misframed := exp.newScoresRequest(context.Background(), makeScores(10))
	misframed.ends[0]++
	badFraming, err := enc.Marshal(passThroughCtx(), misframed)
	require.NoError(t, err)
	withCount := func(count byte) []byte {
		out := bytes.Clone(good)
		out[len(scoresQueueMagic)+2] = count
		return withCRC(out)
	}
	tests := []struct {
		name    string
		item    []byte
		wantErr string
	}{
		{name: "truncated", item: good[:len(good)/2], wantErr: "checksum mismatch"},
		{name: "magic alone", item: scoresQueueMagic, wantErr: "too short"},
		{name: "a byte of a score changed", item: flip(len(good) - 20), wantErr: "checksum mismatch"},
		{name: "newer format version", item: withCRC(append(append([]byte{}, good[:5]...), append([]byte{9}, good[6:]...)...)), wantErr: "format version 9"},
		{name: "fewer scores than stored", item: withCount(9), wantErr: "the scores take"},
		{name: "more scores than stored", item: withCount(11), wantErr: "the scores take"},
		{name: "a score length changed", item: badFraming, wantErr: "bad score framing"},
		{name: "not a queue item at all", item: []byte("\x0a\xff\xff\xff\xff\x0fgarbage"), wantErr: "unreadable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NotPanics(t, func() {
				_, req, err := enc.Unmarshal(tt.item)
				require.ErrorIs(t, err, errCorruptQueuedScores)
				assert.ErrorContains(t, err, tt.wantErr)
				assert.Nil(t, req)
			})
			dropped := env.logs.TakeAll()
			require.Len(t, dropped, 1, "an unreadable item is logged at error level")
			assert.Equal(t, zapcore.ErrorLevel, dropped[0].Level)
			assert.Contains(t, dropped[0].Message, "a score batch in the persistent queue cannot be read; it is dropped")
		})
	}
}

// MergeSplit moves scores as they are encoded: merged requests send every score of both in
// order, split ones are within max_size by either sizer, and no score is parsed or lost.
func TestScoresMergeSplit(t *testing.T) {
	exp, _ := testScoresExporter(t)
	ctx := context.Background()
	withInvalid := func(n int) *scoresRequest {
		ld := makeScores(n)
		ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty().Attributes().PutStr(scorerecord.AttrName, "")
		return exp.newScoresRequest(ctx, ld)
	}
	scoreSize := exp.newScoresRequest(ctx, makeScores(1)).BytesSize()
	tests := []struct {
		name      string
		sizer     exporterhelper.RequestSizerType
		maxSize   int
		a, b      int
		wantSizes []int // ItemsCount of each request; nil: more than one
		wantErr   string
	}{
		{name: "merge, no limit", sizer: exporterhelper.RequestSizerTypeItems, a: 3, b: 4, wantSizes: []int{9}},
		{name: "merge within max_size", sizer: exporterhelper.RequestSizerTypeItems, maxSize: 20, a: 3, b: 4, wantSizes: []int{9}},
		{name: "merge and split by items", sizer: exporterhelper.RequestSizerTypeItems, maxSize: 4, a: 3, b: 4, wantSizes: []int{4, 4, 1}},
		{name: "split alone by items", sizer: exporterhelper.RequestSizerTypeItems, maxSize: 2, a: 4, b: -1, wantSizes: []int{2, 2, 1}},
		// The two invalid records weigh no bytes and go first; scores differ in size.
		{name: "merge and split by bytes", sizer: exporterhelper.RequestSizerTypeBytes, maxSize: 3 * scoreSize, a: 3, b: 4},
		{name: "a score larger than max_size", sizer: exporterhelper.RequestSizerTypeBytes, maxSize: scoreSize / 2, a: 2, b: -1, wantSizes: []int{1}, wantErr: "dropping items: 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := withInvalid(tt.a)
			wantJSON := string(a.arrayJSON(0, a.count()))
			var b xexporterhelper.Request
			wantItems, wantBytes := a.ItemsCount(), a.BytesSize()
			if tt.b >= 0 {
				rb := withInvalid(tt.b)
				wantItems += rb.ItemsCount()
				wantBytes += rb.BytesSize()
				wantJSON = wantJSON[:len(wantJSON)-1] + "," + string(rb.arrayJSON(0, rb.count()))[1:]
				b = rb
			}
			reqs, err := a.MergeSplit(ctx, tt.maxSize, tt.sizer, b)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			var sizes []int
			var scores []json.RawMessage
			items, bytes := 0, 0
			for _, req := range reqs {
				r := req.(*scoresRequest)
				sizes = append(sizes, r.ItemsCount())
				items += r.ItemsCount()
				bytes += r.BytesSize()
				if tt.maxSize > 0 {
					size := r.ItemsCount()
					if tt.sizer == exporterhelper.RequestSizerTypeBytes {
						size = r.BytesSize()
					}
					assert.LessOrEqual(t, size, tt.maxSize)
				}
				if r.count() > 0 {
					var part []json.RawMessage
					require.NoError(t, json.Unmarshal(r.arrayJSON(0, r.count()), &part))
					scores = append(scores, part...)
				}
			}
			if tt.wantSizes != nil {
				assert.Equal(t, tt.wantSizes, sizes)
			} else {
				assert.Greater(t, len(sizes), 1, "%v", sizes)
			}
			if tt.wantErr == "" {
				assert.Equal(t, wantItems, items, "every record counted once")
				// Split, each score's part of the size is rounded down.
				assert.InDelta(t, wantBytes, bytes, float64(len(scores)), "the size is shared out, not counted twice")
				all, err := json.Marshal(scores)
				require.NoError(t, err)
				assert.Equal(t, wantJSON, string(all), "every score once, in order, as encoded")
			}
		})
	}

	_, err := withInvalid(1).MergeSplit(ctx, 0, exporterhelper.RequestSizerTypeRequests, nil)
	require.Error(t, err)
	_, err = withInvalid(1).MergeSplit(ctx, 0, exporterhelper.RequestSizerTypeItems, &spansRequest{})
	require.Error(t, err)
}

// previousReleaseLogs is the scores exporter as the release before built it: exporterhelper's
// own logs request, whose persistent queue stores plog in its own encoding.
func previousReleaseLogs(t testing.TB, set exporter.Settings, cfg *Config) exporter.Logs {
	t.Helper()
	exp, err := newSvcExporter(cfg, set)
	require.NoError(t, err)
	lg, err := exporterhelper.NewLogs(context.Background(), set, cfg, exp.pushScores,
		append(helperOptions(exp), exporterhelper.WithQueue(queueConfig(cfg)))...)
	require.NoError(t, err)
	return lg
}

// tenantScores are n score records of tenant tn with ids prefix-first, prefix-(first+1), ...,
// named after the tenant's public key, and an invalid record.
func tenantScores(tn tenant, first, n int) plog.Logs {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := range n {
		scorerecord.Write(lrs.AppendEmpty(), scorerecord.Score{
			ID:            fmt.Sprintf("%s-%d", tn.publicKey, first+i),
			TraceID:       testTraceID(first + i + 1),
			ObservationID: testSpanID(first + i + 1),
			Name:          tn.publicKey,
			Value:         pcommon.NewValueDouble(0.5),
			Timestamp:     pcommon.NewTimestampFromTime(scoreTime),
		})
	}
	lrs.AppendEmpty().Attributes().PutStr(scorerecord.AttrName, "")
	return ld
}

// scoreLog is what a platform accepted (answered 2xx): how many times each score id, and the
// scores sent with another tenant's credentials.
type scoreLog struct {
	mu    sync.Mutex
	ids   map[string]int
	mixed []string
}

func (l *scoreLog) add(t *testing.T, r *http.Request, body []byte) {
	var batch []map[string]any
	require.NoError(t, json.Unmarshal(body, &batch))
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range batch {
		l.ids[s["id"].(string)]++
		if owner := s["name"].(string); owner != tenantOf(r.Header.Get("Authorization")) && tenantOf(r.Header.Get("Authorization")) != "" {
			l.mixed = append(l.mixed, fmt.Sprintf("%s's score sent with %s's key", owner, tenantOf(r.Header.Get("Authorization"))))
		}
	}
}

func (l *scoreLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.ids {
		n += c
	}
	return n
}

// TestPersistentQueueDeliversScoresAfterRestart queues scores while the platform is down, stops
// the exporter, starts a new one on the same file_storage directory (a restart, or the upgrade
// from the release before) and checks that the platform gets every valid score once, each with
// its own tenant's credentials in pass-through mode.
func TestPersistentQueueDeliversScoresAfterRestart(t *testing.T) {
	tests := []struct {
		name        string
		writer      string // "this release" or "release before"
		passThrough bool
	}{
		{name: "restart", writer: "this release"},
		{name: "restart, pass-through", writer: "this release", passThrough: true},
		{name: "upgrade", writer: "release before"},
		{name: "upgrade, pass-through", writer: "release before", passThrough: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearCompressionEnv(t)
			ctx := context.Background()
			p := newFakePlatform(t)
			var down atomic.Bool
			log := &scoreLog{ids: map[string]int{}}
			p.setScores(func(w http.ResponseWriter, r *http.Request, body []byte) {
				if down.Load() {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				log.add(t, r, body)
				w.WriteHeader(http.StatusOK)
			})
			cfg := testConfig(p.srv.URL)
			if tt.passThrough {
				cfg = passThroughConfig(p.srv.URL)
			}
			withPersistentQueue(cfg)
			env := newTestEnv(t)
			var writer exporter.Logs
			if tt.writer == "this release" {
				var err error
				writer, err = NewFactory().CreateLogs(ctx, env.settings, cfg)
				require.NoError(t, err)
			} else {
				writer = previousReleaseLogs(t, env.settings, cfg)
			}
			const pushes, perPush = 6, 150
			want := map[string]int{}
			push := func() {
				for i := range pushes {
					tn := []tenant{tenantA, tenantB}[i%2]
					pushCtx := ctx
					if tt.passThrough {
						pushCtx = tn.ctx()
					}
					require.NoError(t, writer.ConsumeLogs(pushCtx, tenantScores(tn, i*perPush, perPush)))
					for k := range perPush {
						want[fmt.Sprintf("%s-%d", tn.publicKey, i*perPush+k)] = 1
					}
				}
			}
			var magic []byte
			if tt.writer == "this release" {
				magic = scoresQueueMagic
			}
			reader, err := NewFactory().CreateLogs(ctx, env.settings, cfg)
			require.NoError(t, err)
			throughRestart(t, queueRestart{
				env: env, platform: p, down: &down, path: scoresPath, signal: "logs", magic: magic,
				writer: writer, push: push, reader: reader,
				delivered: log.count, toDeliver: pushes * perPush,
			})

			log.mu.Lock()
			defer log.mu.Unlock()
			assert.Equal(t, want, log.ids, "every valid score exactly once")
			assert.Empty(t, log.mixed)
			for _, r := range p.received(scoresPath) {
				if !tt.passThrough {
					assert.Equal(t, tenant{testPublicKey, testSecretKey}.authorization(), r.header.Get("Authorization"))
				}
			}
		})
	}
}

// With sending_queue::batch on in pass-through mode, batched scores never mix tenants, and every
// score goes once.
func TestPassThroughScoreBatchesNeverMixTenants(t *testing.T) {
	clearCompressionEnv(t)
	p := newFakePlatform(t)
	log := &scoreLog{ids: map[string]int{}}
	p.setScores(func(w http.ResponseWriter, r *http.Request, body []byte) {
		log.add(t, r, body)
		w.WriteHeader(http.StatusOK)
	})
	cfg := batchingPassThroughConfig(p.srv.URL)
	env := newTestEnv(t)
	exp, err := NewFactory().CreateLogs(context.Background(), env.settings, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))

	var wg sync.WaitGroup
	for _, tn := range []tenant{tenantA, tenantB} {
		wg.Go(func() {
			for i := range 20 {
				assert.NoError(t, exp.ConsumeLogs(tn.ctx(), tenantScores(tn, i*5, 5)))
			}
		})
	}
	wg.Wait()
	require.NoError(t, exp.Shutdown(context.Background())) // flushes the batches
	log.mu.Lock()
	defer log.mu.Unlock()
	assert.Empty(t, log.mixed)
	assert.Len(t, log.ids, 200)
	for id, n := range log.ids {
		assert.Equal(t, 1, n, id)
	}
	assert.Less(t, len(p.received(scoresPath)), 40, "scores were batched (fewer requests than pushes)")
}

// Through the exporterhelper's retry, in memory and on file_storage: after a retryable failure
// the retry sends only the scores not accepted yet, with the ids they were sent with.
func TestScoresRetryResendsOnlyTheRest(t *testing.T) {
	for _, queue := range []string{"memory", "file_storage"} {
		t.Run(queue, func(t *testing.T) {
			clearCompressionEnv(t)
			p := newFakePlatform(t)
			log := &scoreLog{ids: map[string]int{}}
			var calls atomic.Int32
			p.setScores(func(w http.ResponseWriter, r *http.Request, body []byte) {
				if calls.Add(1) == 2 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				log.add(t, r, body)
				w.WriteHeader(http.StatusOK)
			})
			cfg := withPersistentQueue(testConfig(p.srv.URL))
			var host component.Host = componenttest.NewNopHost()
			if queue == "memory" {
				cfg.QueueConfig.Get().StorageID = nil
			} else {
				sh, ext := startFileStorage(t, t.TempDir())
				defer func() { require.NoError(t, ext.Shutdown(context.Background())) }()
				host = sh
			}
			env := newTestEnv(t)
			exp, err := NewFactory().CreateLogs(context.Background(), env.settings, cfg)
			require.NoError(t, err)
			require.NoError(t, exp.Start(context.Background(), host))
			ld := makeScores(250)
			for r := 0; r < ld.ResourceLogs().Len(); r++ { // ids made by the exporter
				lrs := ld.ResourceLogs().At(r).ScopeLogs().At(0).LogRecords()
				for i := 0; i < lrs.Len(); i++ {
					lrs.At(i).Attributes().Remove(scorerecord.AttrID)
				}
			}
			require.NoError(t, exp.ConsumeLogs(context.Background(), ld))
			require.Eventually(t, func() bool { return log.count() >= 250 }, 10*time.Second, 10*time.Millisecond)
			require.NoError(t, exp.Shutdown(context.Background()))

			log.mu.Lock()
			defer log.mu.Unlock()
			assert.Len(t, log.ids, 250)
			for id, n := range log.ids {
				assert.Equal(t, 1, n, "score %s", id)
			}
			assert.Equal(t, int32(4), calls.Load(), "100 accepted, 100 failed, then those 100 and the last 50")
		})
	}
}
