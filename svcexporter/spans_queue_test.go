package svcexporter

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	pdatareq "go.opentelemetry.io/collector/pdata/xpdata/request"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func testCodec(t testing.TB, compression configcompression.Type) *spanBodyCodec {
	t.Helper()
	c, err := newSpanBodyCodec(compression, configcompression.CompressionParams{})
	require.NoError(t, err)
	return c
}

// metadataOf is the client metadata a context carries, as a map.
func metadataOf(ctx context.Context) map[string][]string {
	md := client.FromContext(ctx).Metadata
	out := map[string][]string{}
	for k := range md.Keys() {
		out[k] = md.Get(k)
	}
	return out
}

// passThroughCtx is the context of a pass-through request: credentials, another metadata key
// with two values, the client's address.
func passThroughCtx() context.Context {
	return client.NewContext(context.Background(), client.Info{
		Metadata: client.NewMetadata(map[string][]string{
			"authorization": {tenantA.authorization()},
			"x-tags":        {"a", "b"},
		}),
		Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4318},
	})
}

func TestSpansQueueEncodingRoundTrip(t *testing.T) {
	tests := []struct {
		name        string
		compression configcompression.Type
		ctx         context.Context
		td          ptrace.Traces
	}{
		{name: "gzip, client metadata", compression: configcompression.TypeGzip, ctx: passThroughCtx(), td: makeTraces(2, 2, 20, 300)},
		{name: "gzip, no metadata", compression: configcompression.TypeGzip, ctx: context.Background(), td: makeTraces(1, 1, 3, 10)},
		{name: "none, client metadata", compression: compressionNone, ctx: passThroughCtx(), td: makeTraces(3, 1, 7, 100)},
		{name: "none, no spans", compression: compressionNone, ctx: context.Background(), td: ptrace.NewTraces()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := spansQueueEncoding{codec: testCodec(t, tt.compression)}
			req := newSpansRequest(tt.td, enc.codec)
			data, err := enc.Marshal(tt.ctx, req)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(data, spansQueueMagic))

			wire, err := req.wireBody()
			require.NoError(t, err)
			assert.True(t, bytes.Contains(data, wire), "the queue stores the body as it goes on the wire")
			assert.Equal(t, tt.compression == configcompression.TypeGzip, bytes.HasPrefix(wire, []byte{0x1f, 0x8b}), "gzip magic")

			ctx, got, err := enc.Unmarshal(data)
			require.NoError(t, err)
			r := got.(*spansRequest)
			assert.False(t, r.decoded, "reading from the queue decodes no spans")
			assert.Equal(t, wire, r.body)
			assert.Equal(t, tt.td.SpanCount(), r.ItemsCount())
			assert.Equal(t, (&ptrace.ProtoMarshaler{}).TracesSize(tt.td), r.BytesSize(), "the bytes sizer as exporterhelper's")
			assert.Equal(t, metadataOf(tt.ctx), metadataOf(ctx))
			assert.Equal(t, client.FromContext(tt.ctx).Addr, client.FromContext(ctx).Addr)

			body, err := r.wireBody()
			require.NoError(t, err)
			assert.Equal(t, wire, body, "sent as stored")
			assert.False(t, r.decoded, "sending decodes no spans")
			td, err := r.traces()
			require.NoError(t, err)
			require.NoError(t, ptracetest.CompareTraces(tt.td, td))
		})
	}
}

