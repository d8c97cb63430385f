package masking

import (
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// BenchmarkMask compares, on the same text in the same run, the engine with every builtin rule
// on, Go regexp applying the same rules to the whole text (the reference), and a plain memory
// scan (strings.IndexByte of an absent byte) as the floor.
func BenchmarkMask(b *testing.B) {
	const size = 64 << 10
	texts := []struct{ name, text string }{
		{"clean-prose", repeatTo(cleanProse, size)},
		{"pii-dense", repeatTo(cleanProse[:200]+piiLine, size)},
		{"json-messages", `[{"role":"user","content":"` + strings.ReplaceAll(repeatTo(cleanProse, size), `"`, `'`) + `"}]`},
	}
	cfg := Config{BuiltinRules: []string{"email", "card_number", "api_key", "bearer_token", "phone", "iban"}}
	e, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range texts {
		b.Run(tc.name+"/engine", func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			b.ReportAllocs()
			for b.Loop() {
				e.Text(tc.text)
			}
		})
		b.Run(tc.name+"/regexp", func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			b.ReportAllocs()
			for b.Loop() {
				referenceMask(cfg, tc.text)
			}
		})
		b.Run(tc.name+"/memscan", func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			for b.Loop() {
				strings.IndexByte(tc.text, 0)
			}
		})
	}
}

// BenchmarkRule shows each builtin rule's cost alone on clean prose.
func BenchmarkRule(b *testing.B) {
	text := repeatTo(cleanProse, 64<<10)
	for _, name := range BuiltinRuleNames() {
		e, _ := New(Config{BuiltinRules: []string{name}})
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				e.String(text)
			}
		})
	}
}

// loadSentences is the prose of the load workload's prompts and answers
// (testbed/workload/agent.go): no personal data, but digits, capitals, hyphens and the letter b
// that anchor some rules.
var loadSentences = []string{
	"The order was packed at the central warehouse.",
	"Carrier scans show the parcel in transit.",
	"Returns are free within thirty days of delivery.",
	"Refunds reach the original payment method in five business days.",
	"The customer asked for a status update.",
}

// loadFiller is about n bytes of loadSentences, in a fixed order.
func loadFiller(n, seed int) string {
	var b strings.Builder
	for i := seed; b.Len() < n; i += 3 {
		b.WriteString(loadSentences[i%len(loadSentences)])
		b.WriteByte(' ')
	}
	return b.String()
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func loadMessages(system, user, answer string) string {
	var msgs []map[string]string
	if system != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": system})
	}
	if user != "" {
		msgs = append(msgs, map[string]string{"role": "user", "content": user})
	}
	if answer != "" {
		msgs = append(msgs, map[string]string{"role": "assistant", "content": answer})
	}
	return jsonOf(msgs)
}

