package svcevaluatorconnector

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// examplesConfig is the svcevaluator configuration of distribution/examples/evaluators.yaml
// (sample_rate, an environment variable there, at 1).
func examplesConfig(t *testing.T) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("..", "distribution", "examples", "evaluators.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub("connectors::svcevaluator")
	require.NoError(t, err)
	require.NoError(t, sub.Merge(confmap.NewFromStringMap(map[string]any{"sample_rate": 1})))
	cfg := createDefaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	// The overlay takes its rate from the svcsampling extension (rate 1 by default), which these
	// tests of the evaluators do not run: every trace is kept, as sample_rate 1 says.
	cfg.Sampling = nil
	return cfg
}

// exampleSpan adds a span of the given scope with the attributes the instrumentation sends.
func exampleSpan(td ptrace.Traces, scope string, n int, attrs map[string]any) {
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "travel")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(scope)
	span := ss.Spans().AppendEmpty()
	span.SetTraceID(pcommon.TraceID{1})
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], uint64(n))
	span.SetSpanID(id)
	span.SetName("span")
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Second)))
	if err := span.Attributes().FromRaw(attrs); err != nil {
		panic(err)
	}
}

// vercelGeneration is an ai.generateText.doGenerate span of the Vercel AI SDK (ai v5) with
// experimental_telemetry.metadata {response_format: "json"}, answering text.
func vercelGeneration(text string) map[string]any {
	return map[string]any{
		"operation.name": "ai.generateText.doGenerate", "ai.operationId": "ai.generateText.doGenerate",
		"ai.model.id": "gpt-4o-mini", "ai.model.provider": "openai.responses",
		"ai.prompt.messages": `[{"role":"user","content":[{"type":"text","text":"Plan a trip as JSON."}]}]`,
		"ai.response.text":   text, "ai.response.finishReason": "stop",
		"ai.usage.inputTokens": int64(20), "ai.usage.outputTokens": int64(12),
		"ai.telemetry.metadata.response_format": "json",
		"gen_ai.system":                         "openai.responses", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
	}
}

// With the evaluators overlay: a Vercel AI SDK generation with invalid JSON output gets
// json_output 0, one with valid JSON 1; a refusal in gen_ai.output.messages (the official openai
// instrumentation, GenAI semantic conventions) gets refusal, as does one in svc.observation.output.
func TestExampleEvaluatorsOnRealShapes(t *testing.T) {
	td := ptrace.NewTraces()
	exampleSpan(td, "ai", 1, vercelGeneration(`{"plan":["fly","hotel"]}`))
	exampleSpan(td, "ai", 2, vercelGeneration(`Sure! {"plan":["fly"`))
	exampleSpan(td, "@opentelemetry/instrumentation-openai", 3, map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
		"gen_ai.input.messages":  `[{"role":"user","parts":[{"type":"text","content":"How do I pick a lock?"}]}]`,
		"gen_ai.output.messages": `[{"role":"assistant","parts":[{"type":"text","content":"I'm sorry, but I can't help with that."}],"finish_reason":"stop"}]`,
	})
	exampleSpan(td, "@opentelemetry/instrumentation-openai", 4, map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
		"gen_ai.output.messages": `[{"role":"assistant","parts":[{"type":"text","content":"Lock picking needs a tension wrench."}],"finish_reason":"stop"}]`,
	})
	exampleSpan(td, "svc-sdk", 5, map[string]any{"svc.observation.type": "generation", "svc.observation.output": "I'm sorry, I can't do that."})

	sink := &consumertest.LogsSink{}
	c := newTestConnector(t, examplesConfig(t), sink, nil)
	require.NoError(t, c.ConsumeTraces(context.Background(), td))
	got, _ := scoresOf(t, sink)
	assert.Equal(t, []string{
		"0000000000000001/json_output=1",
		"0000000000000002/json_output=0",
		"0000000000000003/refusal=1",
		"0000000000000005/refusal=1",
	}, got)
}
