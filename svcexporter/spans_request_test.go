package svcexporter

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/featuregate"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/xpdata/pref"
	pdatareq "go.opentelemetry.io/collector/pdata/xpdata/request"
	"go.uber.org/zap/zapcore"
)

// queuedRequest is td as it comes back from the persistent queue: its body, not decoded.
func queuedRequest(t *testing.T, enc spansQueueEncoding, td ptrace.Traces) *spansRequest {
	t.Helper()
	item, err := enc.Marshal(context.Background(), newSpansRequest(td, enc.codec))
	require.NoError(t, err)
	_, req, err := enc.Unmarshal(item)
	require.NoError(t, err)
	r := req.(*spansRequest)
	require.False(t, r.decoded)
	return r
}

// corruptQueuedRequest is a queue item whose checksum is right but whose body, gzip as it should
// be, holds no OTLP protobuf (what a writer's bug, not the disk, would store).
func corruptQueuedRequest(t *testing.T, enc spansQueueEncoding, td ptrace.Traces) *spansRequest {
	t.Helper()
	var garbage bytes.Buffer
	zw := gzip.NewWriter(&garbage)
	_, err := zw.Write([]byte("\x0a\xff\xff\xff\xff\x0fnot a span batch"))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	wrong := newSpansRequest(td, enc.codec)
	wrong.body, wrong.bodyCompression = garbage.Bytes(), configcompression.TypeGzip
	item, err := enc.Marshal(context.Background(), wrong)
	require.NoError(t, err)
	_, req, err := enc.Unmarshal(item)
	require.NoError(t, err)
	return req.(*spansRequest)
}

// With the pdata pooling feature gate on, releasing spans for good resets them. The queue's
// consumers release (Unref) every request they read; only what the in-memory queue pinned (Ref)
// may be released, or the spans of a request read from storage are freed while the batcher still
// holds the request.
func TestSpansReferenceCounterReleasesOnlyWhatItPinned(t *testing.T) {
	require.NoError(t, featuregate.GlobalRegistry().Set(pref.UseProtoPooling.ID(), true))
	t.Cleanup(func() { require.NoError(t, featuregate.GlobalRegistry().Set(pref.UseProtoPooling.ID(), false)) })
	codec := testCodec(t, configcompression.TypeGzip)
	enc := spansQueueEncoding{codec: codec}
	stockItem := func(td ptrace.Traces) xexporterhelper.Request {
		item, err := pdatareq.MarshalTraces(context.Background(), td)
		require.NoError(t, err)
		_, req, err := enc.Unmarshal(item)
		require.NoError(t, err)
		return req
	}
	mergedQueued := func(td ptrace.Traces) xexporterhelper.Request {
		r := queuedRequest(t, enc, td)
		reqs, err := r.MergeSplit(context.Background(), 0, exporterhelper.RequestSizerTypeItems, queuedRequest(t, enc, makeTraces(1, 1, 2, 10)))
		require.NoError(t, err)
		require.Len(t, reqs, 1)
		return reqs[0]
	}
	tests := []struct {
		name          string
		request       func(td ptrace.Traces) xexporterhelper.Request // the request of td, as the queue hands it on
		pinned        bool                                           // the in-memory queue pinned it (Ref)
		wantSpanCount int
	}{
		{name: "from the persistent queue, stock format (decoded when read)", request: stockItem, wantSpanCount: 6},
		{name: "from the persistent queue, decoded by a merge", request: mergedQueued, wantSpanCount: 8},
		{name: "queued in memory", request: func(td ptrace.Traces) xexporterhelper.Request { return newSpansRequest(td, codec) }, pinned: true, wantSpanCount: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := makeTraces(2, 1, 3, 10)
			req := tt.request(td)
			if tt.pinned {
				spansReferenceCounter{}.Ref(req)
			}
			spansReferenceCounter{}.Unref(req) // the queue's consumer, after handing it to the batcher
			got, err := req.(*spansRequest).traces()
			require.NoError(t, err)
			assert.Equal(t, tt.wantSpanCount, got.SpanCount(), "the batcher still holds the spans")
			body, err := req.(*spansRequest).wireBody()
			require.NoError(t, err)
			sent, err := decodeSpanBody(body, configcompression.TypeGzip)
			require.NoError(t, err)
			assert.Equal(t, tt.wantSpanCount, sent.SpanCount(), "and sends them")
			if tt.pinned {
				// Unref released what Ref pinned: the pipeline's own reference is the last.
				pref.UnrefTraces(td)
				assert.Zero(t, td.SpanCount(), "freed by the pipeline's release")
			}
		})
	}
}

// The batcher calls MergeSplit(nil) for every request it takes: a batch read from the persistent
// queue that fits max_size passes as it is, not decoded, and is posted with the body it was
// stored with. One that does not fit is decoded and split.
func TestSpansMergeSplitPassesQueuedBatchesThatFit(t *testing.T) {
	td := makeTraces(2, 2, 5, 100) // 20 spans
	protoSize := (&ptrace.ProtoMarshaler{}).TracesSize(td)
	tests := []struct {
		name        string
		sizer       exporterhelper.RequestSizerType
		maxSize     int
		wantBatches int // 0: passed as it is
	}{
		{name: "items, no max_size", sizer: exporterhelper.RequestSizerTypeItems},
		{name: "items, fits exactly", sizer: exporterhelper.RequestSizerTypeItems, maxSize: 20},
		{name: "items, too large", sizer: exporterhelper.RequestSizerTypeItems, maxSize: 19, wantBatches: 2},
		{name: "bytes, no max_size", sizer: exporterhelper.RequestSizerTypeBytes},
		{name: "bytes, fits exactly", sizer: exporterhelper.RequestSizerTypeBytes, maxSize: protoSize},
		{name: "bytes, too large", sizer: exporterhelper.RequestSizerTypeBytes, maxSize: protoSize - 1, wantBatches: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := spansQueueEncoding{codec: testCodec(t, configcompression.TypeGzip)}
			r := queuedRequest(t, enc, td)
			stored := r.body
			reqs, err := r.MergeSplit(context.Background(), tt.maxSize, tt.sizer, nil)
			require.NoError(t, err)
			if tt.wantBatches > 0 {
				require.Len(t, reqs, tt.wantBatches)
				assert.True(t, r.decoded, "split: decoded")
				return
			}
			require.Len(t, reqs, 1)
			assert.Same(t, r, reqs[0])
			assert.False(t, r.decoded, "not decoded")
			body, err := r.wireBody()
			require.NoError(t, err)
			assert.Same(t, &stored[0], &body[0], "posted with the body it was stored with")
			assert.False(t, r.decoded, "nor decoded to be sent")
			assert.Equal(t, 20, r.ItemsCount())
			assert.Equal(t, protoSize, r.BytesSize())
		})
	}
}

