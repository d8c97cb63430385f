package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"
)

// Issue 18: GenAI content that instrumentations send as log records (prompts and completions as
// OpenTelemetry events, in a separate exporter from the spans) is joined onto its span by the
// gateway, masked, and shown as the observation's input and output.

// The scopes of the real instrumentations whose records these tests imitate.
const (
	scopePythonOpenAI = "opentelemetry.instrumentation.openai_v2"
	scopeJSOpenAI     = "@opentelemetry/instrumentation-openai"
)

// contentJoinWait is the join's wait in the test of spans that must not wait: long, so that a span
// delayed by the join could not be mistaken for one that was not.
const contentJoinWait = 30 * time.Second

// genAIMessage is one message of gen_ai.input.messages / gen_ai.output.messages as the platform
// returns them in an observation's input and output.
type genAIMessage struct {
	Role         string           `json:"role"`
	Parts        []map[string]any `json:"parts"`
	FinishReason string           `json:"finish_reason"`
}

// contentCall is one generation: its span and the content records its instrumentation emits.
type contentCall struct {
	name    string
	scope   string
	span    trace.Span
	records []otellog.Record
	// logsFirst: the application's log exporter flushes before its span exporter.
	logsFirst bool
	// wantIn and wantOut are texts the observation's input and output must show (masked).
	wantIn, wantOut []string
}

// chatSpan starts the inference span of one call, as the instrumentations name and describe it.
func chatSpan(t *testing.T, g *gateway, tracerName, model string, extra ...attribute.KeyValue) trace.Span {
	t.Helper()
	tp := g.tracerProvider(t, "support-bot")
	attrs := append([]attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.request.model", model),
	}, extra...)
	_, span := tp.Tracer(tracerName).Start(context.Background(), "chat "+model,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return span
}

// olderEvent is a per-message content event: named by the event name field (Python openai-v2) or by
// the event.name attribute only (JS instrumentation-openai), with gen_ai.system and a body.
func olderEvent(name string, byAttribute bool, body attribute.Value) otellog.Record {
	var rec otellog.Record
	rec.SetTimestamp(time.Now())
	rec.SetSeverity(otellog.SeverityInfo)
	if byAttribute {
		rec.AddAttributes(attribute.String("event.name", name))
	} else {
		rec.SetEventName(name)
	}
	rec.AddAttributes(attribute.String("gen_ai.system", "openai"))
	rec.SetBody(body)
	return rec
}

// textMessage is the structured value of a current-conventions message with one text part.
func textMessage(role, text, finish string) attribute.Value {
	kvs := []attribute.KeyValue{
		attribute.String("role", role),
		attribute.Slice("parts", attribute.MapValue(attribute.String("type", "text"), attribute.String("content", text))),
	}
	if finish != "" {
		kvs = append(kvs, attribute.String("finish_reason", finish))
	}
	return attribute.MapValue(kvs...)
}

// detailsEvent is gen_ai.client.inference.operation.details as the JS Responses API support emits it:
// the event name field set, the messages as structured values.
func detailsEvent(attr string, msgs ...attribute.Value) otellog.Record {
	var rec otellog.Record
	rec.SetTimestamp(time.Now())
	rec.SetEventName("gen_ai.client.inference.operation.details")
	rec.AddAttributes(attribute.String("gen_ai.provider.name", "openai"), attribute.Slice(attr, msgs...))
	rec.SetBody(attribute.SliceValue(msgs...))
	return rec
}

