package genaicontent

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// BenchmarkIsCandidate: the join's check of a kept span that must not wait, in its most expensive
// form (a content-event scope, 40 attributes, the GenAI ones last), against a span of another scope.
func BenchmarkIsCandidate(b *testing.B) {
	span := ptrace.NewSpan()
	for i := range 36 {
		span.Attributes().PutStr(fmt.Sprintf("app.detail.%02d", i), "some value of moderate length")
	}
	span.Attributes().PutStr("gen_ai.system", "openai")
	span.Attributes().PutStr("gen_ai.operation.name", "chat")
	span.Attributes().PutStr("gen_ai.input.messages", `[{"role":"user","parts":[]}]`)
	span.Attributes().PutStr("gen_ai.output.messages", `[{"role":"assistant","parts":[]}]`)
	res := pcommon.NewResource()
	for _, name := range []string{"opentelemetry.instrumentation.openai_v2", "opentelemetry.instrumentation.openai"} {
		scope := pcommon.NewInstrumentationScope()
		scope.SetName(name)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if IsCandidate(res, scope, span) {
					b.Fatal("a span with content is no candidate")
				}
			}
		})
	}
}
