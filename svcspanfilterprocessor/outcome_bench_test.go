package svcspanfilterprocessor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
)

// BenchmarkOutcomeSampling: the CPU per input span of the default config (sample_rate 1, and 0.1:
// spans decided one by one) beside outcome sampling ("errors + 10%": every span of every trace
// held until its trace settles), side by side in one run. Batches of 50 traces of 5 kept spans, one
// failing trace in 50; the releaser runs after each batch, with the clock past settle_duration.
func BenchmarkOutcomeSampling(b *testing.B) {
	const traces, perTrace = 50, 5
	for _, tc := range []struct {
		name    string
		rate    float64
		outcome bool
	}{{"default rate 1", 1, false}, {"default rate 0.1", 0.1, false}, {"outcome", 0.1, true}} {
		outcome := tc.outcome
		b.Run(tc.name, func(b *testing.B) {
			cfg := createDefaultConfig().(*Config)
			cfg.SampleRate = tc.rate
			p, err := newSpanFilterProcessor(processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop(), journal.Nop)
			if err != nil {
				b.Fatal(err)
			}
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
			p.now = clock.Now
			p.running.Store(true)
			if outcome {
				oc := sampling.DefaultOutcomeConfig()
				oc.Rules = []sampling.OutcomeRule{{Name: "errors", Kind: sampling.RuleError}}
				oc.SettleDuration = time.Second
				o, err := sampling.NewOutcome(oc, sampling.NewRatio(0.1))
				if err != nil {
					b.Fatal(err)
				}
				p.setOutcome(o, int64(oc.MaxHeldMiB)<<20)
			}
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				var spans []testSpan
				for tr := range traces {
					id := pcommon.TraceID{0xbe, 1: byte(i >> 16), 2: byte(i >> 8), 3: byte(i), 8: byte(tr * 5), 15: byte(tr)}
					name := func(n string) string { return fmt.Sprintf("%s %d/%d", n, i, tr) }
					spans = append(spans, testSpan{name: name("agent"), scope: scopeSDK, trace: id})
					for c := range perTrace - 1 {
						spans = append(spans, testSpan{name: name(fmt.Sprint("llm ", c)), scope: scopeOpenAI, parent: name("agent"),
							trace: id, attrs: genAIAttrs, failed: tr == 0 && c == 0})
					}
				}
				td := batch(spans...)
				b.StartTimer()
				_, _ = p.processTraces(ctx, td) // ErrSkipProcessingData when everything is held
				clock.Advance(2 * time.Second)
				p.mem.Expire()
				p.deliverReady(ctx, false)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*traces*perTrace), "ns/span")
		})
	}
}
