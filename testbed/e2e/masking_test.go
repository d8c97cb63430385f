package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/readapi"
	"github.com/svc/svc-collector/testbed/workload"
)

// Issue 9: with the default configuration, personal data that real instrumentations write in
// their own places (attributes, JSON inside them, span events, exception events, status, score
// comments and metadata on both score paths) never reaches the platform.

// e2ePII is personal data of every kind the default configuration masks.
var e2ePII = []string{
	e2eEmail, "4111 1111 1111 1111", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
	"+44 20 7946 0958", "DE89 3704 0044 0532 0130 00", "abcdefgh12345678",
}

var (
	e2ePrompt = "Hi, I am " + e2eEmail + ", call me on +44 20 7946 0958. Please refund card 4111 1111 1111 1111 to IBAN DE89 3704 0044 0532 0130 00."
	e2eAnswer = "Done. I used key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z and header Bearer abcdefgh12345678 for " + e2eEmail + "."
)

func jsonText(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`)
}

func TestPersonalDataOfEveryInstrumentationNeverReachesThePlatform(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tp := g.tracerProvider(t, "support-bot")
	ctx := context.Background()
	p, a := jsonText(e2ePrompt), jsonText(e2eAnswer)
	model := attribute.String("gen_ai.request.model", "gpt-4o")

	rootCtx, root := tp.Tracer("my-app").Start(ctx, "support turn", trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"), model))
	spans := []struct {
		scope, name string
		attrs       []attribute.KeyValue
	}{
		{"ai", "ai.generateText", []attribute.KeyValue{model,
			attribute.String("ai.prompt", `{"prompt":"`+p+`"}`),
			attribute.String("ai.prompt.messages", `[{"role":"user","content":[{"type":"text","text":"`+p+`"}]}]`),
			attribute.String("ai.response.text", e2eAnswer)}},
		{"opentelemetry.instrumentation.openai.v1", "openai.chat", []attribute.KeyValue{model,
			attribute.String("gen_ai.prompt.0.content", e2ePrompt),
			attribute.String("gen_ai.completion.0.content", e2eAnswer),
			attribute.String("traceloop.entity.input", `{"inputs":{"question":"`+p+`"}}`),
			attribute.String("traceloop.entity.output", `{"outputs":{"answer":"`+a+`"}}`)}},
		{"mlflow.tracing", "ChatOpenAI", []attribute.KeyValue{model,
			attribute.String("mlflow.spanInputs", `{"messages":[{"role":"user","content":"`+p+`"}]}`),
			attribute.String("mlflow.spanOutputs", `{"content":"`+a+`"}`)}},
		{"pydantic-ai", "agent run", []attribute.KeyValue{model,
			attribute.String("all_messages_events", `[{"role":"user","content":"`+p+`"}]`),
			attribute.String("final_result", e2eAnswer)}},
		{"langsmith", "ChatOpenAI", []attribute.KeyValue{model,
			attribute.String("gen_ai.prompt", `{"messages":[{"role":"user","content":"`+p+`"}]}`),
			attribute.String("gen_ai.completion", `{"generations":[[{"text":"`+a+`"}]]}`),
			attribute.String("langsmith.metadata.user_email", e2eEmail)}},
	}
	for _, s := range spans {
		_, span := tp.Tracer(s.scope).Start(rootCtx, s.name, trace.WithAttributes(s.attrs...))
		span.End()
	}
	// The shapes the load runs' workload draws its LLM spans from (OpenInference, the svc SDK,
	// OpenLLMetry, the Vercel AI SDK, both GenAI conventions), with the personal data in the
	// prompt, the answer and a metadata value.
	call := workload.LLMCall{Model: "gpt-4o", Provider: "openai", System: "You are a support agent.",
		Prompt: e2ePrompt, Answer: e2eAnswer, InputTokens: 10, OutputTokens: 20,
		Metadata: []attribute.KeyValue{attribute.String("customer", e2eEmail)}}
	for _, shape := range workload.Shapes {
		_, span := tp.Tracer(shape.Scope, trace.WithInstrumentationVersion(shape.ScopeVersion)).Start(rootCtx, "chat "+shape.Name,
			trace.WithAttributes(shape.Attributes(call)...))
		for _, e := range shape.Events(call) {
			span.AddEvent(e.Name, trace.WithAttributes(e.Attrs...))
		}
		span.End()
	}
	// Earlier GenAI conventions (content in span events), an exception quoting the input, the
	// status message, and an evaluation whose explanation quotes the user.
	_, chat := tp.Tracer("opentelemetry.instrumentation.openai_v2").Start(rootCtx, "chat gpt-4o", trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"), model))
	chat.AddEvent("gen_ai.content.prompt", trace.WithAttributes(attribute.String("gen_ai.prompt", `[{"role":"user","content":"`+p+`"}]`)))
	chat.AddEvent("gen_ai.user.message", trace.WithAttributes(attribute.String("content", e2ePrompt)))
	chat.AddEvent("gen_ai.content.completion", trace.WithAttributes(attribute.String("gen_ai.completion", `[{"role":"assistant","content":"`+a+`"}]`)))
	chat.RecordError(fmt.Errorf("invalid card 4111 1111 1111 1111 for %s", e2eEmail))
	chat.SetStatus(codes.Error, "refund failed for "+e2eEmail)
	chat.AddEvent("gen_ai.evaluation.result", trace.WithAttributes(
		attribute.String("gen_ai.evaluation.name", "faithfulness"),
		attribute.Float64("gen_ai.evaluation.score.value", 0.2),
		attribute.String("gen_ai.evaluation.explanation", "The answer repeats "+e2eEmail+" and card 4111 1111 1111 1111.")))
	chat.End()
	root.End()
	flush(t, tp)

	// The same application's evaluator reports a score through the logs API.
	lp := g.loggerProvider(t)
	var rec otellog.Record
	rec.SetEventName("svc.score")
	rec.SetTimestamp(time.Now())
	rec.AddAttributes(
		attribute.String("svc.score.name", "user_feedback"),
		attribute.String("svc.score.value", "refund to "+e2eEmail),
		attribute.String("svc.score.comment", "user pasted sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
		attribute.String("svc.score.metadata.reviewer", e2eEmail),
	)
	lp.Logger("example.com/evaluator").Emit(trace.ContextWithSpanContext(ctx, root.SpanContext()), rec)
	if err := lp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	g.waitForSpans(t, len(spans)+len(workload.Shapes)+2)
	g.waitForScores(t, 2)
	id := root.SpanContext().TraceID()
	traceID := id.String()

	// Through the platform's read APIs, as a user reads them back.
	obsBody := rawGET(t, g, "/api/public/v2/observations", url.Values{"traceId": {traceID}, "fields": {readapi.DefaultObservationFields}, "limit": {"1000"}})
	scoreBody := rawGET(t, g, "/api/public/v3/scores", url.Values{"traceId": {traceID}, "limit": {"100"}})
	// And everything the platform stored, whatever its API shows.
	stored := fmt.Sprintf("%#v %#v", g.platform.ObservationsByTrace(traceID), g.platform.Scores(platform.ScoreFilter{}))
	for _, pii := range e2ePII {
		for what, text := range map[string]string{"observations API": obsBody, "scores API": scoreBody, "stored data": stored} {
			if strings.Contains(text, pii) || strings.Contains(text, jsonText(pii)) {
				t.Errorf("%q reached the platform (%s)", pii, what)
			}
		}
	}
	// The text around the personal data arrives.
	for _, kept := range []string{"Please refund card [CARD] to IBAN [IBAN]", "header Bearer [TOKEN]"} {
		if !strings.Contains(obsBody, kept) {
			t.Errorf("observations lack %q", kept)
		}
	}
	for _, kept := range []string{"The answer repeats [EMAIL] and card [CARD].", "user pasted [API_KEY]", "refund to [EMAIL]"} {
		if !strings.Contains(scoreBody, kept) {
			t.Errorf("scores lack %q:\n%s", kept, scoreBody)
		}
	}
}

// rawGET returns the body of a read API answer, to search it as text.
func rawGET(t *testing.T, g *gateway, path string, q url.Values) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, g.platform.URL()+path+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(testPublicKey+":"+testSecretKey)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d %v", path, resp.StatusCode, err)
	}
	return string(body)
}
