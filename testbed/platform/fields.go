package platform

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Levels of an observation.
const (
	LevelDebug   = "DEBUG"
	LevelDefault = "DEFAULT"
	LevelWarning = "WARNING"
	LevelError   = "ERROR"
)

// DefaultEnvironment is the environment of spans that name none (or an invalid one).
const DefaultEnvironment = "default"

// observationName (§2 name): the first of the conventions' names, else the span name.
func observationName(sp spanView) string {
	for _, key := range []string{"gen_ai.tool.name", "genkit:name", "logfire.msg", "ai.toolCall.name"} {
		if s := attrString(sp.attrs, key); s != "" {
			return s
		}
	}
	if op := attrString(sp.attrs, "ai.operationId"); op != "" {
		if fn := attrString(sp.attrs, "ai.telemetry.functionId"); fn != "" {
			return fn + ":" + op
		}
		return op
	}
	return sp.span.Name()
}

var environmentPattern = regexp.MustCompile(`^[a-z0-9_-]+$`)

// environment (§2): svc.environment, deployment.environment.name, deployment.environment, each on
// the span then on the resource; normalised, "default" when invalid.
func environment(sp spanView) string {
	raw := ""
	for _, key := range []string{attrEnvironment, "deployment.environment.name", "deployment.environment"} {
		if s := attrString(sp.attrs, key); s != "" {
			raw = s
			break
		}
		if s := attrString(sp.resource, key); s != "" {
			raw = s
			break
		}
	}
	env := strings.ToLower(raw)
	for _, prefix := range []string{"svc-", "svc_", "svc"} {
		if rest, ok := strings.CutPrefix(env, prefix); ok {
			env = rest
			break
		}
	}
	if env == "" || len(env) > 40 || !environmentPattern.MatchString(env) {
		return DefaultEnvironment
	}
	return env
}

// version (§2): span svc.version, else resource service.version, with its type (an int fails the
// legacy schema: see schemaProblem).
func version(sp spanView) any {
	if v, ok := truthyAttr(sp.attrs, "svc.version"); ok {
		return plainValue(v)
	}
	if v, ok := truthyAttr(sp.resource, "service.version"); ok {
		return plainValue(v)
	}
	return nil
}

func release(sp spanView) string {
	if s := attrString(sp.attrs, "svc.release"); s != "" {
		return s
	}
	return attrString(sp.resource, "svc.release")
}

var levelAliases = map[string]string{
	"DEBUG": LevelDebug, "TRACE": LevelDebug, "VERBOSE": LevelDebug,
	"DEFAULT": LevelDefault, "INFO": LevelDefault, "LOG": LevelDefault, "NOTICE": LevelDefault, "OK": LevelDefault, "SUCCESS": LevelDefault,
	"WARN": LevelWarning, "WARNING": LevelWarning,
	"ERROR": LevelError, "FATAL": LevelError, "CRITICAL": LevelError,
}

// level (§2): svc.observation.level by its aliases, else ERROR for an error status, else DEFAULT.
// (The livekit-agents DEBUG rule is not modelled.)
func level(sp spanView) string {
	if l, ok := levelAliases[strings.ToUpper(attrString(sp.attrs, "svc.observation.level"))]; ok {
		return l
	}
	if sp.span.Status().Code() == ptrace.StatusCodeError {
		return LevelError
	}
	return LevelDefault
}

// statusMessage (§2): svc.observation.status_message, else the span status message. Kept with its
// type: a non-string fails the legacy schema.
func statusMessage(sp spanView) any {
	if v, ok := truthyAttr(sp.attrs, "svc.observation.status_message"); ok {
		return plainValue(v)
	}
	return sp.span.Status().Message()
}

// agentOperation: spans of these gen_ai.operation.name values get no model, usage or cost.
func agentOperation(sp spanView) bool {
	op := attrString(sp.attrs, attrOperationName)
	return op == "invoke_agent" || op == "agent_step"
}

// model (§2): the first model key. Genkit's model is not modelled.
func model(sp spanView) string {
	for _, key := range []string{"svc.observation.model.name", "gen_ai.response.model", "ai.model.id", "gen_ai.request.model",
		"llm.response.model", "llm.model_name", "model"} {
		if v, ok := truthyAttr(sp.attrs, key); ok {
			return v.AsString()
		}
	}
	return ""
}

// vercelParameters are the fixed keys scope `ai` takes parameters from.
var vercelParameters = []string{"ai.settings.maxTokens", "ai.settings.temperature", "ai.settings.topP", "ai.settings.topK",
	"ai.settings.frequencyPenalty", "ai.settings.presencePenalty", "ai.settings.maxRetries", "ai.settings.seed",
	"ai.settings.stopSequences"}

