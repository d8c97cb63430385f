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
		{"request model", map[string]any{"gen_ai.request.model": "m"}, TypeGeneration},
		{"response model", map[string]any{"gen_ai.response.model": "m"}, TypeGeneration},
		{"chat operation", map[string]any{"gen_ai.operation.name": "chat"}, TypeGeneration},
		{"text_completion operation", map[string]any{"gen_ai.operation.name": "text_completion"}, TypeGeneration},
		{"generate_content operation", map[string]any{"gen_ai.operation.name": "generate_content"}, TypeGeneration},
		{"tool operation", map[string]any{"gen_ai.operation.name": "execute_tool"}, TypeSpan},
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
