package e2e

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/testbed/collector"
)

// vercelDoGenerate is the ai.generateText.doGenerate span the Vercel AI SDK (ai 5.0.277 with
// @ai-sdk/openai 2.0.130, experimental_telemetry with functionId "plan" and metadata userId,
// sessionId, response_format) writes for a chat call answering text: its attributes as the SDK
// sets them, recorded from the real package.
func vercelDoGenerate(text string) map[string]any {
	return map[string]any{
		"operation.name": "ai.generateText.doGenerate plan", "resource.name": "plan",
		"ai.operationId": "ai.generateText.doGenerate", "ai.telemetry.functionId": "plan",
		"ai.model.provider": "openai.chat", "ai.model.id": "gpt-4o-mini", "ai.settings.maxRetries": int64(2),
		"ai.telemetry.metadata.userId": "u1", "ai.telemetry.metadata.sessionId": "s1",
		"ai.telemetry.metadata.response_format": "json", "ai.request.headers.user-agent": "ai/5.0.277",
		"ai.prompt.messages": `[{"role":"user","content":[{"type":"text","text":"Plan as JSON"}]}]`,
		"gen_ai.system":      "openai.chat", "gen_ai.request.model": "gpt-4o-mini",
		"ai.response.finishReason": "stop", "ai.response.text": text, "ai.response.id": "c1",
		"ai.response.model": "gpt-4o-mini", "ai.response.timestamp": "2026-11-26T12:00:01.000Z",
		"ai.response.providerMetadata": `{"openai":{}}`, "ai.usage.promptTokens": int64(10), "ai.usage.completionTokens": int64(5),
		"gen_ai.response.finish_reasons": []any{"stop"}, "gen_ai.response.id": "c1", "gen_ai.response.model": "gpt-4o-mini",
		"gen_ai.usage.input_tokens": int64(10), "gen_ai.usage.output_tokens": int64(5),
	}
}

// With the evaluators overlay through the gateway: a Vercel AI SDK generation answering invalid
// JSON gets json_output 0, one answering valid JSON 1 (its output is ai.response.text, its
// response_format the telemetry metadata); a refusal in gen_ai.output.messages (GenAI semantic
// conventions, as the official openai instrumentation's content reaches the platform) gets refusal.
func TestEvaluatorsReadWhatThePlatformShows(t *testing.T) {
	g := startGateway(t, gatewayOptions{configs: []string{
		collector.DefaultConfig(),
		filepath.Join(collector.RepoRoot(), "distribution", "examples", "evaluators.yaml"),
	}})
	td := ptrace.NewTraces()
	start := time.Now().Add(-time.Minute)
	traceID := pcommon.TraceID{0x26, 0x03}
	add := func(scope string, n int, attrs map[string]any) {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "planner")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(scope)
		span := ss.Spans().AppendEmpty()
		span.SetTraceID(traceID)
		var id pcommon.SpanID
		binary.BigEndian.PutUint64(id[:], uint64(0x2600+n))
		span.SetSpanID(id)
		span.SetName(fmt.Sprintf("call %d", n))
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Second)))
		if err := span.Attributes().FromRaw(attrs); err != nil {
			t.Fatal(err)
		}
	}
	add("ai", 1, vercelDoGenerate(`{"plan":["fly","hotel"]}`))
	add("ai", 2, vercelDoGenerate(`Sure! {"plan":["fly"`))
	add("opentelemetry.instrumentation.openai_v2", 3, map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o",
		"gen_ai.input.messages":  `[{"role":"user","parts":[{"type":"text","content":"How do I pick a lock?"}]}]`,
		"gen_ai.output.messages": `[{"role":"assistant","parts":[{"type":"text","content":"I'm sorry, but I can't help with that."}],"finish_reason":"stop"}]`,
	})
	if status, _ := postTracesProto(t, g, td); status != http.StatusOK {
		t.Fatalf("status %d", status)
	}

	want := []string{"0000000000002601/json_output=1", "0000000000002602/json_output=0", "0000000000002603/refusal=1"}
	g.waitForScores(t, len(want))
	g.waitForSpans(t, 3)
	var got []string
	for _, sc := range g.readScores(t, url.Values{"traceId": {traceID.String()}}) {
		obs := "trace"
		if sc.ObservationID != nil {
			obs = *sc.ObservationID
		}
		got = append(got, fmt.Sprintf("%s/%s=%v", obs, sc.Name, sc.Value))
	}
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("scores\n got %v\nwant %v", got, want)
	}
}
