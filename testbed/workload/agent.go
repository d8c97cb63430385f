// Package workload emits realistic GenAI application traffic through a real OpenTelemetry SDK:
// agent traces whose LLM, tool and retrieval spans sit among the ordinary HTTP and database spans
// of the same request, with typed metadata, PII in prompts, and evaluation events. The demo, the
// end-to-end tests and the load generator all send this workload, so what they check is what an
// application would send.
package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Instrumentation scopes of the workload's tracers, as real instrumentations name themselves.
const (
	ScopeHTTPServer = "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	ScopeHTTPClient = "go.opentelemetry.io/contrib/instrumentation/net/http/httptrace/otelhttptrace"
	ScopeDatabase   = "github.com/XSAM/otelsql"
	ScopeApp        = "example.com/support-agent"
	ScopeOpenAI     = "opentelemetry.instrumentation.openai"
	ScopeRetrieval  = "openinference.instrumentation.llama_index"
)

// AgentOptions shape one agent trace.
type AgentOptions struct {
	// Seed makes the trace's content deterministic (ids come from the SDK's generator).
	Seed uint64
	// IOBytes is the rough size of each LLM span's input and output; default 1 KiB.
	IOBytes int
	// IOBytesMax, when above IOBytes, makes the size of each LLM input and output vary between
	// IOBytes and IOBytesMax (log-uniform, drawn from Seed), as prompts and answers do.
	IOBytesMax int
	// MetadataKeys is the number of observation metadata keys on each LLM span; default 5.
	MetadataKeys int
	// UserEmail, when set, appears in the user's prompt (PII the gateway must mask).
	UserEmail string
	// PromptPII are more secrets for the user's prompt after UserEmail (card numbers, API keys).
	PromptPII []string
	// MetadataPII, when set, is the value of one more observation metadata key, `contact`, on
	// the LLM spans (beside MetadataKeys): masking must reach metadata values too.
	MetadataPII string
	// Evaluations adds a gen_ai.evaluation.result event to the answer span and a trace-level
	// svc.score event to the agent span.
	Evaluations bool
	// ExtraPlainSpans adds that many more ordinary (non-GenAI) database spans, to set the share
	// of spans the gateway must drop.
	ExtraPlainSpans int
	// InvalidScore adds to the tool span a svc.score event that passes the gateway but that the
	// platform rejects (a BOOLEAN valued 7, as a buggy evaluator sends): its batch gets a 207.
	InvalidScore bool
	// Shape, when set, is the name of the instrumentation shape (shapes.go) the two LLM spans
	// take: its scope, content attributes and events, metadata names. Empty: the GenAI semantic
	// conventions on the openai scope with svc observation attributes, as before shapes.
	Shape string
}

// AgentTrace says what EmitAgentTrace sent, so a check can compare with what arrived.
type AgentTrace struct {
	TraceID trace.TraceID
	// GenAISpans maps each GenAI span's name to its span id; these are the spans the platform
	// must receive. AgentSpan is the GenAI span closest to the root.
	GenAISpans map[string]trace.SpanID
	AgentSpan  trace.SpanID
	// TotalSpans counts every span sent, GenAI or not.
	TotalSpans int
	// Scores counts the evaluation events sent; InvalidScores those of them the platform
	// rejects (AgentOptions.InvalidScore).
	Scores        int
	InvalidScores int
}

// Span names of the GenAI spans of an agent trace.
const (
	SpanAgent     = "invoke_agent support-agent"
	SpanRetrieval = "retrieve knowledge-base"
	SpanPlan      = "chat gpt-4o-mini"
	SpanTool      = "execute_tool lookup_order"
	SpanAnswer    = "chat gpt-4o"
)

