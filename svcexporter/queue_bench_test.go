package svcexporter

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/svc/svc-collector/svcexporter/internal/metadata"
)

// BenchmarkQueue pushes batches of 512 spans (the size svcspanfilter hands on) through the
// exporter with its sending_queue in memory or on file_storage (bbolt, as in the distribution) to
// a loopback server that discards them, and waits until each batch was delivered. request=stock
// is the exporterhelper's own traces request, as the release before built the exporter (the
// queue stores an xpdata protobuf, the send encodes and gzips again); request=wire is this
// release's (the queue stores the body as it goes on the wire). cpu-ms/1k-spans is the process's
// CPU time (user + system, the server included) per thousand spans: compare the
// sub-benchmarks of the same run.
//
//	go test -run '^$' -bench 'BenchmarkQueue' -count 6 . | tee out.txt; benchstat -col /request out.txt
func BenchmarkQueue(b *testing.B) {
	td := makeTraces(4, 4, 32, 400) // 512 spans, ~300 KB of protobuf
	td.MarkReadOnly()
	for _, queue := range []string{"memory", "file_storage"} {
		for _, request := range []string{"stock", "wire"} {
			b.Run("queue="+queue+"/request="+request, func(b *testing.B) {
				var delivered atomic.Int64
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					w.WriteHeader(http.StatusOK)
					delivered.Add(1)
				}))
				defer srv.Close()
				cfg := benchConfig(b, srv.URL, configcompression.TypeGzip)
				q := exporterhelper.NewDefaultQueueConfig()
				q.BlockOnOverflow = true
				var host component.Host = componenttest.NewNopHost()
				if queue == "file_storage" {
					sh, ext := startFileStorage(b, b.TempDir())
					defer func() { _ = ext.Shutdown(context.Background()) }()
					host = sh
					id := fileStorageID
					q.StorageID = &id
				}
				cfg.QueueConfig = configoptional.Some(q)
				set := exportertest.NewNopSettings(metadata.Type)
				exp := benchTracesExporter(b, request, set, cfg)
				require.NoError(b, exp.Start(context.Background(), host))
				defer func() { require.NoError(b, exp.Shutdown(context.Background())) }()

				before, start := cpuTime(), time.Now()
				b.ResetTimer()
				n := int64(0)
				for b.Loop() {
					if err := exp.ConsumeTraces(context.Background(), td); err != nil {
						b.Fatal(err)
					}
					n++
				}
				deadline := time.Now().Add(time.Minute)
				for delivered.Load() < n && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				wall := time.Since(start)
				require.Equal(b, n, delivered.Load())
				spans := float64(n) * float64(td.SpanCount())
				b.ReportMetric(float64((cpuTime()-before).Milliseconds())/spans*1000, "cpu-ms/1k-spans")
				b.ReportMetric(spans/wall.Seconds(), "delivered-spans/s")
			})
		}
	}
}

func benchTracesExporter(b *testing.B, request string, set exporter.Settings, cfg *Config) exporter.Traces {
	if request == "wire" {
		exp, err := NewFactory().CreateTraces(context.Background(), set, cfg)
		require.NoError(b, err)
		return exp
	}
	return previousReleaseTraces(b, set, cfg)
}

// cpuTime is the CPU time the process used so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
