package observation

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestType(t *testing.T) {
	tests := []struct {
		name  string
		attrs map[string]any
		want  string
	}{
		{"declared type upper-cased", map[string]any{"svc.observation.type": "tool", "gen_ai.request.model": "m"}, "TOOL"},
		{"declared type not lower case falls through", map[string]any{"svc.observation.type": "Tool"}, TypeSpan},
		{"declared agent", map[string]any{"svc.observation.type": "agent"}, TypeAgent},
		{"request model", map[string]any{"gen_ai.request.model": "m"}, TypeGeneration},
		{"response model", map[string]any{"gen_ai.response.model": "m"}, TypeGeneration},
		{"llm.model_name", map[string]any{"llm.model_name": "m"}, TypeGeneration},
		{"empty model is no model", map[string]any{"gen_ai.request.model": ""}, TypeSpan},
		{"chat operation", map[string]any{"gen_ai.operation.name": "chat"}, TypeGeneration},
		{"text_completion operation", map[string]any{"gen_ai.operation.name": "text_completion"}, TypeGeneration},
		{"generate_content operation", map[string]any{"gen_ai.operation.name": "generate_content"}, TypeGeneration},
		{"embeddings operation", map[string]any{"gen_ai.operation.name": "embeddings"}, TypeEmbedding},
		{"tool operation", map[string]any{"gen_ai.operation.name": "execute_tool"}, TypeTool},
		{"agent operation beats a model", map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "m"}, TypeAgent},
		{"openinference LLM", map[string]any{"openinference.span.kind": "LLM"}, TypeGeneration},
		{"openinference RETRIEVER", map[string]any{"openinference.span.kind": "RETRIEVER"}, TypeRetriever},
		{"openinference beats operation", map[string]any{"openinference.span.kind": "CHAIN", "gen_ai.operation.name": "chat"}, TypeChain},
		{"vercel doGenerate with model", map[string]any{"ai.operationId": "ai.generateText.doGenerate", "ai.model.id": "gpt-4o"}, TypeGeneration},
		{"vercel outer generateText", map[string]any{"ai.operationId": "ai.generateText", "ai.model.id": "gpt-4o"}, TypeSpan},
		{"vercel operation.name with function id", map[string]any{"operation.name": "ai.streamObject.doStream answer", "ai.model.id": "m"}, TypeGeneration},
		{"vercel doEmbed", map[string]any{"ai.operationId": "ai.embedMany.doEmbed", "ai.model.id": "m"}, TypeEmbedding},
		{"vercel tool call", map[string]any{"ai.operationId": "ai.toolCall", "ai.toolCall.name": "search"}, TypeTool},
		{"gen_ai tool name", map[string]any{"gen_ai.tool.name": "search"}, TypeTool},
		{"empty declared type", map[string]any{"svc.observation.type": ""}, TypeSpan},
		{"nothing", map[string]any{}, TypeSpan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			span := ptrace.NewSpan()
			_ = span.Attributes().FromRaw(tt.attrs)
			v := NewView(span, pcommon.NewResource(), pcommon.NewInstrumentationScope())
			if got := v.Type(); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestFields(t *testing.T) {
	gen := generationView()
	if gen.Level() != LevelError || gen.Model() != "gpt-4o" || gen.Latency() != 3.5 || gen.Environment() != "prod" {
		t.Errorf("level %s model %s latency %v env %s", gen.Level(), gen.Model(), gen.Latency(), gen.Environment())
	}
	if in, out, total, ok := gen.Usage(); !ok || in != 100 || out != 50 || total != 150 {
		t.Errorf("usage %v %v %v %v", in, out, total, ok)
	}
	if c, ok := gen.Cost(); !ok || c != 0.02 {
		t.Errorf("cost %v %v", c, ok)
	}
	tool := sdkSpanView()
	if c, ok := tool.Cost(); !ok || c < 0.00299 || c > 0.00301 {
		t.Errorf("summed cost_details %v %v", c, ok)
	}
	if in, out, total, ok := tool.Usage(); !ok || in != 7 || out != 3 || total != 10 {
		t.Errorf("usage_details %v %v %v %v", in, out, total, ok)
	}
	if v, ok := tool.Metadata("tier"); !ok || v != "gold" {
		t.Errorf("new-SDK metadata decoded: %v %v", v, ok)
	}
	if v, ok := gen.Metadata("attempt"); !ok || v != int64(2) {
		t.Errorf("other metadata as sent: %#v %v", v, ok)
	}
	span := ptrace.NewSpan()
	span.Attributes().PutStr("gen_ai.output.messages", `[{"role":"assistant"}]`)
	v := NewView(span, pcommon.NewResource(), pcommon.NewInstrumentationScope())
	if out, ok := v.Output(); !ok || out != `[{"role":"assistant"}]` {
		t.Errorf("output from gen_ai.output.messages: %q", out)
	}
	if _, ok := v.Input(); ok {
		t.Error("no input")
	}
	if v.Environment() != DefaultEnvironment {
		t.Error(v.Environment())
	}
}