// The converter of a persistent queue makes the body with room for the item's header, and Marshal
// writes the item around it in place; the item is the same as one copied together from a body made
// without room (a body made at send, a request context larger than the room), and reads back.
func TestSpansQueueItemFramedAroundTheBody(t *testing.T) {
	// One metadata key each: the request context's encoding of several keys has no fixed order.
	withKey := func(value string) context.Context {
		return client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{
			"authorization": {value},
		})})
	}
	for _, compression := range []configcompression.Type{configcompression.TypeGzip, compressionNone} {
		for name, ctx := range map[string]context.Context{"no metadata": context.Background(),
			"client metadata":               withKey(tenantA.authorization()),
			"metadata larger than the room": withKey(strings.Repeat("k", 2*spansItemRoom))} {
			t.Run(string(compression)+", "+name, func(t *testing.T) {
				enc := spansQueueEncoding{codec: testCodec(t, compression)}
				td := makeTraces(2, 2, 10, 200)
				queued, err := spansRequestFromTraces(enc.codec, true, true)(ctx, td)
				require.NoError(t, err)
				framed, err := enc.Marshal(ctx, queued)
				require.NoError(t, err)

				copied := newSpansRequest(td, enc.codec)
				copied.class = classDirect // makeTraces' scopes are no svc SDK's
				_, err = copied.wireBody() // made at send: no room before it
				require.NoError(t, err)
				want, err := enc.Marshal(ctx, copied)
				require.NoError(t, err)
				assert.Equal(t, want, framed)

				gotCtx, got, err := enc.Unmarshal(framed)
				require.NoError(t, err)
				assert.Equal(t, metadataOf(ctx), metadataOf(gotCtx))
				gotTD, err := got.(*spansRequest).traces()
				require.NoError(t, err)
				require.NoError(t, ptracetest.CompareTraces(td, gotTD))
				body, err := queued.(*spansRequest).wireBody()
				require.NoError(t, err)
				assert.Equal(t, got.(*spansRequest).body, body, "the request posts the body it queued")
				if compression == configcompression.TypeGzip && name != "metadata larger than the room" {
					assert.Same(t, &body[0], &framed[len(framed)-queueItemTrailer-len(body)], "the item is framed around the body, not a copy")
				}
			})
		}
	}
}

// A queue written by the release before (exporterhelper's own traces encoding: the xpdata
// request format, or a plain OTLP protobuf from older ones) is read after the upgrade, with the
// client metadata of each item.
func TestSpansQueueEncodingReadsItemsOfTheStockEncoding(t *testing.T) {
	td := makeTraces(2, 1, 5, 50)
	stock := xexporterhelper.NewTracesQueueBatchSettings().Encoding
	// What the stock encoding stores: checked against the stock encoding itself.
	xpdataItem, err := pdatareq.MarshalTraces(passThroughCtx(), td)
	require.NoError(t, err)
	_, stockReq, err := stock.Unmarshal(xpdataItem)
	require.NoError(t, err)
	stockBytes, err := stock.Marshal(passThroughCtx(), stockReq)
	require.NoError(t, err)
	require.Len(t, stockBytes, len(xpdataItem), "the same item, up to the order of the metadata keys")
	require.Equal(t, td.SpanCount(), stockReq.ItemsCount())
	plainItem, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)

	tests := []struct {
		name         string
		item         []byte
		wantMetadata map[string][]string
	}{
		{name: "xpdata request format with client metadata", item: xpdataItem, wantMetadata: metadataOf(passThroughCtx())},
		{name: "plain OTLP protobuf", item: plainItem, wantMetadata: map[string][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, compression := range []configcompression.Type{configcompression.TypeGzip, compressionNone} {
				enc := spansQueueEncoding{codec: testCodec(t, compression)}
				ctx, got, err := enc.Unmarshal(tt.item)
				require.NoError(t, err)
				r := got.(*spansRequest)
				assert.Equal(t, tt.wantMetadata, metadataOf(ctx))
				assert.Equal(t, td.SpanCount(), r.ItemsCount())
				decoded, err := r.traces()
				require.NoError(t, err)
				require.NoError(t, ptracetest.CompareTraces(td, decoded))
				body, err := r.wireBody()
				require.NoError(t, err)
				sent, err := decodeSpanBody(body, compression)
				require.NoError(t, err)
				require.NoError(t, ptracetest.CompareTraces(td, sent))
			}
		})
	}

	// The other way round: the new format is not taken for the stock one (a downgrade drops
	// such items with an error instead of sending garbage).
	enc := spansQueueEncoding{codec: testCodec(t, configcompression.TypeGzip)}
	ours, err := enc.Marshal(context.Background(), newSpansRequest(td, enc.codec))
	require.NoError(t, err)
	_, _, err = stock.Unmarshal(ours)
	require.Error(t, err)
}

// withCRC replaces the checksum of a queue item after a test changed it.
func withCRC(item []byte) []byte {
	out := bytes.Clone(item)
	binary.LittleEndian.PutUint32(out[len(out)-4:], crc32.Checksum(out[:len(out)-4], crc32c))
	return out
}