// loadSpans builds one LLM span in each instrumentation shape of the load workload
// (testbed/workload/shapes.go: GenAI semconv with messages and with events, OpenLLMetry,
// OpenInference, Vercel AI SDK, svc SDK) with prompts and answers of a few KiB, about 20
// attributes each, and the workload's personal data (e-mail, card, API key in the prompt, the
// e-mail in metadata) in one of them, as in a quarter of its traces.
func loadSpans() ptrace.SpanSlice {
	spans := ptrace.NewSpanSlice()
	const system = "You are a helpful support agent for an online shop."
	for i, shape := range []string{"genai-semconv", "genai-semconv-events", "openllmetry", "openinference", "vercel-ai", "svc-sdk"} {
		prompt := "Where is my order A-10023? " + loadFiller(2<<10+512*i, i)
		answer := loadFiller(3<<10+256*i, i+1)
		contact := "gold"
		if i == 0 {
			prompt = "Why was my card charged twice? You can reach me at customer.0042@example.com. " +
				"My card is 4111 1111 1111 1111. Use key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z for the lookup. " + prompt
			contact = "customer.0042@example.com"
		}
		span := spans.AppendEmpty()
		span.SetName("chat gpt-4o")
		a := span.Attributes()
		common := func() {
			a.PutStr("gen_ai.operation.name", "chat")
			a.PutStr("gen_ai.system", "openai")
			a.PutStr("gen_ai.provider.name", "openai")
			a.PutStr("gen_ai.request.model", "gpt-4o")
			a.PutStr("gen_ai.response.model", "gpt-4o-2024-08-06")
			a.PutDouble("gen_ai.request.temperature", 0.2)
			a.PutInt("gen_ai.request.max_tokens", 1024)
			a.PutInt("gen_ai.usage.input_tokens", 734)
			a.PutInt("gen_ai.usage.output_tokens", 211)
			a.PutEmptySlice("gen_ai.response.finish_reasons").AppendEmpty().SetStr("stop")
		}
		metadata := func(prefix string) {
			a.PutStr(prefix+"tier", "gold")
			a.PutInt(prefix+"retries", 2)
			a.PutBool(prefix+"cached", false)
			a.PutDouble(prefix+"latency_budget_s", 2.5)
			a.PutStr(prefix+"tag_4", "foxtrot")
			a.PutStr(prefix+"contact", contact)
		}
		switch shape {
		case "genai-semconv":
			common()
			a.PutStr("gen_ai.input.messages", loadMessages(system, prompt, ""))
			a.PutStr("gen_ai.output.messages", loadMessages("", "", answer))
			metadata("svc.observation.metadata.")
		case "genai-semconv-events":
			common()
			span.Events().AppendEmpty().Attributes().PutStr("gen_ai.prompt", loadMessages(system, prompt, ""))
			span.Events().AppendEmpty().Attributes().PutStr("gen_ai.completion", loadMessages("", "", answer))
		case "openllmetry":
			common()
			a.PutStr("llm.request.type", "chat")
			a.PutBool("llm.is_streaming", false)
			a.PutStr("gen_ai.prompt.0.role", "system")
			a.PutStr("gen_ai.prompt.0.content", system)
			a.PutStr("gen_ai.prompt.1.role", "user")
			a.PutStr("gen_ai.prompt.1.content", prompt)
			a.PutStr("gen_ai.completion.0.role", "assistant")
			a.PutStr("gen_ai.completion.0.content", answer)
			a.PutStr("gen_ai.completion.0.finish_reason", "stop")
			metadata("traceloop.association.properties.")
		case "openinference":
			a.PutStr("openinference.span.kind", "LLM")
			a.PutStr("llm.model_name", "gpt-4o")
			a.PutStr("llm.provider", "openai")
			a.PutStr("llm.system", "openai")
			a.PutStr("input.value", `{"messages":`+loadMessages(system, prompt, "")+`,"model":"gpt-4o"}`)
			a.PutStr("input.mime_type", "application/json")
			a.PutStr("output.value", answer)
			a.PutStr("output.mime_type", "text/plain")
			a.PutStr("llm.input_messages.0.message.role", "system")
			a.PutStr("llm.input_messages.0.message.content", system)
			a.PutStr("llm.input_messages.1.message.role", "user")
			a.PutStr("llm.input_messages.1.message.content", prompt)
			a.PutStr("llm.output_messages.0.message.role", "assistant")
			a.PutStr("llm.output_messages.0.message.content", answer)
			a.PutInt("llm.token_count.prompt", 734)
			a.PutInt("llm.token_count.completion", 211)
			a.PutInt("llm.token_count.total", 945)
			a.PutStr("metadata", `{"tier":"gold","retries":2,"cached":false,"latency_budget_s":2.5,"tag_4":"foxtrot","contact":`+jsonOf(contact)+`}`)
		case "vercel-ai":
			a.PutStr("operation.name", "ai.generateText.doGenerate")
			a.PutStr("ai.operationId", "ai.generateText.doGenerate")
			a.PutStr("ai.model.id", "gpt-4o")
			a.PutStr("ai.model.provider", "openai.chat")
			a.PutStr("ai.prompt.format", "messages")
			a.PutStr("ai.prompt.messages", `[{"role":"system","content":`+jsonOf(system)+`},{"role":"user","content":[{"type":"text","text":`+jsonOf(prompt)+`}]}]`)
			a.PutStr("ai.response.text", answer)
			a.PutStr("ai.response.finishReason", "stop")
			a.PutInt("ai.usage.promptTokens", 734)
			a.PutInt("ai.usage.completionTokens", 211)
			a.PutStr("gen_ai.system", "openai.chat")
			a.PutStr("gen_ai.request.model", "gpt-4o")
			a.PutInt("gen_ai.usage.input_tokens", 734)
			a.PutInt("gen_ai.usage.output_tokens", 211)
			metadata("ai.telemetry.metadata.")
		case "svc-sdk":
			a.PutStr("svc.observation.type", "generation")
			a.PutStr("svc.observation.model.name", "gpt-4o")
			a.PutStr("svc.observation.input", loadMessages(system, prompt, ""))
			a.PutStr("svc.observation.output", jsonOf(answer))
			a.PutStr("svc.observation.usage_details", `{"input":734,"output":211}`)
			metadata("svc.observation.metadata.")
		}
		a.PutStr("svc.trace.metadata.user_id", "user-0042")
		a.PutStr("svc.trace.metadata.session_id", "session-004217")
		a.PutStr("server.address", "api.openai.com")
		a.PutInt("server.port", 443)
	}
	return spans
}

// BenchmarkSpanLikeLoad masks the LLM spans of the load workload (one per instrumentation
// shape, see loadSpans) with the shipped configuration (every builtin rule), as svcmetadata
// does for each span (Engine.Span). MB/s is of the spans' string attribute bytes.
func BenchmarkSpanLikeLoad(b *testing.B) {
	e, err := New(Config{BuiltinRules: BuiltinRuleNames()})
	if err != nil {
		b.Fatal(err)
	}
	template := loadSpans()
	var size int64
	for _, span := range template.All() {
		size += stringBytes(span.Attributes())
		for _, ev := range span.Events().All() {
			size += stringBytes(ev.Attributes())
		}
	}
	b.SetBytes(size)
	b.ReportAllocs()
	// Masking changes the spans in place: each round masks a fresh copy, made in batches
	// outside the timer (stopping the timer for every round would cost more than a round).
	copies := make([]ptrace.SpanSlice, 64)
	for i := range copies {
		copies[i] = ptrace.NewSpanSlice()
	}
	next := len(copies)
	for b.Loop() {
		if next == len(copies) {
			b.StopTimer()
			for _, c := range copies {
				template.CopyTo(c)
			}
			next = 0
			b.StartTimer()
		}
		for _, span := range copies[next].All() {
			e.Span(span, nil, nil)
		}
		next++
	}
}

func stringBytes(m pcommon.Map) int64 {
	var n int64
	for _, v := range m.All() {
		if v.Type() == pcommon.ValueTypeStr {
			n += int64(len(v.Str()))
		}
	}
	return n
}
