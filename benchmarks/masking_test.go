package benchmarks

import (
	"context"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/redactionprocessor"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/masking"
)

// The masking engine benchmark: one span attribute of 64 KiB text, masked by pkg/masking
// (Engine.Attributes, every builtin rule) and by contrib's redaction processor with the same
// rules' expressions as blocked values, side by side in the same run. MB/s is of the text.

const maskingTextBytes = 64 << 10

// maskingCleanProse has digits, hyphens, capitals and the letter b, which anchor some rules,
// but no personal data.
const maskingCleanProse = `The quarterly report covers 12 regions and shows a 4.5% increase in revenue compared ` +
	`to the previous period. Our state-of-the-art pipeline processed 1,204 requests per second ` +
	`during the benchmark, with a p99 latency of 230 ms. A follow-up review is scheduled for ` +
	`March 3rd; please bring the updated figures and the draft of the Q2 roadmap. Bob asked ` +
	`whether the new caching layer could be enabled by default in version 2.3, and Alice ` +
	`suggested we first measure its effect on the error budget. `

const maskingPIILine = `Contact jane.doe@example.com or +44 20 7946 0958, card 4111 1111 1111 1111, ` +
	`IBAN DE89 3704 0044 0532 0130 00, key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z, ` +
	`AWS AKIAIOSFODNN7EXAMPLE, Authorization: Bearer abcdefgh12345678. `

// maskingRedactionPatterns are the builtin rules' expressions (pkg/masking builtin.go), as
// redaction's blocked values (it has no Luhn or mod-97 check, so it masks at least as much).
var maskingRedactionPatterns = []string{
	`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b`,
	`\b(?:4\d{3}|5[1-5]\d{2}|2[2-7]\d{2}|3[0-9]\d{2}|6(?:011|5\d{2}))(?:[ -]?\d){9,15}\b`,
	`\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|(?:AKIA|ASIA)[0-9A-Z]{16}\b|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})`,
	`(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}`,
	`\+[1-9][0-9]{0,2}(?:[ .-]?(?:\([0-9]{1,4}\)|[0-9]{1,4})){2,6}\b`,
	`\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b`,
}

func maskingSpan(text string) ptrace.Traces {
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("chat")
	span.Attributes().PutStr("gen_ai.prompt", text)
	return td
}

func BenchmarkMaskingEngine(b *testing.B) {
	texts := []struct{ name, text string }{
		{"clean-prose", strings.Repeat(maskingCleanProse, maskingTextBytes/len(maskingCleanProse)+1)},
		{"pii-dense", strings.Repeat(maskingCleanProse[:200]+maskingPIILine, maskingTextBytes/(200+len(maskingPIILine))+1)},
	}
	engine, err := masking.New(masking.Config{BuiltinRules: masking.BuiltinRuleNames(), KeyReplacement: "***"})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range texts {
		batch := maskingSpan(tc.text)
		b.Run(tc.name+"/svc-masking", func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			b.ReportAllocs()
			attrs := pcommon.NewMap()
			for b.Loop() {
				b.StopTimer()
				batch.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().CopyTo(attrs)
				b.StartTimer()
				engine.Attributes(attrs, nil, nil)
			}
		})
		b.Run(tc.name+"/contrib-redaction", func(b *testing.B) {
			rf := redactionprocessor.NewFactory()
			rcfg := rf.CreateDefaultConfig()
			loadConfig(b, rcfg, map[string]any{
				"allow_all_keys": true,
				"blocked_values": toAny(maskingRedactionPatterns),
				"summary":        "silent",
			})
			p := createTraces(b, rf, rcfg, consumertest.NewNop())
			b.SetBytes(int64(len(tc.text)))
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				b.StopTimer()
				td := ptrace.NewTraces()
				batch.CopyTo(td)
				b.StartTimer()
				if err := p.ConsumeTraces(ctx, td); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