// A queued batch that does not decode when the batcher must merge or split it: it is logged at
// error level as an unreadable queue item, dropped, and counted as failed for good (the batcher
// counts nothing of it), and the batch it met is not lost with it, whichever of the two is the
// batcher's current batch.
func TestSpansMergeSplitDropsUnreadableQueuedBatch(t *testing.T) {
	tests := []struct {
		name       string
		mergeSplit func(bad, good *spansRequest) ([]xexporterhelper.Request, error) // as the batcher calls it
		wantGood   bool                                                             // the readable batch goes on
	}{
		{
			name: "current batch unreadable",
			mergeSplit: func(bad, good *spansRequest) ([]xexporterhelper.Request, error) {
				return bad.MergeSplit(context.Background(), 100, exporterhelper.RequestSizerTypeItems, good)
			},
			wantGood: true,
		},
		{
			name: "incoming batch unreadable",
			mergeSplit: func(bad, good *spansRequest) ([]xexporterhelper.Request, error) {
				reqs, err := good.MergeSplit(context.Background(), 100, exporterhelper.RequestSizerTypeItems, bad)
				return append(reqs, good), err // the batcher keeps its current batch
			},
			wantGood: true,
		},
		{
			name: "alone, larger than max_size",
			mergeSplit: func(bad, _ *spansRequest) ([]xexporterhelper.Request, error) {
				return bad.MergeSplit(context.Background(), 2, exporterhelper.RequestSizerTypeItems, nil)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			exp := startExporter(t, env, testConfig(newFakePlatform(t).srv.URL))
			enc := spansQueueEncoding{codec: exp.codec, logger: exp.logger}
			good := makeTraces(1, 1, 4, 10)
			bad := corruptQueuedRequest(t, enc, makeTraces(1, 1, 5, 10))

			reqs, err := tt.mergeSplit(bad, newSpansRequest(good, exp.codec))
			require.ErrorIs(t, err, errCorruptQueuedSpans)
			if tt.wantGood {
				require.Len(t, reqs, 1, "the readable batch goes on")
				got, err := reqs[0].(*spansRequest).traces()
				require.NoError(t, err)
				require.NoError(t, ptracetest.CompareTraces(good, got))
			} else {
				require.Empty(t, reqs)
			}

			entries := env.logs.FilterMessageSnippet("cannot be read").All()
			require.Len(t, entries, 1)
			assert.Equal(t, zapcore.ErrorLevel, entries[0].Level)
			assert.Contains(t, entries[0].Message, "dropped")
			assert.Equal(t, deliveryCounts{failedPermanent: 5}, readDeliveryCounts(t, env.telemetry, "spans"), "the dropped spans, failed for good")
		})
	}
}

// A queued body that does not decode when the send needs its spans (a 413 split, or the span
// compression changed across the restart) cannot be sent: a permanent error, logged once as an
// unreadable queue item, never as the platform's refusal, and counted as failed.
func TestSpansUnreadableQueuedBodyIsNotBlamedOnThePlatform(t *testing.T) {
	tests := []struct {
		name         string
		compression  configcompression.Type // the exporter's, after the restart
		status       int                    // the platform's answer to the whole batch
		wantRequests int
	}{
		{name: "413 split", compression: configcompression.TypeGzip, status: http.StatusRequestEntityTooLarge, wantRequests: 1},
		{name: "compression changed", compression: compressionNone, status: http.StatusOK, wantRequests: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearCompressionEnv(t)
			p := newFakePlatform(t)
			p.setTraces(func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(tt.status) })
			cfg := testConfig(p.srv.URL)
			cfg.ClientConfig.Compression = tt.compression
			env := newTestEnv(t)
			exp := startExporter(t, env, cfg)
			enc := spansQueueEncoding{codec: testCodec(t, configcompression.TypeGzip)}
			enc.codec.logger = exp.logger
			req := corruptQueuedRequest(t, enc, makeTraces(1, 1, 10, 100))
			req.codec = exp.codec

			err := exp.pushSpans(context.Background(), req)
			require.ErrorIs(t, err, errCorruptQueuedSpans)
			assert.True(t, consumererror.IsPermanent(err))
			assert.Len(t, p.received(tracesPath), tt.wantRequests)
			unreadable := env.logs.FilterMessageSnippet("cannot be read").All()
			require.Len(t, unreadable, 1, "logged once")
			assert.Equal(t, zapcore.ErrorLevel, unreadable[0].Level)
			assert.Empty(t, env.logs.FilterMessageSnippet("refused").All(), "not the platform's refusal")
			assert.Equal(t, deliveryCounts{failedPermanent: 10}, readDeliveryCounts(t, env.telemetry, "spans"))
		})
	}
}
