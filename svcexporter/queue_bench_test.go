package svcexporter

import (
	"context"
	"encoding/json"
	"fmt"
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
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	pdatareq "go.opentelemetry.io/collector/pdata/xpdata/request"

	"github.com/svc/svc-collector/pkg/scorerecord"
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

// connectorScores are score records as the score connector writes them for a request of about
// 580 spans: n scores under one resource, numeric and categorical, with a comment, an
// environment and judge metadata, most on a span.
func connectorScores(n int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "chat-app")
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	names := []string{"helpfulness", "relevance", "faithfulness", "toxicity", "user_feedback"}
	for i := range n {
		s := scorerecord.Score{
			ID:            fmt.Sprintf("%08x-b215-80e8-af70-bab50a25bc14", i),
			TraceID:       testTraceID(i/6 + 1),
			ObservationID: testSpanID(i + 1),
			Name:          names[i%len(names)],
			Value:         pcommon.NewValueDouble(float64(i%100) / 100),
			DataType:      "NUMERIC",
			Environment:   "production",
			Timestamp:     pcommon.NewTimestampFromTime(scoreTime.Add(time.Duration(i) * time.Millisecond)),
			Metadata:      pcommon.NewMap(),
		}
		if s.Name == "user_feedback" {
			s.Value, s.DataType, s.ObservationID = pcommon.NewValueStr("thumbs_up"), "CATEGORICAL", pcommon.SpanID{}
		}
		if i%3 == 0 {
			s.Comment = "clear answer, grounded in the retrieved context"
		}
		s.Metadata.PutStr("judge", "gpt-x")
		s.Metadata.PutInt("rounds", 2)
		scorerecord.Write(lrs.AppendEmpty(), s)
	}
	return ld
}

// BenchmarkScoresQueueItem stores and reads back the scores of one request of ~580 spans (350
// score records) with the client metadata of a pass-through request, as the persistent queue
// does. encoding=stock is exporterhelper's logs encoding, as the release before used it (the plog
// encoded as an xpdata request, decoded at read, its records read and encoded as JSON at send);
// encoding=svcs is this release's (the records read and encoded as JSON once, before the queue;
// the read only frames them). scope=queue is the queue's Marshal and Unmarshal alone;
// scope=handoff-to-bodies is all the scores cost from the pipeline's hand-off to the bodies of
// their POST requests (the send itself aside), where this release does the JSON encoding.
// cpu-ns/op is the process's CPU time per op, steadier than ns/op on a shared machine.
//
//	go test -run '^$' -bench 'BenchmarkScoresQueueItem' -benchmem -count 6 . | tee out.txt; benchstat -col /encoding out.txt
func BenchmarkScoresQueueItem(b *testing.B) {
	ld := connectorScores(350)
	ld.MarkReadOnly()
	set := exportertest.NewNopSettings(metadata.Type)
	exp, err := newSvcExporter(testConfig("http://127.0.0.1:9"), set)
	require.NoError(b, err)
	defer exp.releaseVersionCheck()
	ctx := passThroughCtx()
	enc := scoresQueueEncoding{exp: exp}
	// What exporterhelper's logs encoding does (checked in
	// TestScoresQueueEncodingReadsItemsOfTheStockEncoding): its request is internal.
	stockMarshal := func() []byte {
		item, err := pdatareq.MarshalLogs(ctx, ld)
		require.NoError(b, err)
		return item
	}
	stockUnmarshal := func(item []byte) plog.Logs {
		_, read, err := pdatareq.UnmarshalLogs(item)
		require.NoError(b, err)
		return read
	}
	svcsUnmarshal := func(item []byte) *scoresRequest {
		_, read, err := enc.Unmarshal(item)
		require.NoError(b, err)
		return read.(*scoresRequest)
	}
	queued := exp.newScoresRequest(ctx, ld)

	for _, scope := range []string{"queue", "handoff-to-bodies"} {
		b.Run("scope="+scope+"/encoding=stock", func(b *testing.B) {
			var item []byte
			before := cpuTime()
			for b.Loop() {
				item = stockMarshal()
				read := stockUnmarshal(item)
				if scope == "queue" {
					continue
				}
				reqs := exp.readScores(ctx, read)
				for _, c := range evenChunks(len(reqs), scorerecord.MaxBatchSize) {
					_, err := json.Marshal(reqs[c.lo:c.hi])
					require.NoError(b, err)
				}
			}
			b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(len(item)), "item-bytes")
		})
		b.Run("scope="+scope+"/encoding=svcs", func(b *testing.B) {
			var item []byte
			before := cpuTime()
			for b.Loop() {
				r := queued
				if scope != "queue" {
					r = exp.newScoresRequest(ctx, ld)
				}
				item, err = enc.Marshal(ctx, r)
				require.NoError(b, err)
				read := svcsUnmarshal(item)
				if scope == "queue" {
					continue
				}
				for _, c := range evenChunks(read.count(), scorerecord.MaxBatchSize) {
					_ = read.arrayJSON(c.lo, c.hi)
				}
			}
			b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(len(item)), "item-bytes")
		})
	}
}
