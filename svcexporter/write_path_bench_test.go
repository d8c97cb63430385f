package svcexporter

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/svcexporter/internal/metadata"
)

// BenchmarkWritePathConsume is ConsumeTraces of a batch of one write path class (the common
// case), from the pipeline to the platform's answer, with batches of other instrumentations and
// of the current svc SDKs. It uses only what the release before write_path had, so that the same
// file measures both (the README's figures: this run against a copy of the code before).
func BenchmarkWritePathConsume(b *testing.B) {
	srv := discardServer(b)
	set := exportertest.NewNopSettings(metadata.Type)
	batches := map[string]ptrace.Traces{
		"other_instrumentations": makeTraces(4, 5, benchSpansPerPush/20, 200),
		"svc_sdk_6":              svcSDKTraces(makeTraces(4, 5, benchSpansPerPush/20, 200)),
	}
	for _, name := range []string{"other_instrumentations", "svc_sdk_6"} {
		td := batches[name]
		td.MarkReadOnly()
		b.Run(name, func(b *testing.B) {
			traces, err := NewFactory().CreateTraces(context.Background(), set, benchConfig(b, srv.URL, "gzip"))
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

// svcSDKTraces makes td's scopes those of the JS/TS SDK 6.
func svcSDKTraces(td ptrace.Traces) ptrace.Traces {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		rs.Resource().Attributes().PutStr("telemetry.sdk.language", "nodejs")
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			rs.ScopeSpans().At(j).Scope().SetName("svc-sdk")
			rs.ScopeSpans().At(j).Scope().SetVersion("6.2.0")
		}
	}
	return td
}