// modelParameters (§2): svc.observation.model.parameters (JSON object; in scope `ai` it overlays
// the scope's own), else scope `ai`'s settings, else llm.invocation_parameters / model_config JSON,
// else every gen_ai.request.* / llm.invocation_parameters.* key but model. Values that are not
// strings or numbers are JSON-encoded.
func modelParameters(sp spanView) map[string]any {
	explicit := jsonObjectAttr(sp.attrs, "svc.observation.model.parameters")
	if explicit != nil && sp.scopeName != "ai" {
		return parameterValues(explicit)
	}
	if sp.scopeName == "ai" {
		out := map[string]any{}
		for _, key := range vercelParameters {
			if v, ok := sp.attrs.Get(key); ok {
				out[strings.TrimPrefix(key, "ai.settings.")] = plainValue(v)
			}
		}
		requestParameters(sp.attrs, out)
		for k, v := range explicit {
			out[k] = v
		}
		if len(out) > 0 {
			return parameterValues(out)
		}
	}
	for _, key := range []string{"llm.invocation_parameters", "model_config"} {
		if m := jsonObjectAttr(sp.attrs, key); m != nil {
			return parameterValues(m)
		}
	}
	out := map[string]any{}
	requestParameters(sp.attrs, out)
	if len(out) == 0 {
		return nil
	}
	return parameterValues(out)
}

func requestParameters(attrs pcommon.Map, out map[string]any) {
	for name, v := range attrs.All() {
		for _, prefix := range []string{"gen_ai.request.", "llm.invocation_parameters."} {
			if key, ok := strings.CutPrefix(name, prefix); ok && key != "model" && key != "" {
				out[key] = plainValue(v)
			}
		}
	}
}

func parameterValues(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch v.(type) {
		case string, int64, float64:
			out[k] = v
		default:
			out[k] = jsonText(v)
		}
	}
	return out
}

// jsonObjectAttr is a string attribute holding a JSON object, parsed; nil otherwise.
func jsonObjectAttr(attrs pcommon.Map, name string) map[string]any {
	s := attrString(attrs, name)
	if s == "" {
		return nil
	}
	v, ok := parseJSON(s)
	if !ok {
		return nil
	}
	m, _ := v.(map[string]any)
	return m
}

// usageSource names one convention's token keys.
type usageSource struct {
	input, output, total, cacheRead, cacheCreation, reasoning, audio []string
}

