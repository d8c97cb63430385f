package platform

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// BenchmarkIngestTraces measures how fast the platform takes gzip protobuf batches of 100
// distinct GenAI spans over loopback, client work included: load tests need it far above the
// collector's rate so that the platform is never the bottleneck.
func BenchmarkIngestTraces(b *testing.B) {
	for _, statsOnly := range []bool{false, true} {
		b.Run(fmt.Sprintf("statsOnly=%v", statsOnly), func(b *testing.B) {
			p, err := Start(Options{PublicKey: testPublicKey, SecretKey: testSecretKey, StatsOnly: statsOnly})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			td := ptrace.NewTraces()
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("telemetry.sdk.language", "python")
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName("svc-sdk")
			ss.Scope().SetVersion("5.0.0")
			for i := 0; i < 100; i++ {
				span := ss.Spans().AppendEmpty()
				span.SetName("chat")
				span.SetSpanID(pcommon.SpanID{byte(i + 1)})
				attrs := span.Attributes()
				attrs.PutStr("gen_ai.request.model", "gpt-x")
				attrs.PutStr("svc.observation.input", `[{"role":"user","content":"what is the weather like today?"}]`)
				attrs.PutStr("svc.observation.metadata.tier", `{"level":2}`)
				attrs.PutInt("gen_ai.usage.input_tokens", 12)
			}
			headers := map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				var tid pcommon.TraceID
				binary.BigEndian.PutUint64(tid[8:], uint64(n))
				for i := 0; i < ss.Spans().Len(); i++ {
					ss.Spans().At(i).SetTraceID(tid)
				}
				body := gzipBytes(b, protoBody(b, td))
				resp, err := trySend(p, http.MethodPost, PathTraces, headers, body, 0)
				if err != nil || resp.status != http.StatusOK {
					b.Fatalf("status %d: %v", resp.status, err)
				}
			}
			b.ReportMetric(float64(100*n)/b.Elapsed().Seconds(), "spans/s")
		})
	}
}
