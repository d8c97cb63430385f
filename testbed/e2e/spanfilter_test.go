package e2e

import (
	"context"
	"encoding/hex"
	"sort"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc/svc-collector/testbed/readapi"
	"github.com/svc/svc-collector/testbed/workload"
)

// Tests of the svcspanfilter processor in the built distribution (issue 3): only GenAI spans reach
// the platform, and each trace arrives as one connected tree even when the spans in between were
// dropped and when a trace's spans come in several requests.

// assertConnectedTree checks that every observation's parent is an observation of the trace and
// that the trace has exactly wantRoot as its root; it returns each observation's parent by name.
func assertConnectedTree(t *testing.T, obs []readapi.Observation, wantRoot string) map[string]string {
	t.Helper()
	byID := map[string]string{}
	for _, o := range obs {
		byID[o.ID] = o.Name
	}
	parents := map[string]string{}
	var roots []string
	for _, o := range obs {
		if o.Parent() == "" {
			roots = append(roots, o.Name)
			parents[o.Name] = ""
			continue
		}
		parent, ok := byID[o.Parent()]
		if !ok {
			t.Errorf("observation %q points at parent %s, which the platform never received", o.Name, o.Parent())
			continue
		}
		parents[o.Name] = parent
	}
	sort.Strings(roots)
	if len(roots) != 1 || roots[0] != wantRoot {
		t.Errorf("roots of the trace are %q, want only %q", roots, wantRoot)
	}
	return parents
}

// withSpanNames names each observation after the span sent with its id: the platform names a
// tool call's observation after its gen_ai.tool.name, the tests know spans by their span names.
func withSpanNames(obs []readapi.Observation, sent map[string]trace.SpanID) []readapi.Observation {
	names := make(map[string]string, len(sent))
	for name, id := range sent {
		names[hex.EncodeToString(id[:])] = name
	}
	for i := range obs {
		if name, ok := names[obs[i].ID]; ok {
			obs[i].Name = name
		}
	}
	return obs
}

func TestAgentTraceArrivesWithOnlyGenAISpansAsOneTree(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tp := g.tracerProvider(t, "support-agent")
	sent := workload.EmitAgentTrace(context.Background(), tp, workload.AgentOptions{Seed: 3, ExtraPlainSpans: 4})
	flush(t, tp)
	g.waitForSpans(t, len(sent.GenAISpans))

	obs := withSpanNames(g.observations(t, hex.EncodeToString(sent.TraceID[:])), sent.GenAISpans)
	if len(obs) != len(sent.GenAISpans) {
		names := make([]string, 0, len(obs))
		for _, o := range obs {
			names = append(names, o.Name)
		}
		t.Fatalf("platform has %d observations %q, want the %d GenAI spans of the %d sent", len(obs), names, len(sent.GenAISpans), sent.TotalSpans)
	}
	for _, o := range obs {
		if id, ok := sent.GenAISpans[o.Name]; !ok || o.ID != hex.EncodeToString(id[:]) {
			t.Errorf("observation %q (%s) is not one of the GenAI spans sent", o.Name, o.ID)
		}
	}
	parents := assertConnectedTree(t, obs, workload.SpanAgent)
	// The tool's parent, "dispatch tools", is a plain span: the tool hangs from the agent instead.
	for _, name := range []string{workload.SpanRetrieval, workload.SpanPlan, workload.SpanTool, workload.SpanAnswer} {
		if parents[name] != workload.SpanAgent {
			t.Errorf("%q hangs from %q, want the agent %q", name, parents[name], workload.SpanAgent)
		}
	}
	tool, ok := g.platform.Observation(sent.TraceID.String(), sent.GenAISpans[workload.SpanTool].String())
	if !ok {
		t.Fatal("the tool span is not on the platform")
	}
	if tool.Attributes["svc.original_parent_span_id"] == nil {
		t.Errorf("the re-parented tool span does not record its original parent in svc.original_parent_span_id")
	}
}

