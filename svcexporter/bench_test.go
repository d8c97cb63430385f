package svcexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/svcexporter/internal/metadata"
)

// The benchmarks push through the exporter built by the factory (no queue, so each Consume
// call returns after the HTTP exchange) to a loopback server that discards the body. The
// "baseline" sub-benchmarks POST the same payload through the exporter's own HTTP client, the
// scores encoded beforehand, the spans encoded and compressed by the exporter's codec (the
// exporter compresses span bodies itself): the exporter's cost is the ratio between the two of
// the same run.
//
//	go test -run '^$' -bench . -benchmem ./...

const (
	benchScoresPerPush = 1000
	benchSpansPerPush  = 1000
)

func discardServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchConfig(b *testing.B, endpoint string, compression configcompression.Type) *Config {
	for _, name := range compressionEnvVars {
		b.Setenv(name, "")
	}
	cfg := testConfig(endpoint)
	cfg.ClientConfig.Compression = compression
	cfg.ServerVersionCheck = VersionCheckOff
	fastRetry(cfg)
	return cfg
}

// reportPerItem adds items/s and allocs per item, measured over the timed loop.
func reportPerItem(b *testing.B, unit string, itemsPerOp int, before *runtime.MemStats) {
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	items := float64(b.N * itemsPerOp)
	b.ReportMetric(items/b.Elapsed().Seconds(), unit+"/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/items, "allocs/"+unit)
}

func BenchmarkScores(b *testing.B) {
	srv := discardServer(b)
	cfg := benchConfig(b, srv.URL, "")
	set := exportertest.NewNopSettings(metadata.Type)

	b.Run("baseline_raw_post", func(b *testing.B) {
		exp := startBenchExporter(b, cfg, set)
		ld := makeScores(benchScoresPerPush)
		reqs := exp.readScores(context.Background(), ld)
		var bodies [][]byte
		for _, c := range evenChunks(len(reqs), scorerecord.MaxBatchSize) {
			body, err := json.Marshal(reqs[c.lo:c.hi])
			require.NoError(b, err)
			bodies = append(bodies, body)
		}
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		for b.Loop() {
			for _, body := range bodies {
				if _, err := exp.post(context.Background(), exp.static, exp.plainClient, exp.scoresURL, contentTypeJSON, "", body, false); err != nil {
					b.Fatal(err)
				}
			}
		}
		reportPerItem(b, "scores", benchScoresPerPush, &before)
	})

	b.Run("exporter", func(b *testing.B) {
		logs, err := NewFactory().CreateLogs(context.Background(), set, cfg)
		require.NoError(b, err)
		startComponent(b, logs)
		ld := makeScores(benchScoresPerPush)
		ld.MarkReadOnly()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		for b.Loop() {
			if err := logs.ConsumeLogs(context.Background(), ld); err != nil {
				b.Fatal(err)
			}
		}
		reportPerItem(b, "scores", benchScoresPerPush, &before)
	})
}

func BenchmarkTraces(b *testing.B) {
	srv := discardServer(b)
	set := exportertest.NewNopSettings(metadata.Type)
	td := makeTraces(4, 5, benchSpansPerPush/20, 200)
	td.MarkReadOnly()

	for _, compression := range []configcompression.Type{"gzip", "none"} {
		cfg := benchConfig(b, srv.URL, compression)
		b.Run(string(compression)+"/baseline_raw_post", func(b *testing.B) {
			// Encoding, compression and post, without the exporterhelper.
			exp := startBenchExporter(b, cfg, set)
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for b.Loop() {
				body, _, err := exp.codec.encode(td)
				if err != nil {
					b.Fatal(err)
				}
				if err := exp.postSpans(context.Background(), exp.static, body, wireStaged); err != nil {
					b.Fatal(err)
				}
			}
			reportPerItem(b, "spans", benchSpansPerPush, &before)
		})
		b.Run(string(compression)+"/exporter", func(b *testing.B) {
			traces, err := NewFactory().CreateTraces(context.Background(), set, cfg)
			require.NoError(b, err)
			startComponent(b, traces)
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for b.Loop() {
				if err := traces.ConsumeTraces(context.Background(), td); err != nil {
					b.Fatal(err)
				}
			}
			reportPerItem(b, "spans", benchSpansPerPush, &before)
		})
	}
}

func startBenchExporter(b *testing.B, cfg *Config, set exporter.Settings) *svcExporter {
	exp, err := newSvcExporter(cfg, set)
	require.NoError(b, err)
	require.NoError(b, exp.start(context.Background(), componenttest.NewNopHost()))
	b.Cleanup(func() { _ = exp.shutdown(context.Background()) })
	return exp
}

func startComponent(b *testing.B, c component.Component) {
	require.NoError(b, c.Start(context.Background(), componenttest.NewNopHost()))
	b.Cleanup(func() { _ = c.Shutdown(context.Background()) })
}

// BenchmarkCredentialModes compares the cost per span and per score of pass-through mode (each
// push reads and re-encodes its request's credentials from client metadata) with single-key mode
// (the configured keys), on the same payloads and server in the same run: the ratio of each
// pass_through sub-benchmark to its single_key sibling is the price of the mode. Small pushes show
// the per-push cost, big ones what it is per span in a batch.
//
// Sub-benchmarks that run first in a round are favoured on a busy machine; alternate the modes
// between processes for a fair comparison:
//
//	go test -c -o svcexp.test . && for i in $(seq 8); do for m in single_key pass_through; do
//	  ./svcexp.test -test.run '^$' -test.bench "CredentialModes/.*/.*/mode=$m\$" -test.benchmem; done; done > out.txt
//	benchstat -col /mode out.txt
func BenchmarkCredentialModes(b *testing.B) {
	srv := discardServer(b)
	set := exportertest.NewNopSettings(metadata.Type)
	modes := []struct {
		name string
		cfg  func() *Config
		ctx  context.Context
	}{
		{name: "single_key", cfg: func() *Config { return benchConfig(b, srv.URL, "gzip") }, ctx: context.Background()},
		{name: "pass_through", cfg: func() *Config {
			cfg := benchConfig(b, srv.URL, "gzip")
			cfg.PublicKey, cfg.SecretKey, cfg.PassThrough = "", "", true
			return cfg
		}, ctx: tenantA.ctx()},
	}
	for _, spans := range []int{10, 1000} {
		td := makeTraces(1, 2, spans/2, 200)
		td.MarkReadOnly()
		for _, m := range modes {
			b.Run(fmt.Sprintf("traces/spans=%d/mode=%s", spans, m.name), func(b *testing.B) {
				traces, err := NewFactory().CreateTraces(context.Background(), set, m.cfg())
				require.NoError(b, err)
				startComponent(b, traces)
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				b.ResetTimer()
				for b.Loop() {
					if err := traces.ConsumeTraces(m.ctx, td); err != nil {
						b.Fatal(err)
					}
				}
				reportPerItem(b, "spans", spans, &before)
			})
		}
	}
	for _, scores := range []int{10, 100} {
		ld := makeScores(scores)
		ld.MarkReadOnly()
		for _, m := range modes {
			b.Run(fmt.Sprintf("scores/scores=%d/mode=%s", scores, m.name), func(b *testing.B) {
				logs, err := NewFactory().CreateLogs(context.Background(), set, m.cfg())
				require.NoError(b, err)
				startComponent(b, logs)
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				b.ResetTimer()
				for b.Loop() {
					if err := logs.ConsumeLogs(m.ctx, ld); err != nil {
						b.Fatal(err)
					}
				}
				reportPerItem(b, "scores", scores, &before)
			})
		}
	}
}

// BenchmarkCredentialsFor is the part of a push that differs between the modes: reading the
// credentials (pass-through: from client metadata, parsed and re-encoded) before anything is sent.
func BenchmarkCredentialsFor(b *testing.B) {
	set := exportertest.NewNopSettings(metadata.Type)
	for _, m := range []struct {
		name        string
		passThrough bool
		ctx         context.Context
	}{{"single_key", false, context.Background()}, {"pass_through", true, tenantA.ctx()}} {
		b.Run("mode="+m.name, func(b *testing.B) {
			cfg := benchConfig(b, "http://127.0.0.1:1", "gzip")
			if m.passThrough {
				cfg.PublicKey, cfg.SecretKey, cfg.PassThrough = "", "", true
			}
			exp := startBenchExporter(b, cfg, set)
			for b.Loop() {
				if _, err := exp.credentialsFor(m.ctx, 1, "spans", exp.telemetry.ExporterSvcSendFailedSpans); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