func TestSpansQueueEncodingRefusesCorruptItems(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	enc := spansQueueEncoding{codec: testCodec(t, configcompression.TypeGzip), logger: zap.New(core)}
	good, err := enc.Marshal(passThroughCtx(), newSpansRequest(makeTraces(1, 1, 10, 100), enc.codec))
	require.NoError(t, err)
	flip := func(i int) []byte {
		out := bytes.Clone(good)
		out[i] ^= 0x40
		return out
	}
	tests := []struct {
		name    string
		item    []byte
		wantErr string
	}{
		{name: "truncated", item: good[:len(good)/2], wantErr: "checksum mismatch"},
		{name: "magic alone", item: spansQueueMagic, wantErr: "too short"},
		{name: "a byte of the body changed", item: flip(len(good) - 20), wantErr: "checksum mismatch"},
		{name: "a byte of the header changed", item: flip(7), wantErr: "checksum mismatch"},
		{name: "newer format version", item: withCRC(append(append([]byte{}, good[:5]...), append([]byte{9}, good[6:]...)...)), wantErr: "format version 9"},
		{name: "unknown compression", item: withCRC(append(append([]byte{}, good[:6]...), append([]byte{7}, good[7:]...)...)), wantErr: "unknown compression code 7"},
		{name: "not a queue item at all", item: []byte("\x0a\xff\xff\xff\xff\x0fgarbage"), wantErr: "unreadable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NotPanics(t, func() {
				_, req, err := enc.Unmarshal(tt.item)
				require.ErrorIs(t, err, errCorruptQueuedSpans)
				assert.ErrorContains(t, err, tt.wantErr)
				assert.Nil(t, req)
			})
			dropped := logs.TakeAll()
			require.Len(t, dropped, 1, "an unreadable item is logged at error level")
			assert.Equal(t, zapcore.ErrorLevel, dropped[0].Level)
			assert.Contains(t, dropped[0].Message, "dropped")
		})
	}

	// A body that passes the checksum but is not what the header says (written so by a bug, not
	// by the disk) fails when decoded, with an error, and is never sent.
	t.Run("checksum right, body wrong", func(t *testing.T) {
		bad := bytes.Clone(good)
		copy(bad[len(bad)-40:len(bad)-4], bytes.Repeat([]byte{0}, 36))
		_, req, err := enc.Unmarshal(withCRC(bad))
		require.NoError(t, err)
		_, err = req.(*spansRequest).traces()
		require.ErrorContains(t, err, "decompressing spans")
	})
}

func protoOf(t *testing.T, td ptrace.Traces) []byte {
	t.Helper()
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	return b
}