func TestContentLogRecordsJoinTheirSpans(t *testing.T) {
	// The default config: spans and records 2s apart are within the join's default wait (5s).
	g := startGateway(t, gatewayOptions{})
	ctx := context.Background()
	lp := g.loggerProvider(t)

	// JS chat completions, logs first: one record per message, named by the event.name attribute.
	js := contentCall{name: "js chat completion", scope: scopeJSOpenAI, logsFirst: true,
		span: chatSpan(t, g, scopeJSOpenAI, "gpt-4o-mini", attribute.String("gen_ai.system", "openai"))}
	js.records = []otellog.Record{
		olderEvent("gen_ai.system.message", true, attribute.MapValue(attribute.String("content", "You are the support agent of Acme."))),
		olderEvent("gen_ai.user.message", true, attribute.MapValue(attribute.String("content", "Reset my password, my e-mail is "+e2eEmail))),
		olderEvent("gen_ai.choice", true, attribute.MapValue(
			attribute.String("finish_reason", "stop"), attribute.Int("index", 0),
			attribute.Map("message", attribute.String("content", "I sent the reset link to "+e2eEmail+".")))),
	}
	js.wantIn = []string{"You are the support agent of Acme.", "Reset my password, my e-mail is [EMAIL]"}
	js.wantOut = []string{"I sent the reset link to [EMAIL]."}

	// Python openai-v2, spans first: the model answers with a tool call whose arguments (JSON text)
	// hold the e-mail address.
	py := contentCall{name: "python tool call", scope: scopePythonOpenAI,
		span: chatSpan(t, g, scopePythonOpenAI, "gpt-4o", attribute.String("gen_ai.system", "openai"))}
	py.records = []otellog.Record{
		olderEvent("gen_ai.user.message", false, attribute.MapValue(attribute.String("content", "Cancel order A-1042 for "+e2eEmail))),
		olderEvent("gen_ai.choice", false, attribute.MapValue(
			attribute.Int("index", 0), attribute.String("finish_reason", "tool_calls"),
			attribute.Map("message", attribute.String("role", "assistant"), attribute.Slice("tool_calls", attribute.MapValue(
				attribute.String("id", "call_9Zt"), attribute.String("type", "function"),
				attribute.Map("function", attribute.String("name", "cancel_order"),
					attribute.String("arguments", `{"order_id": "A-1042", "email": "`+e2eEmail+`"}`))))))),
	}
	py.wantIn = []string{"Cancel order A-1042 for [EMAIL]"}
	py.wantOut = []string{"cancel_order", "[EMAIL]"}

	// JS Responses API, spans first: the details event twice, input and output as structured values;
	// the span carries its system instructions as a raw string.
	resp := contentCall{name: "js responses api", scope: scopeJSOpenAI,
		span: chatSpan(t, g, scopeJSOpenAI, "gpt-4.1-mini", attribute.String("gen_ai.provider.name", "openai"),
			attribute.String("gen_ai.system_instructions", "You are terse."))}
	resp.records = []otellog.Record{
		detailsEvent("gen_ai.input.messages", textMessage("system", "You are terse.", ""),
			textMessage("user", "Summarise the ticket of "+e2eEmail, "")),
		detailsEvent("gen_ai.output.messages", textMessage("assistant", "Printer offline since Monday.", "stop")),
	}
	resp.wantIn = []string{"Summarise the ticket of [EMAIL]"}
	resp.wantOut = []string{"Printer offline since Monday."}

	calls := []*contentCall{&js, &py, &resp}
	for _, c := range calls {
		c.span.End()
		logger := lp.Logger(c.scope)
		emitRecords := func() {
			sctx := trace.ContextWithSpanContext(ctx, c.span.SpanContext())
			for _, rec := range c.records {
				logger.Emit(sctx, rec)
			}
			flush(t, lp)
		}
		if c.logsFirst {
			emitRecords()
			time.Sleep(2 * time.Second)
			flushSpans(t, c.span)
		} else {
			flushSpans(t, c.span)
			time.Sleep(2 * time.Second)
			emitRecords()
		}
	}

	// An evaluation result in the logs pipeline still becomes a score.
	var eval otellog.Record
	eval.SetEventName("gen_ai.evaluation.result")
	eval.AddAttributes(attribute.String("gen_ai.evaluation.name", "helpfulness"), attribute.Float64("gen_ai.evaluation.score.value", 0.8))
	lp.Logger("example.com/evaluator").Emit(trace.ContextWithSpanContext(ctx, js.span.SpanContext()), eval)
	flush(t, lp)

	g.waitForSpans(t, len(calls))
	g.waitForScores(t, 1)
	for _, c := range calls {
		traceID := c.span.SpanContext().TraceID()
		obs := g.observations(t, hex.EncodeToString(traceID[:]))
		if len(obs) != 1 {
			t.Errorf("%s: %d observations, want 1", c.name, len(obs))
			continue
		}
		in, out := derefOrEmpty(obs[0].Input), derefOrEmpty(obs[0].Output)
		checkMessages(t, c.name+" input", in, c.wantIn)
		checkMessages(t, c.name+" output", out, c.wantOut)
	}
}

// Spans that carry their own content, and spans of instrumentations that do not emit content
// events, are not held for content: they reach the platform long before the join's wait ends.
func TestSpansNotWaitingForContentAreNotDelayed(t *testing.T) {
	g := startGateway(t, gatewayOptions{sets: []string{
		"processors::svcspanfilter::content_join::wait=" + contentJoinWait.String(),
	}})
	own := chatSpan(t, g, scopePythonOpenAI, "gpt-4o",
		attribute.String("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"from the span"}]}]`),
		attribute.String("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"text","content":"answer"}],"finish_reason":"stop"}]`))
	other := chatSpan(t, g, "checkout/llm", "gpt-4o")
	own.End()
	other.End()
	start := time.Now()
	flushSpans(t, own, other)
	g.waitForSpans(t, 2)
	if waited := time.Since(start); waited >= contentJoinWait/2 {
		t.Errorf("spans that wait for no content took %v to arrive (the join's wait is %v)", waited, contentJoinWait)
	}
	traceID := own.SpanContext().TraceID()
	obs := g.observations(t, hex.EncodeToString(traceID[:]))
	if len(obs) != 1 || !strings.Contains(derefOrEmpty(obs[0].Input), "from the span") {
		t.Errorf("the span's own content must stay: %+v", obs)
	}
}

// flushSpans exports the given spans' tracer providers.
func flushSpans(t *testing.T, spans ...trace.Span) {
	t.Helper()
	for _, s := range spans {
		if tp, ok := s.TracerProvider().(interface{ ForceFlush(context.Context) error }); ok {
			flush(t, tp)
		}
	}
}

// checkMessages asserts that raw is messages JSON in the current conventions' structure that shows
// every wanted text, and never the e-mail address unmasked.
func checkMessages(t *testing.T, what, raw string, want []string) {
	t.Helper()
	if strings.Contains(raw, e2eEmail) {
		t.Errorf("%s shows the e-mail address unmasked: %s", what, raw)
	}
	var msgs []genAIMessage
	if err := json.Unmarshal([]byte(raw), &msgs); err != nil || len(msgs) == 0 {
		t.Errorf("%s is not a message list (%v): %q", what, err, raw)
		return
	}
	for _, m := range msgs {
		if m.Role == "" || m.Parts == nil {
			t.Errorf("%s: message without role or parts: %+v", what, m)
		}
	}
	for _, w := range want {
		if !strings.Contains(raw, w) {
			t.Errorf("%s = %s, want it to show %q", what, raw, w)
		}
	}
}