// EmitAgentTrace sends one agent trace through tp and returns what it sent. The trace:
//
//	POST /v1/support/chat (HTTP server)
//	└─ invoke_agent support-agent (GenAI: agent; trace-level score event)
//	   ├─ SELECT customers (database)
//	   ├─ retrieve knowledge-base (GenAI: retriever)
//	   │  └─ POST vector-db (HTTP client)
//	   ├─ chat gpt-4o-mini (GenAI: LLM, typed metadata)
//	   │  └─ POST api.openai.com (HTTP client)
//	   ├─ dispatch tools (plain application span)
//	   │  └─ execute_tool lookup_order (GenAI: tool)
//	   │     └─ SELECT orders (database)
//	   └─ chat gpt-4o (GenAI: LLM, evaluation event)
//	      └─ POST api.openai.com (HTTP client)
func EmitAgentTrace(ctx context.Context, tp trace.TracerProvider, opts AgentOptions) AgentTrace {
	if opts.IOBytes <= 0 {
		opts.IOBytes = 1024
	}
	if opts.MetadataKeys <= 0 {
		opts.MetadataKeys = 5
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	httpServer := tp.Tracer(ScopeHTTPServer, trace.WithInstrumentationVersion("0.63.0"))
	httpClient := tp.Tracer(ScopeHTTPClient, trace.WithInstrumentationVersion("0.63.0"))
	db := tp.Tracer(ScopeDatabase, trace.WithInstrumentationVersion("0.40.0"))
	app := tp.Tracer(ScopeApp, trace.WithInstrumentationVersion("1.4.2"))
	llm := tp.Tracer(ScopeOpenAI, trace.WithInstrumentationVersion("0.44.1"))
	retrieval := tp.Tracer(ScopeRetrieval, trace.WithInstrumentationVersion("4.3.0"))

	out := AgentTrace{GenAISpans: map[string]trace.SpanID{}}
	user := fmt.Sprintf("user-%04d", rng.IntN(10000))
	session := fmt.Sprintf("session-%06d", rng.IntN(1000000))
	question := pick(rng, questions)
	if opts.UserEmail != "" {
		question += " You can reach me at " + opts.UserEmail + "."
	}
	for _, secret := range opts.PromptPII {
		question += " " + secret
	}
	traceMetadata := []attribute.KeyValue{
		attribute.String("svc.trace.metadata.user_id", user),
		attribute.String("svc.trace.metadata.session_id", session),
		attribute.String("svc.trace.metadata.release", "2026.11.3"),
	}

	ctx, root := httpServer.Start(ctx, "POST /v1/support/chat", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(httpServerAttrs("/v1/support/chat", 200)...))
	out.TotalSpans++
	out.TraceID = root.SpanContext().TraceID()

	agentCtx, agent := app.Start(ctx, SpanAgent, trace.WithAttributes(append([]attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.name", "support-agent"),
		attribute.String("svc.observation.type", "agent"),
		attribute.String("svc.observation.input", question),
		attribute.String("svc.trace.name", "support-chat"),
	}, traceMetadata...)...))
	out.TotalSpans++
	out.AgentSpan = agent.SpanContext().SpanID()
	out.GenAISpans[SpanAgent] = out.AgentSpan

	plainDB(agentCtx, db, "SELECT customers", "SELECT id, tier FROM customers WHERE id = $1")
	out.TotalSpans++
	for i := range opts.ExtraPlainSpans {
		plainDB(agentCtx, db, "SELECT audit_log", fmt.Sprintf("SELECT * FROM audit_log WHERE shard = %d", i))
		out.TotalSpans++
	}

	// Retrieval over the knowledge base, with its vector-store HTTP call.
	retCtx, ret := retrieval.Start(agentCtx, SpanRetrieval, trace.WithAttributes(append([]attribute.KeyValue{
		attribute.String("openinference.span.kind", "RETRIEVER"),
		attribute.String("svc.observation.type", "retriever"),
		attribute.String("svc.observation.input", question),
		attribute.String("svc.observation.output", jsonText(map[string]any{"documents": docs(rng, 3)})),
		attribute.Int("svc.observation.metadata.top_k", 3),
	}, traceMetadata...)...))
	out.TotalSpans++
	out.GenAISpans[SpanRetrieval] = ret.SpanContext().SpanID()
	plainHTTPClient(retCtx, httpClient, "POST", "http://vector-db.internal:6333/collections/kb/points/search")
	out.TotalSpans++
	ret.End()

	shape, shaped := ShapeNamed(opts.Shape)
	startLLM := func(ctx context.Context, name, model string) (context.Context, trace.Span) {
		if !shaped {
			return llm.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(append(append(llmAttrs(rng, model, question, opts),
					metadataAttrs(rng, opts)...), traceMetadata...)...))
		}
		call := LLMCall{
			Model: model, Provider: "openai", System: "You are a helpful support agent for an online shop.",
			Prompt: question + " " + filler(rng, ioSize(rng, opts)), Answer: filler(rng, ioSize(rng, opts)),
			InputTokens: 200 + rng.IntN(800), OutputTokens: 50 + rng.IntN(400),
		}
		for _, kv := range metadataAttrs(rng, opts) {
			call.Metadata = append(call.Metadata, attribute.KeyValue{Key: attribute.Key(strings.TrimPrefix(string(kv.Key), "svc.observation.metadata.")), Value: kv.Value})
		}
		attrs := shape.Attributes(call)
		if shape.Scope == "svc-sdk" { // the SDK propagates trace metadata, as JSON text like all its metadata
			for _, kv := range traceMetadata {
				attrs = append(attrs, attribute.String(string(kv.Key), jsonValue(kv.Value)))
			}
		}
		ctx, span := tp.Tracer(shape.Scope, trace.WithInstrumentationVersion(shape.ScopeVersion)).Start(ctx, name,
			trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		for _, e := range shape.Events(call) {
			span.AddEvent(e.Name, trace.WithAttributes(e.Attrs...))
		}
		return ctx, span
	}

	// Planning call to a small model, with typed metadata: a string, a number, a boolean, an object.
	planCtx, plan := startLLM(agentCtx, SpanPlan, "gpt-4o-mini")
	out.TotalSpans++
	out.GenAISpans[SpanPlan] = plan.SpanContext().SpanID()
	plainHTTPClient(planCtx, httpClient, "POST", "https://api.openai.com/v1/chat/completions")
	out.TotalSpans++
	plan.End()

	// A plain application span between the agent and its tool: dropped, so the tool must be
	// re-parented to the agent.
	dispatchCtx, dispatch := app.Start(agentCtx, "dispatch tools", trace.WithAttributes(attribute.Int("tools.count", 1)))
	out.TotalSpans++
	toolCtx, tool := app.Start(dispatchCtx, SpanTool, trace.WithAttributes(append([]attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", "lookup_order"),
		attribute.String("gen_ai.tool.call.id", fmt.Sprintf("call_%08x", rng.Uint32())),
		attribute.String("svc.observation.type", "tool"),
		attribute.String("svc.observation.input", `{"order_id":"A-10023"}`),
		attribute.String("svc.observation.output", `{"status":"shipped","eta_days":2}`),
	}, traceMetadata...)...))
	out.TotalSpans++
	out.GenAISpans[SpanTool] = tool.SpanContext().SpanID()
	if opts.InvalidScore {
		tool.AddEvent("svc.score", trace.WithAttributes(
			attribute.String("svc.score.name", "lookup_correct"),
			attribute.Int("svc.score.value", 7),
			attribute.String("svc.score.data_type", "BOOLEAN"),
		))
		out.Scores++
		out.InvalidScores++
	}
	plainDB(toolCtx, db, "SELECT orders", "SELECT status, eta FROM orders WHERE id = $1")
	out.TotalSpans++
	tool.End()
	dispatch.End()

	// The answer, scored by an online evaluator.
	answerCtx, answer := startLLM(agentCtx, SpanAnswer, "gpt-4o")
	out.TotalSpans++
	out.GenAISpans[SpanAnswer] = answer.SpanContext().SpanID()
	plainHTTPClient(answerCtx, httpClient, "POST", "https://api.openai.com/v1/chat/completions")
	out.TotalSpans++
	if opts.Evaluations {
		answer.AddEvent("gen_ai.evaluation.result", trace.WithAttributes(
			attribute.String("gen_ai.evaluation.name", "relevance"),
			attribute.Float64("gen_ai.evaluation.score.value", float64(60+rng.IntN(40))/100),
			attribute.String("gen_ai.evaluation.explanation", "The answer addresses the order status question."),
		))
		answer.AddEvent("gen_ai.evaluation.result", trace.WithAttributes(
			attribute.String("gen_ai.evaluation.name", "tone"),
			attribute.String("gen_ai.evaluation.score.label", pick(rng, []string{"friendly", "neutral"})),
		))
		agent.AddEvent("svc.score", trace.WithAttributes(
			attribute.String("svc.score.name", "resolved"),
			attribute.Int("svc.score.value", 1),
			attribute.String("svc.score.data_type", "BOOLEAN"),
			attribute.String("svc.score.target", "trace"),
		))
		out.Scores += 3
	}
	answer.End()

	agent.SetAttributes(attribute.String("svc.observation.output", "Your order A-10023 has shipped and arrives in 2 days."))
	agent.End()
	root.End()
	return out
}

