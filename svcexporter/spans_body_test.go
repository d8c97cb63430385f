package svcexporter

import (
	"bytes"
	stdgzip "compress/gzip"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// Span bodies are gzip at the configured level, best speed when none is set, and any reader of
// gzip (here the standard library's, as a platform would use) reads them back to the same spans.
func TestSpanBodyCodecGzipLevels(t *testing.T) {
	td := makeLLMTraces("prose", 30)
	raw, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	bodyAt := func(t *testing.T, level configcompression.Level) []byte {
		c, err := newSpanBodyCodec(configcompression.TypeGzip, configcompression.CompressionParams{Level: level})
		require.NoError(t, err)
		body, protoSize, err := c.encode(td)
		require.NoError(t, err)
		assert.Equal(t, len(raw), protoSize)
		zr, err := stdgzip.NewReader(bytes.NewReader(body))
		require.NoError(t, err)
		plain, err := io.ReadAll(zr)
		require.NoError(t, err)
		req := ptraceotlp.NewExportRequest()
		require.NoError(t, req.UnmarshalProto(plain))
		assert.Equal(t, td, req.Traces(), "level %d", level)
		return body
	}
	unset := bodyAt(t, 0)
	bestSpeed := bodyAt(t, 1)
	best := bodyAt(t, 9)
	assert.Equal(t, bestSpeed, unset, "no level set: best speed")
	assert.Less(t, len(best), len(bestSpeed), "level 9 compresses more than level 1")
	assert.Less(t, len(bestSpeed), len(raw)/2, "level 1 still compresses")
	for _, level := range []configcompression.Level{-1, -2} { // default, Huffman only
		bodyAt(t, level)
	}

	_, err = newSpanBodyCodec(configcompression.TypeGzip, configcompression.CompressionParams{Level: 12})
	assert.ErrorContains(t, err, "unsupported parameters")
}

// A body gzip-compressed by the standard library (the exporter before it compressed with
// klauspost/compress, so what an upgrade finds in the persistent queue) decodes.
func TestDecodeSpanBodyReadsStandardGzip(t *testing.T) {
	td := makeLLMTraces("repetitive", 12)
	raw, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	var buf bytes.Buffer
	zw := stdgzip.NewWriter(&buf)
	_, err = zw.Write(raw)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	got, err := decodeSpanBody(buf.Bytes(), configcompression.TypeGzip)
	require.NoError(t, err)
	assert.Equal(t, td, got)
}
