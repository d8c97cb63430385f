package svcexporter

import (
	"bytes"
	stdgzip "compress/gzip"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// BenchmarkSpanBodyCompression compares, on the same span batches in the same run, the codec's
// gzip (klauspost/compress) at its default level (1) and at levels 6 and 1 with the standard
// library's compress/gzip at levels 6 and 1 (level 6: what the codec used before and what
// confighttp's gzip uses, so contrib's otlphttp too). Read the ratio of spans/s and of wire
// bytes/span between sub-benchmarks of the same content:
//
//	go test -run '^$' -bench SpanBodyCompression -benchmem .
//
// "prose" content is words drawn at random from a vocabulary (compresses about as English text
// does); "repetitive" is the load runs' workload (testbed/workload: five sentences repeated),
// which compresses far more and favours deflate's match search.
func BenchmarkSpanBodyCompression(b *testing.B) {
	for _, content := range []string{"prose", "repetitive"} {
		td := makeLLMTraces(content, 100)
		raw, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			b.Fatal(err)
		}
		spans := td.SpanCount()
		report := func(b *testing.B, wire int) {
			b.SetBytes(int64(len(raw)))
			b.ReportMetric(float64(b.N*spans)/b.Elapsed().Seconds(), "spans/s")
			b.ReportMetric(float64(wire)/float64(spans), "wire-bytes/span")
			b.ReportMetric(float64(len(raw))/float64(spans), "proto-bytes/span")
		}
		for _, level := range []int{6, 1} {
			b.Run(fmt.Sprintf("%s/stdlib/level=%d", content, level), func(b *testing.B) {
				var wire int
				zw, _ := stdgzip.NewWriterLevel(nil, level)
				for b.Loop() {
					var buf bytes.Buffer
					zw.Reset(&buf)
					_, _ = zw.Write(raw)
					_ = zw.Close()
					wire = buf.Len()
				}
				report(b, wire)
			})
		}
		for _, level := range []configcompression.Level{0, 6, 1} {
			name := fmt.Sprintf("%s/codec/level=%d", content, level)
			if level == 0 {
				name = content + "/codec/level=default"
			}
			b.Run(name, func(b *testing.B) {
				c, err := newSpanBodyCodec(configcompression.TypeGzip, configcompression.CompressionParams{Level: level})
				if err != nil {
					b.Fatal(err)
				}
				var wire int
				for b.Loop() {
					body, _, err := c.encode(td)
					if err != nil {
						b.Fatal(err)
					}
					wire = len(body)
				}
				report(b, wire)
			})
		}
	}
}

// makeLLMTraces returns spans shaped like a GenAI workload: one LLM span in three carries an
// input and an output of 1-16 KiB of content, the others a few short attributes.
func makeLLMTraces(content string, spans int) ptrace.Traces {
	rng := rand.New(rand.NewPCG(1, 2))
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout-assistant")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("ai")
	for i := range spans {
		span := ss.Spans().AppendEmpty()
		span.SetTraceID(testTraceID(i/12 + 1))
		span.SetSpanID(testSpanID(i + 1))
		span.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + 1_000_000*uint64(i)))
		span.SetEndTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + 1_000_000*uint64(i) + 250_000))
		if i%3 != 0 {
			span.SetName("GET /api/orders")
			span.Attributes().PutStr("http.request.method", "GET")
			span.Attributes().PutStr("url.full", fmt.Sprintf("https://shop.example/api/orders/%d", rng.IntN(1e6)))
			span.Attributes().PutInt("http.response.status_code", 200)
			continue
		}
		span.SetName("chat gpt-4o")
		span.Attributes().PutStr("gen_ai.operation.name", "chat")
		span.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
		span.Attributes().PutInt("gen_ai.usage.input_tokens", int64(rng.IntN(4000)))
		span.Attributes().PutStr("gen_ai.prompt", benchText(rng, content, 1<<10+rng.IntN(15<<10)))
		span.Attributes().PutStr("gen_ai.completion", benchText(rng, content, 1<<10+rng.IntN(15<<10)))
	}
	return td
}

var (
	benchVocabulary = strings.Fields(`the a an order parcel customer refund carrier warehouse delivery
		address payment card status update return item damaged within days business method original
		please could you tell me where is my when will it arrive thanks again sorry for trouble we
		have checked your account and found that shipment left our facility yesterday evening tracking
		number shows expected arrival tomorrow morning if anything changes let us know agent assistant
		model answer question context document retrieved policy section paragraph summary price total
		discount coupon invoice receipt subscription plan monthly annual cancel renew upgrade support`)
	benchSentences = []string{
		"The order was packed at the central warehouse.",
		"Carrier scans show the parcel in transit.",
		"Returns are free within thirty days of delivery.",
		"Refunds reach the original payment method in five business days.",
		"The customer asked for a status update.",
	}
)

func benchText(rng *rand.Rand, content string, n int) string {
	var sb strings.Builder
	from := benchVocabulary
	if content == "repetitive" {
		from = benchSentences
	}
	for sb.Len() < n {
		sb.WriteString(from[rng.IntN(len(from))])
		sb.WriteByte(' ')
	}
	return sb.String()
}