// A trace's spans arrive in three requests, children first (spans are exported when they end):
// the LLM call waits for the agent, the agent for the dropped HTTP root; nothing arrives pointing
// at a parent the platform does not have.
func TestTraceSplitAcrossRequestsStaysOneTree(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tp := g.tracerProvider(t, "support-agent")
	httpServer := tp.Tracer(workload.ScopeHTTPServer)
	app := tp.Tracer(workload.ScopeApp)
	llm := tp.Tracer(workload.ScopeOpenAI)
	httpClient := tp.Tracer(workload.ScopeHTTPClient)

	ctx, root := httpServer.Start(context.Background(), "POST /v1/support/chat", trace.WithSpanKind(trace.SpanKindServer))
	agentCtx, agent := app.Start(ctx, workload.SpanAgent, trace.WithAttributes(attribute.String("gen_ai.operation.name", "invoke_agent")))
	llmCtx, call := llm.Start(agentCtx, workload.SpanAnswer, trace.WithAttributes(attribute.String("gen_ai.request.model", "gpt-4o")))
	_, openAIRequest := httpClient.Start(llmCtx, "POST api.openai.com", trace.WithSpanKind(trace.SpanKindClient))
	traceID := root.SpanContext().TraceID().String()

	openAIRequest.End()
	call.End()
	flush(t, tp) // request 1: the LLM call and its HTTP span; the call's parent is not known yet
	time.Sleep(300 * time.Millisecond)
	if obs := g.observations(t, traceID); len(obs) != 0 {
		t.Errorf("the LLM call arrived before its parent was known: %d observations", len(obs))
	}
	agent.End()
	flush(t, tp) // request 2: the agent, whose parent (the HTTP root) is not known yet
	root.End()
	flush(t, tp) // request 3: the dropped root; the agent becomes the trace's root
	g.waitForSpans(t, 2)

	parents := assertConnectedTree(t, g.observations(t, traceID), workload.SpanAgent)
	if parents[workload.SpanAnswer] != workload.SpanAgent {
		t.Errorf("the LLM call hangs from %q, want the agent", parents[workload.SpanAnswer])
	}
	if n := g.platform.SpanDeliveries(traceID, call.SpanContext().SpanID().String()); n != 1 {
		t.Errorf("the LLM call was delivered %d times, want once", n)
	}
}

// A span whose parent lives in a service that does not send to this gateway waits
// trace_integrity.wait_duration, then arrives with its parent id unchanged (rule 1: a span is made a
// root only when every ancestor is known dropped).
func TestSpanWithRemoteParentKeepsItsParentAfterWait(t *testing.T) {
	g := startGateway(t, gatewayOptions{sets: []string{"processors::svcspanfilter::trace_integrity::wait_duration=1s"}})
	tp := g.tracerProvider(t, "support-agent")
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 15: 0x01}, SpanID: trace.SpanID{0x8c, 7: 0x02},
		TraceFlags: trace.FlagsSampled, Remote: true,
	})
	_, call := tp.Tracer(workload.ScopeOpenAI).Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), workload.SpanAnswer)
	call.End()
	sentAt := time.Now()
	flush(t, tp)
	g.waitForSpans(t, 1)
	if waited := time.Since(sentAt); waited < time.Second {
		t.Errorf("the span arrived %v after it was sent, before wait_duration (1s) ended", waited)
	}

	obs, ok := g.platform.Observation(remote.TraceID().String(), call.SpanContext().SpanID().String())
	if !ok {
		t.Fatal("the span did not reach the platform")
	}
	if obs.ParentObservationID != remote.SpanID().String() {
		t.Errorf("the span arrived with parent %q, want its own parent %s", obs.ParentObservationID, remote.SpanID())
	}
	if got, ok := obs.Attributes["svc.original_parent_span_id"]; ok {
		t.Errorf("the span was not re-parented but records svc.original_parent_span_id = %v", got)
	}
}

