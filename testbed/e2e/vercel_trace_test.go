package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A Vercel AI SDK trace whose telemetry metadata names a user, a session and tags (attributes as
// the real ai 5.0.277 writes them: ai.telemetry.metadata.userId, .sessionId, .tags) shows them on
// the platform's trace through the gateway with the shipped config, as a direct export does: the
// gateway's metadata promotion copies, it never takes the platform's attributes away.
func TestVercelAIUserSessionAndTagsThroughTheGateway(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "planner")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("ai")
	traceID := pcommon.TraceID{0x26, 0x04}
	start := time.Now().Add(-time.Minute)
	telemetry := func(attrs pcommon.Map) {
		attrs.PutStr("ai.telemetry.functionId", "plan")
		attrs.PutStr("ai.telemetry.metadata.userId", "user-42")
		attrs.PutStr("ai.telemetry.metadata.sessionId", "session-7")
		tags := attrs.PutEmptySlice("ai.telemetry.metadata.tags")
		tags.AppendEmpty().SetStr("beta")
		tags.AppendEmpty().SetStr("travel")
		attrs.PutStr("ai.telemetry.metadata.desk", "refunds")
		attrs.PutStr("ai.model.id", "gpt-4o-mini")
		attrs.PutStr("ai.model.provider", "openai.chat")
	}
	outer := ss.Spans().AppendEmpty()
	outer.SetTraceID(traceID)
	outer.SetSpanID(pcommon.SpanID{0x26, 1})
	outer.SetName("ai.generateText")
	outer.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	outer.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(2 * time.Second)))
	telemetry(outer.Attributes())
	outer.Attributes().PutStr("operation.name", "ai.generateText plan")
	outer.Attributes().PutStr("ai.operationId", "ai.generateText")
	outer.Attributes().PutStr("ai.prompt", `{"prompt":"Plan a trip"}`)
	outer.Attributes().PutStr("ai.response.text", "Fly, then hotel.")
	inner := ss.Spans().AppendEmpty()
	inner.SetTraceID(traceID)
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], 0x2602)
	inner.SetSpanID(id)
	inner.SetParentSpanID(outer.SpanID())
	inner.SetName("ai.generateText.doGenerate")
	inner.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(100 * time.Millisecond)))
	inner.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(1900 * time.Millisecond)))
	telemetry(inner.Attributes())
	inner.Attributes().PutStr("operation.name", "ai.generateText.doGenerate plan")
	inner.Attributes().PutStr("ai.operationId", "ai.generateText.doGenerate")
	inner.Attributes().PutStr("gen_ai.request.model", "gpt-4o-mini")
	inner.Attributes().PutStr("ai.prompt.messages", `[{"role":"user","content":[{"type":"text","text":"Plan a trip"}]}]`)
	inner.Attributes().PutStr("ai.response.text", "Fly, then hotel.")

	if status, _ := postTracesProto(t, g, td); status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	g.waitForSpans(t, 2)

	// GET /api/public/traces/{id}: the platform's trace record.
	var trace struct {
		UserID    string   `json:"userId"`
		SessionID string   `json:"sessionId"`
		Tags      []string `json:"tags"`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.platform.URL()+"/api/public/traces/"+url.PathEscape(traceID.String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(testPublicKey, testSecretKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("trace read API answered %d (it comes with the platform of issue 26)", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&trace); err != nil {
		t.Fatal(err)
	}
	slices.Sort(trace.Tags)
	if trace.UserID != "user-42" || trace.SessionID != "session-7" || !slices.Equal(trace.Tags, []string{"beta", "travel"}) {
		t.Errorf("trace user %q session %q tags %v; want user-42, session-7, [beta travel]", trace.UserID, trace.SessionID, trace.Tags)
	}
	for _, o := range g.observations(t, traceID.String()) {
		if o.Metadata["desk"] != "refunds" {
			t.Errorf("%s: metadata desk = %v, want refunds", o.Name, o.Metadata["desk"])
		}
		if _, ok := o.Metadata["userId"]; ok {
			t.Errorf("%s: userId is the trace's user, not metadata", o.Name)
		}
	}
}
