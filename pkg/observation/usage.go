package observation

// Token counts under the names of each convention the platform reads usage from, after the svc
// SDKs' usage_details object: the Vercel AI SDK (scope ai), the GenAI semantic conventions and
// OpenInference.
var (
	inputTokenKeys = []string{AttrUsageInputTokens, "gen_ai.usage.prompt_tokens", "ai.usage.inputTokens",
		"ai.usage.promptTokens", "llm.token_count.prompt"}
	outputTokenKeys = []string{AttrUsageOutputTokens, "gen_ai.usage.completion_tokens", "ai.usage.outputTokens",
		"ai.usage.completionTokens", "llm.token_count.completion"}
	cacheReadKeys = []string{"gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens",
		"ai.usage.cachedInputTokens", "llm.token_count.prompt_details.cache_read"}
	cacheCreationKeys = []string{"gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens",
		"llm.token_count.prompt_details.cache_write"}
	reasoningKeys = []string{"gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens",
		"ai.usage.reasoningTokens", "llm.token_count.completion_details.reasoning"}
	audioOutputKeys = []string{"llm.token_count.completion_details.audio"}
)

// Usage is the observation's token usage as the platform stores it: svc.observation.usage_details
// ("input", "output", "total"; total the sum of its counts when it names none), else the token
// counts of the other conventions, with the platform's subtractions: input without the cached
// and cache-creation tokens, output without the reasoning and audio tokens (those are counted
// apart), total every token. ok is false when the span reports no usage, and for agent spans.
func (v *View) Usage() (input, output, total float64, ok bool) {
	if v.isAgentOperation() {
		return 0, 0, 0, false
	}
	if details, ok := v.detailsObject(AttrUsageDetails); ok {
		input, _ = details["input"].(float64)
		output, _ = details["output"].(float64)
		t, hasTotal := details["total"].(float64)
		if !hasTotal {
			for _, x := range details {
				if f, ok := x.(float64); ok {
					t += f
				}
			}
		}
		return input, output, t, true
	}
	in, hasIn := v.firstNumber(inputTokenKeys)
	out, hasOut := v.firstNumber(outputTokenKeys)
	if !hasIn && !hasOut {
		return 0, 0, 0, false
	}
	cacheRead, _ := v.firstNumber(cacheReadKeys)
	cacheCreation, _ := v.firstNumber(cacheCreationKeys)
	reasoning, _ := v.firstNumber(reasoningKeys)
	audio, _ := v.firstNumber(audioOutputKeys)
	input = max(in-cacheRead-cacheCreation, 0)
	output = max(out-reasoning-audio, 0)
	return input, output, input + cacheRead + cacheCreation + output + reasoning + audio, true
}

func (v *View) firstNumber(keys []string) (float64, bool) {
	for _, k := range keys {
		if a, ok := v.Span.Attributes().Get(k); ok {
			if f, ok := number(a, true); ok && f >= 0 {
				return f, true
			}
		}
	}
	return 0, false
}