func llmAttrs(rng *rand.Rand, model, question string, opts AgentOptions) []attribute.KeyValue {
	input := jsonText([]map[string]any{
		{"role": "system", "content": "You are a helpful support agent for an online shop."},
		{"role": "user", "content": question + " " + filler(rng, ioSize(rng, opts))},
	})
	output := jsonText([]map[string]any{
		{"role": "assistant", "content": filler(rng, ioSize(rng, opts))},
	})
	inTokens, outTokens := 200+rng.IntN(800), 50+rng.IntN(400)
	return []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.system", "openai"),
		attribute.String("gen_ai.provider.name", "openai"),
		attribute.String("gen_ai.request.model", model),
		attribute.String("gen_ai.response.model", model+"-2024-08-06"),
		attribute.Float64("gen_ai.request.temperature", 0.2),
		attribute.Int("gen_ai.request.max_tokens", 1024),
		attribute.Int("gen_ai.usage.input_tokens", inTokens),
		attribute.Int("gen_ai.usage.output_tokens", outTokens),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop"}),
		attribute.String("gen_ai.response.id", fmt.Sprintf("chatcmpl-%016x", rng.Uint64())),
		attribute.String("gen_ai.input.messages", input),
		attribute.String("gen_ai.output.messages", output),
		attribute.String("server.address", "api.openai.com"),
		attribute.Int("server.port", 443),
		attribute.String("svc.observation.type", "generation"),
	}
}