// MergeSplit gives the batches of exporterhelper's own traces request, for both sizers, whether
// the batches came from the queue (body only) or from the pipeline (spans).
func TestSpansMergeSplitAsExporterhelper(t *testing.T) {
	stock := xexporterhelper.NewTracesQueueBatchSettings().Encoding
	bytesOf := func(td ptrace.Traces) int { return (&ptrace.ProtoMarshaler{}).TracesSize(td) }
	tests := []struct {
		name    string
		sizer   exporterhelper.RequestSizerType
		maxSize int
		a, b    ptrace.Traces
	}{
		{name: "items, merge only", sizer: exporterhelper.RequestSizerTypeItems, maxSize: 0, a: makeTraces(1, 2, 3, 10), b: makeTraces(2, 1, 4, 10)},
		{name: "items, merge and split", sizer: exporterhelper.RequestSizerTypeItems, maxSize: 7, a: makeTraces(2, 2, 5, 10), b: makeTraces(1, 3, 3, 10)},
		{name: "items, split alone", sizer: exporterhelper.RequestSizerTypeItems, maxSize: 4, a: makeTraces(3, 1, 5, 10)},
		{name: "bytes, merge and split", sizer: exporterhelper.RequestSizerTypeBytes, maxSize: 2000, a: makeTraces(2, 2, 6, 100), b: makeTraces(1, 1, 9, 50)},
		{name: "bytes, a span too large", sizer: exporterhelper.RequestSizerTypeBytes, maxSize: 600, a: makeTraces(1, 1, 4, 1000), b: makeTraces(1, 1, 3, 10)},
		{name: "bytes, fits", sizer: exporterhelper.RequestSizerTypeBytes, maxSize: 1 << 20, a: makeTraces(1, 1, 4, 10), b: makeTraces(1, 1, 3, 10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			hasB := tt.b != (ptrace.Traces{})
			// exporterhelper's requests
			stockOf := func(td ptrace.Traces) xexporterhelper.Request {
				item, err := pdatareq.MarshalTraces(ctx, td)
				require.NoError(t, err)
				_, r, err := stock.Unmarshal(item)
				require.NoError(t, err)
				return r
			}
			var stockB xexporterhelper.Request
			if hasB {
				stockB = stockOf(tt.b)
			}
			wantReqs, wantErr := stockOf(tt.a).MergeSplit(ctx, tt.maxSize, tt.sizer, stockB)

			// ours: a from the queue (body only), b from the pipeline
			enc := spansQueueEncoding{codec: testCodec(t, configcompression.TypeGzip)}
			item, err := enc.Marshal(ctx, newSpansRequest(tt.a, enc.codec))
			require.NoError(t, err)
			_, ourA, err := enc.Unmarshal(item)
			require.NoError(t, err)
			var ourB xexporterhelper.Request
			if hasB {
				ourB = newSpansRequest(tt.b, enc.codec)
			}
			gotReqs, gotErr := ourA.MergeSplit(ctx, tt.maxSize, tt.sizer, ourB)

			t.Logf("exporterhelper: %d batches, error %v", len(wantReqs), wantErr)
			if wantErr != nil {
				require.EqualError(t, gotErr, wantErr.Error())
			} else {
				require.NoError(t, gotErr)
			}
			require.Len(t, gotReqs, len(wantReqs))
			for i := range wantReqs {
				wantItem, err := stock.Marshal(ctx, wantReqs[i])
				require.NoError(t, err)
				_, want, err := pdatareq.UnmarshalTraces(wantItem)
				require.NoError(t, err)
				r := gotReqs[i].(*spansRequest)
				got, err := r.traces()
				require.NoError(t, err)
				assert.Equal(t, protoOf(t, want), protoOf(t, got), "batch %d: the same spans in the same order", i)
				assert.Equal(t, wantReqs[i].ItemsCount(), r.ItemsCount(), "batch %d", i)
				assert.Equal(t, bytesOf(want), r.BytesSize(), "batch %d", i)
				// what is sent is the merged batch, not a stale body
				body, err := r.wireBody()
				require.NoError(t, err)
				sent, err := decodeSpanBody(body, configcompression.TypeGzip)
				require.NoError(t, err)
				assert.Equal(t, protoOf(t, want), protoOf(t, sent), "batch %d as sent", i)
			}
		})
	}
}

// With the queue in memory a batch is encoded and compressed at its first send; a retry posts
// the same body without encoding again.
func TestSpansRetryPostsTheBodyOfTheFirstAttempt(t *testing.T) {
	for _, compression := range []configcompression.Type{configcompression.TypeGzip, compressionNone} {
		t.Run(string(compression), func(t *testing.T) {
			clearCompressionEnv(t)
			p := newFakePlatform(t)
			var calls int
			p.setTraces(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				calls++
				if calls == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			cfg := testConfig(p.srv.URL)
			cfg.ClientConfig.Compression = compression
			exp := startExporter(t, newTestEnv(t), cfg)
			td := makeTraces(2, 1, 10, 100)
			req := newSpansRequest(td, exp.codec)
			require.Error(t, exp.pushSpans(context.Background(), req))
			require.NotNil(t, req.body, "the body is kept for the retry")
			first := req.body
			require.NoError(t, exp.pushSpans(context.Background(), req))
			assert.Same(t, &first[0], &req.body[0], "not encoded again")

			got := p.received(tracesPath)
			require.Len(t, got, 2)
			assert.Equal(t, got[0].body, got[1].body)
			assert.Equal(t, compression == configcompression.TypeGzip, got[1].gzipped)
			require.NoError(t, ptracetest.CompareTraces(td, decodeTraces(t, got[1].body)))
		})
	}
}
