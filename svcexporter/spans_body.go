package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/zap"
)

// spanBodyCodec makes the body of a span batch as it goes on the wire: OTLP/protobuf
// (ExportTraceServiceRequest), gzip-compressed when the span compression is gzip (klauspost/compress's
// gzip, which writes the same format as compress/gzip in less CPU). The exporter
// compresses span batches itself rather than leaving it to confighttp's client, so that the
// persistent queue can store the body exactly as it is sent (see spans_request.go): a queued
// batch is encoded and compressed once, when it is queued, and posted as it is after a restart.
type spanBodyCodec struct {
	compression configcompression.Type // gzip or none
	level       int
	writers     sync.Pool // *gzip.Writer at level
	// logger reports queued bodies that cannot be decoded (spansRequest.traces); nil: not reported.
	logger *zap.Logger
	// droppedUnreadable counts, as failed for good, the spans of a queued batch that the batcher
	// drops because its body cannot be decoded (MergeSplit); nil: not counted.
	droppedUnreadable func(ctx context.Context, spans int)
}

func newSpanBodyCodec(compression configcompression.Type, params configcompression.CompressionParams) (*spanBodyCodec, error) {
	c := &spanBodyCodec{compression: compression}
	switch compression {
	case compressionNone:
		return c, nil
	case configcompression.TypeGzip:
	default:
		return nil, fmt.Errorf("span compression %q is not supported (gzip or none)", string(compression))
	}
	// Level 0 (not set) is the exporter's default, gzip.BestSpeed: compression is most of a
	// saturated gateway's CPU, and the best-speed level costs a fraction of the default level's
	// for a body about a sixth larger on prose (BenchmarkSpanBodyCompression).
	if params.Level == 0 {
		params.Level = defaultSpanCompressionLevel
	}
	if err := compression.ValidateParams(params); err != nil {
		return nil, err
	}
	c.level = int(params.Level)
	c.writers.New = func() any {
		w, _ := gzip.NewWriterLevel(nil, c.level) // the level was validated
		return w
	}
	return c, nil
}

// defaultSpanCompressionLevel is the gzip level of span batches when compression_params.level is
// not set.
const defaultSpanCompressionLevel configcompression.Level = gzip.BestSpeed

// contentEncoding is the Content-Encoding header of bodies compressed as compression ("" for none).
func contentEncoding(compression configcompression.Type) string {
	if compression == configcompression.TypeGzip {
		return string(configcompression.TypeGzip)
	}
	return ""
}

// encode returns td's wire body and the size of its uncompressed protobuf.
func (c *spanBodyCodec) encode(td ptrace.Traces) (body []byte, protoSize int, err error) {
	body, _, protoSize, err = c.encodeWithRoom(td, 0)
	return body, protoSize, err
}

// encodeWithRoom is encode with room free bytes before the body (buf[room:] is the body) and a
// few after it, so that the persistent queue frames the body without copying it
// (spansQueueEncoding.Marshal). An uncompressed body has no room (room 0 is returned).
func (c *spanBodyCodec) encodeWithRoom(td ptrace.Traces, room int) (buf []byte, bodyAt, protoSize int, err error) {
	raw, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("encoding spans as OTLP protobuf: %w", err)
	}
	if c.compression != configcompression.TypeGzip {
		return raw, 0, len(raw), nil
	}
	// Protobuf span batches shrink about 5-10 times; start with room for a fourth.
	out := bytes.NewBuffer(make([]byte, room, room+len(raw)/4+64+queueItemTrailer))
	zw := c.writers.Get().(*gzip.Writer)
	defer c.writers.Put(zw)
	zw.Reset(out)
	if _, err := zw.Write(raw); err != nil {
		return nil, 0, 0, fmt.Errorf("compressing spans: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, 0, 0, fmt.Errorf("compressing spans: %w", err)
	}
	return out.Bytes(), room, len(raw), nil
}

var gzipReaders sync.Pool // *gzip.Reader

// decodeSpanBody reads a wire body compressed as compression back into spans.
func decodeSpanBody(body []byte, compression configcompression.Type) (ptrace.Traces, error) {
	raw := body
	switch compression {
	case compressionNone:
	case configcompression.TypeGzip:
		var err error
		if raw, err = gunzip(body); err != nil {
			return ptrace.Traces{}, fmt.Errorf("decompressing spans: %w", err)
		}
	default:
		return ptrace.Traces{}, fmt.Errorf("span body compression %q is not supported", string(compression))
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(raw); err != nil {
		return ptrace.Traces{}, fmt.Errorf("decoding spans from OTLP protobuf: %w", err)
	}
	return req.Traces(), nil
}

func gunzip(body []byte) ([]byte, error) {
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(body))
	} else {
		err = zr.Reset(bytes.NewReader(body))
	}
	if err != nil {
		return nil, err
	}
	defer gzipReaders.Put(zr)
	var out bytes.Buffer
	out.Grow(4 * len(body))
	if _, err := io.Copy(&out, zr); err != nil {
		return nil, err
	}
	if err := zr.Close(); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return out.Bytes(), nil
}