// ioSize is the size of one LLM input or output: IOBytes, or log-uniform up to IOBytesMax. It
// draws from rng only when the size varies, so that fixed-size traces stay as they were.
func ioSize(rng *rand.Rand, opts AgentOptions) int {
	if opts.IOBytesMax <= opts.IOBytes {
		return opts.IOBytes
	}
	lo, hi := math.Log(float64(opts.IOBytes)), math.Log(float64(opts.IOBytesMax))
	return int(math.Exp(lo + rng.Float64()*(hi-lo)))
}

// metadataAttrs are typed observation metadata values as a third-party instrumentation sets
// them: raw OTLP types, not JSON text. The first four keys are always the same, so checks can
// look for them: tier (string), retries (int), cached (bool), latency_budget_s (double).
func metadataAttrs(rng *rand.Rand, opts AgentOptions) []attribute.KeyValue {
	n := opts.MetadataKeys
	attrs := []attribute.KeyValue{
		attribute.String("svc.observation.metadata.tier", pick(rng, []string{"gold", "silver", "bronze"})),
		attribute.Int("svc.observation.metadata.retries", rng.IntN(3)),
		attribute.Bool("svc.observation.metadata.cached", rng.IntN(2) == 0),
		attribute.Float64("svc.observation.metadata.latency_budget_s", 2.5),
	}
	for i := len(attrs); i < n; i++ {
		attrs = append(attrs, attribute.String(fmt.Sprintf("svc.observation.metadata.tag_%d", i), pick(rng, words)))
	}
	attrs = attrs[:max(n, 1)]
	if opts.MetadataPII != "" {
		attrs = append(attrs, attribute.String("svc.observation.metadata.contact", opts.MetadataPII))
	}
	return attrs
}

func plainDB(ctx context.Context, tracer trace.Tracer, name, statement string) {
	_, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("db.system.name", "postgresql"),
		attribute.String("db.namespace", "shop"),
		attribute.String("db.query.text", statement),
		attribute.String("server.address", "db.internal"),
		attribute.Int("server.port", 5432),
	))
	span.End()
}

func plainHTTPClient(ctx context.Context, tracer trace.Tracer, method, url string) {
	_, span := tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("http.request.method", method),
		attribute.String("url.full", url),
		attribute.Int("http.response.status_code", 200),
		attribute.String("network.protocol.version", "1.1"),
	))
	span.SetStatus(codes.Unset, "")
	span.End()
}

func httpServerAttrs(route string, status int) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("http.request.method", "POST"),
		attribute.String("http.route", route),
		attribute.String("url.path", route),
		attribute.String("url.scheme", "https"),
		attribute.Int("http.response.status_code", status),
		attribute.String("client.address", "10.1.2.3"),
		attribute.String("user_agent.original", "support-web/3.1"),
	}
}

var questions = []string{
	"Where is my order A-10023?",
	"Can I change the delivery address of my last order?",
	"How do I return a damaged item?",
	"Why was my card charged twice?",
}

var words = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}

func pick(rng *rand.Rand, from []string) string { return from[rng.IntN(len(from))] }

// filler is about n bytes of plausible prose.
func filler(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n + 16)
	for b.Len() < n {
		b.WriteString(pick(rng, sentences))
		b.WriteByte(' ')
	}
	return b.String()
}

var sentences = []string{
	"The order was packed at the central warehouse.",
	"Carrier scans show the parcel in transit.",
	"Returns are free within thirty days of delivery.",
	"Refunds reach the original payment method in five business days.",
	"The customer asked for a status update.",
}

func docs(rng *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = pick(rng, sentences)
	}
	return out
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with maps and slices of strings
	}
	return string(b)
}