var (
	vercelUsage = usageSource{
		input:         []string{"gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "ai.usage.inputTokens", "ai.usage.promptTokens"},
		output:        []string{"gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "ai.usage.outputTokens", "ai.usage.completionTokens"},
		total:         []string{"gen_ai.usage.total_tokens", "ai.usage.totalTokens"},
		cacheRead:     []string{"gen_ai.usage.cache_read_input_tokens", "ai.usage.cachedInputTokens"},
		cacheCreation: []string{"gen_ai.usage.cache_creation_input_tokens"},
		reasoning:     []string{"gen_ai.usage.reasoning_tokens", "ai.usage.reasoningTokens"},
	}
	genericUsage = usageSource{
		input:         []string{"gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"},
		output:        []string{"gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"},
		total:         []string{"gen_ai.usage.total_tokens", "llm.token_count.total"},
		cacheRead:     []string{"gen_ai.usage.cache_read_input_tokens", "gen_ai.usage.cached_tokens", "llm.token_count.prompt_details.cache_read"},
		cacheCreation: []string{"gen_ai.usage.cache_creation_input_tokens", "llm.token_count.prompt_details.cache_write"},
		reasoning:     []string{"gen_ai.usage.reasoning_tokens", "llm.token_count.completion_details.reasoning"},
		audio:         []string{"gen_ai.usage.output_audio_tokens", "llm.token_count.completion_details.audio"},
	}
)

// usage (§2): svc.observation.usage_details (a JSON object; bad JSON goes on to the next source,
// a non-object is {}), else the conventions' token counts with the platform's subtractions:
// input minus cache read and creation, output minus reasoning and audio, the parts as
// input_cached_tokens, input_cache_creation, output_reasoning_tokens. Only non-negative whole
// numbers are kept. Genkit and provider metadata are not modelled.
func usage(sp spanView) map[string]int64 {
	if s := attrString(sp.attrs, "svc.observation.usage_details"); s != "" {
		if v, ok := parseJSON(s); ok {
			m, isObject := v.(map[string]any)
			out := map[string]int64{}
			if isObject {
				for k, n := range m {
					if f, ok := n.(float64); ok && f >= 0 && f == math.Trunc(f) {
						out[k] = int64(f)
					}
				}
			}
			return out
		}
	}
	src := genericUsage
	if sp.scopeName == "ai" {
		src = vercelUsage
	}
	out := map[string]int64{}
	get := func(keys []string) (int64, bool) {
		for _, k := range keys {
			if v, ok := sp.attrs.Get(k); ok {
				if n, ok := tokenCount(v); ok {
					return n, true
				}
			}
		}
		return 0, false
	}
	cacheRead, hasCacheRead := get(src.cacheRead)
	cacheCreation, hasCacheCreation := get(src.cacheCreation)
	reasoning, hasReasoning := get(src.reasoning)
	audio, _ := get(src.audio)
	if in, ok := get(src.input); ok {
		out["input"] = in - cacheRead - cacheCreation
	}
	if o, ok := get(src.output); ok {
		out["output"] = o - reasoning - audio
	}
	if t, ok := get(src.total); ok {
		out["total"] = t
	}
	if hasCacheRead {
		out["input_cached_tokens"] = cacheRead
	}
	if hasCacheCreation {
		out["input_cache_creation"] = cacheCreation
	}
	if hasReasoning {
		out["output_reasoning_tokens"] = reasoning
	}
	for k, n := range out {
		if n < 0 {
			delete(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// tokenCount is a whole, non-negative count: an int, a whole double, or a string of digits.
func tokenCount(v pcommon.Value) (int64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), v.Int() >= 0
	case pcommon.ValueTypeDouble:
		f := v.Double()
		return int64(f), f >= 0 && f == math.Trunc(f)
	case pcommon.ValueTypeStr:
		n, err := strconv.ParseInt(v.Str(), 10, 64)
		return n, err == nil && n >= 0
	}
	return 0, false
}

// cost (§2): svc.observation.cost_details JSON, else gen_ai.usage.cost, else llm.cost.total, as
// {total}. Values that are not non-negative numbers are dropped.
func cost(sp spanView) map[string]float64 {
	if m := jsonObjectAttr(sp.attrs, "svc.observation.cost_details"); m != nil {
		out := map[string]float64{}
		for k, v := range m {
			if f, ok := v.(float64); ok && f >= 0 {
				out[k] = f
			}
		}
		return out
	}
	for _, key := range []string{"gen_ai.usage.cost", "llm.cost.total"} {
		if f, ok := numberAttr(sp.attrs, key); ok && f >= 0 {
			return map[string]float64{"total": f}
		}
	}
	return nil
}

// completionStart (§2): svc.observation.completion_start_time (a date, or a JSON-quoted date),
// else the span start plus ai.response.msToFirstChunk / ai.stream.msToFirstChunk.
func completionStart(sp spanView) *time.Time {
	if s := attrString(sp.attrs, "svc.observation.completion_start_time"); s != "" {
		if v, ok := parseJSON(s); ok {
			if q, isString := v.(string); isString {
				s = q
			}
		}
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00"} {
			if t, err := time.Parse(layout, s); err == nil {
				t = t.UTC()
				return &t
			}
		}
	}
	for _, key := range []string{"ai.response.msToFirstChunk", "ai.stream.msToFirstChunk"} {
		if ms, ok := numberAttr(sp.attrs, key); ok {
			t := sp.span.StartTimestamp().AsTime().UTC().Add(time.Duration(ms * float64(time.Millisecond)))
			return &t
		}
	}
	return nil
}

// prompt (§2, GENERATION only): svc.observation.prompt.name/.version, else svc.prompt.name/.version,
// else the JSON object in ai.telemetry.metadata.svcPrompt. The version keeps its type: only a
// whole number passes the legacy schema (see schemaProblem).
func prompt(sp spanView) (name string, version any) {
	for _, prefix := range []string{"svc.observation.prompt.", "svc.prompt."} {
		if n := attrString(sp.attrs, prefix+"name"); n != "" {
			if v, ok := sp.attrs.Get(prefix + "version"); ok {
				return n, plainValue(v)
			}
			return n, nil
		}
	}
	if m := jsonObjectAttr(sp.attrs, "ai.telemetry.metadata.svcPrompt"); m != nil {
		if n, ok := m["name"].(string); ok && n != "" {
			if v, ok := m["version"].(float64); ok && v == math.Trunc(v) {
				return n, int64(v)
			}
			return n, m["version"]
		}
	}
	return "", nil
}

// numberAttr is an int or double attribute as a number.
func numberAttr(attrs pcommon.Map, name string) (float64, bool) {
	v, ok := attrs.Get(name)
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		return v.Double(), true
	case pcommon.ValueTypeInt:
		return float64(v.Int()), true
	}
	return 0, false
}