// Issue 10: agent runs whose parents end 20 s and 90 s after their children (the SDKs export each
// span when it ends) read back as one tree each: the HTTP root is dropped, invoke_agent becomes the
// root, the chats hang below it, and the dropped tool HTTP span that ends after its kept chat arrives
// as a connector span. wait_duration is 1s, so the children go on long before their parents.
func TestAgentRunsWithLateParentsAreOneTreeEach(t *testing.T) {
	g := startGateway(t, gatewayOptions{sets: []string{"processors::svcspanfilter::trace_integrity::wait_duration=1s"}})
	tp := g.tracerProvider(t, "support-agent")
	httpServer := tp.Tracer(workload.ScopeHTTPServer)
	app := tp.Tracer(workload.ScopeApp)
	llm := tp.Tracer(workload.ScopeOpenAI)
	httpClient := tp.Tracer(workload.ScopeHTTPClient)

	type run struct {
		late                time.Duration
		root, agent, tool   trace.Span
		chat, chatAfterTool trace.Span
		traceID             string
	}
	start := func(late time.Duration) *run {
		r := &run{late: late}
		ctx, root := httpServer.Start(context.Background(), "POST /v1/agent/run", trace.WithSpanKind(trace.SpanKindServer))
		agentCtx, agent := app.Start(ctx, workload.SpanAgent, trace.WithAttributes(attribute.String("gen_ai.operation.name", "invoke_agent")))
		_, chat := llm.Start(agentCtx, "chat gpt-4o", trace.WithAttributes(attribute.String("gen_ai.request.model", "gpt-4o")))
		toolCtx, tool := httpClient.Start(agentCtx, "GET /tools/weather", trace.WithSpanKind(trace.SpanKindClient))
		_, chatAfterTool := llm.Start(toolCtx, "chat gpt-4o (tool)", trace.WithAttributes(attribute.String("gen_ai.request.model", "gpt-4o")))
		r.root, r.agent, r.tool, r.chat, r.chatAfterTool = root, agent, tool, chat, chatAfterTool
		r.traceID = root.SpanContext().TraceID().String()
		return r
	}
	runs := []*run{start(20 * time.Second), start(90 * time.Second)}
	for _, r := range runs {
		r.chat.End()
		r.chatAfterTool.End()
	}
	flush(t, tp)
	began := time.Now()
	g.waitForSpans(t, 4) // the chats go on after wait_duration, pointing at their unknown parents

	for _, r := range runs {
		// The tool's HTTP span ends halfway, the agent and its HTTP root at the end.
		time.Sleep(time.Until(began.Add(r.late / 2)))
		r.tool.End()
		flush(t, tp)
	}
	for _, r := range runs {
		time.Sleep(time.Until(began.Add(r.late)))
		r.agent.End()
		r.root.End()
		flush(t, tp)
	}
	g.waitForSpans(t, 4+2+2) // + the agents + the tool connectors

	for _, r := range runs {
		t.Run(r.late.String(), func(t *testing.T) {
			obs := g.observations(t, r.traceID)
			parents := assertConnectedTree(t, obs, workload.SpanAgent)
			want := map[string]string{
				workload.SpanAgent:   "",
				"chat gpt-4o":        workload.SpanAgent,
				"GET /tools/weather": workload.SpanAgent,
				"chat gpt-4o (tool)": "GET /tools/weather",
			}
			if len(parents) != len(want) {
				t.Errorf("observations %v, want %v", parents, want)
			}
			for name, parent := range want {
				if got, ok := parents[name]; !ok || got != parent {
					t.Errorf("%q hangs from %q, want %q", name, got, parent)
				}
			}
			conn, ok := g.platform.Observation(r.traceID, r.tool.SpanContext().SpanID().String())
			if !ok {
				t.Fatal("the connector span is not on the platform")
			}
			if conn.Attributes["svc.gateway.connector"] != true {
				t.Errorf("the tool span is not marked as a connector: %v", conn.Attributes)
			}
			if n := g.platform.SpanDeliveries(r.traceID, r.chat.SpanContext().SpanID().String()); n != 1 {
				t.Errorf("the chat was delivered %d times, want once", n)
			}
		})
	}
}
