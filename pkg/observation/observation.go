// Package observation is the gateway's one reading of how the svc platform turns a span into an
// observation: its type, name, level, model, input and output, usage, cost, environment and
// metadata, field by field in the platform's order of sources (docs: the README of the svcevaluator
// connector). The gateway's components that reason about observations (the svcevaluator
// connector's selection and checks) import it; the local platform (testbed/platform) keeps its
// own reading and does not, so that the two readings check each other in the end-to-end tests.
package observation

import (
	"encoding/json"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/svcattr"
)

// Levels of an observation.
const (
	LevelDebug   = "DEBUG"
	LevelDefault = "DEFAULT"
	LevelWarning = "WARNING"
	LevelError   = "ERROR"
)

// DefaultEnvironment is the environment of a span that names none (or none the platform takes).
const DefaultEnvironment = "default"

// Attributes of the OpenTelemetry GenAI and general semantic conventions the platform reads.
const (
	AttrRequestModel      = "gen_ai.request.model"
	AttrResponseModel     = "gen_ai.response.model"
	AttrOperationName     = "gen_ai.operation.name"
	AttrUsageInputTokens  = "gen_ai.usage.input_tokens"
	AttrUsageOutputTokens = "gen_ai.usage.output_tokens"
	AttrSessionID         = "session.id"
	AttrSvcSessionID      = "svc.session.id"
	// AttrUsageDetails and AttrCostDetails are the svc SDKs' usage and cost of a generation,
	// JSON objects of numbers ({"input": 10, "output": 20, "total": 30}).
	AttrUsageDetails = "svc.observation.usage_details"
	AttrCostDetails  = "svc.observation.cost_details"
	// AttrUsageCost is a generation's cost as a plain number (several instrumentations).
	AttrUsageCost = "gen_ai.usage.cost"
)

// View is one span read as the observation the platform makes of it. It reads the span in
// place: nothing is copied, and what is derived (metadata encoding, input and output) is worked
// out once.
type View struct {
	Span     ptrace.Span
	Resource pcommon.Resource
	Scope    pcommon.InstrumentationScope

	encoding int8 // 0: not yet known; 1: JSON-encoded metadata (new SDK); 2: values as sent
	ioRead   bool
	in, out  string
}

// NewView reads span, of the given resource and scope, as an observation.
func NewView(span ptrace.Span, resource pcommon.Resource, scope pcommon.InstrumentationScope) View {
	return View{Span: span, Resource: resource, Scope: scope}
}

// Name is the observation's name: gen_ai.tool.name, genkit:name, logfire.msg, ai.toolCall.name,
// ai.operationId (after "<ai.telemetry.functionId>:" when the span names a function), else the
// span's name.
func (v *View) Name() string {
	if s := v.firstOf("gen_ai.tool.name", "genkit:name", "logfire.msg", "ai.toolCall.name"); s != "" {
		return s
	}
	if op := v.str("ai.operationId"); op != "" {
		if fn := v.str("ai.telemetry.functionId"); fn != "" {
			return fn + ":" + op
		}
		return op
	}
	return v.Span.Name()
}

// levelAliases are the values of svc.observation.level the platform takes, upper-cased.
var levelAliases = map[string]string{
	"DEBUG": LevelDebug, "TRACE": LevelDebug, "VERBOSE": LevelDebug,
	"DEFAULT": LevelDefault, "INFO": LevelDefault, "LOG": LevelDefault, "NOTICE": LevelDefault, "OK": LevelDefault, "SUCCESS": LevelDefault,
	"WARN": LevelWarning, "WARNING": LevelWarning,
	"ERROR": LevelError, "FATAL": LevelError, "CRITICAL": LevelError,
}

// Level is svc.observation.level (its aliases, any case), else ERROR when the span's status is
// Error, else DEFAULT.
func (v *View) Level() string {
	if l, ok := levelAliases[strings.ToUpper(v.str("svc.observation.level"))]; ok {
		return l
	}
	if v.Span.Status().Code() == ptrace.StatusCodeError {
		return LevelError
	}
	return LevelDefault
}

// StatusMessage is svc.observation.status_message, else the span's status message.
func (v *View) StatusMessage() string {
	if s := v.str("svc.observation.status_message"); s != "" {
		return s
	}
	return v.Span.Status().Message()
}

// modelSources are the model attributes in the platform's order.
var modelSources = []string{"svc.observation.model.name", AttrResponseModel, "ai.model.id", AttrRequestModel,
	"llm.response.model", "llm.model_name", "model"}

// Model is the first model attribute in the platform's order; none for agent spans
// (gen_ai.operation.name invoke_agent or agent_step), which have no model, usage nor cost.
func (v *View) Model() string {
	if v.isAgentOperation() {
		return ""
	}
	return v.firstOf(modelSources...)
}

func (v *View) isAgentOperation() bool {
	op := v.str(AttrOperationName)
	return op == "invoke_agent" || op == "agent_step"
}

// Environment is svc.environment, deployment.environment.name or deployment.environment (each of
// the span, then of the resource), lower-cased without a leading "svc"/"svc-"/"svc_"; "default"
// when none is set, or when it is longer than 40 characters or has characters other than
// a-z, 0-9, "_" and "-".
func (v *View) Environment() string {
	for _, key := range []string{svcattr.Environment, "deployment.environment.name", "deployment.environment"} {
		for _, attrs := range []pcommon.Map{v.Span.Attributes(), v.Resource.Attributes()} {
			if a, ok := attrs.Get(key); ok && a.AsString() != "" {
				return normalEnvironment(a.AsString())
			}
		}
	}
	return DefaultEnvironment
}

func normalEnvironment(env string) string {
	env = strings.ToLower(env)
	for _, p := range []string{"svc-", "svc_", "svc"} {
		if rest, ok := strings.CutPrefix(env, p); ok {
			env = rest
			break
		}
	}
	if env == "" || len(env) > 40 {
		return DefaultEnvironment
	}
	for _, c := range env {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return DefaultEnvironment
		}
	}
	return env
}

// SessionID is svc.session.id, session.id, gen_ai.conversation.id, the svc_session_id metadata
// key, else the Vercel AI SDK's ai.telemetry.metadata.sessionId.
func (v *View) SessionID() string {
	return v.traceField(AttrSvcSessionID, AttrSessionID, "gen_ai.conversation.id", "svc_session_id", "sessionId")
}

// UserID is svc.user.id, user.id, the svc_user_id metadata key, else the Vercel AI SDK's
// ai.telemetry.metadata.userId.
func (v *View) UserID() string {
	return v.traceField("svc.user.id", "user.id", "", "svc_user_id", "userId")
}

func (v *View) traceField(svcKey, otelKey, genAIKey, metadataKey, vercelKey string) string {
	if s := v.firstOf(svcKey, otelKey); s != "" {
		return s
	}
	if genAIKey != "" {
		if s := v.str(genAIKey); s != "" {
			return s
		}
	}
	for _, k := range []string{svcattr.ObservationMetadataPrefix + metadataKey, svcattr.TraceMetadataPrefix + metadataKey} {
		if s := v.str(k); s != "" {
			return s
		}
	}
	return v.str("ai.telemetry.metadata." + vercelKey)
}

// StartTime and EndTime are the span's.
func (v *View) StartTime() time.Time { return v.Span.StartTimestamp().AsTime() }
func (v *View) EndTime() time.Time   { return v.Span.EndTimestamp().AsTime() }

// Latency is the observation's duration in seconds (end − start; 0 when it ends before it starts).
func (v *View) Latency() float64 {
	start, end := v.Span.StartTimestamp(), v.Span.EndTimestamp()
	if end <= start {
		return 0
	}
	return float64(end-start) / 1e9
}

// Cost is the observation's total cost: svc.observation.cost_details ("total", else the sum of
// its numbers), else gen_ai.usage.cost, else llm.cost.total. ok is false when the span reports
// none, and for agent spans.
func (v *View) Cost() (float64, bool) {
	if v.isAgentOperation() {
		return 0, false
	}
	if details, ok := v.detailsObject(AttrCostDetails); ok {
		if total, ok := details["total"].(float64); ok {
			return total, true
		}
		sum := 0.0
		for _, x := range details {
			if f, ok := x.(float64); ok {
				sum += f
			}
		}
		return sum, true
	}
	for _, k := range []string{AttrUsageCost, "llm.cost.total"} {
		if c, ok := v.Span.Attributes().Get(k); ok {
			if f, ok := number(c, true); ok {
				return f, true
			}
		}
	}
	return 0, false
}

// detailsObject decodes a JSON object attribute (or a map attribute) of numbers; ok is false
// when it is absent or not valid JSON.
func (v *View) detailsObject(key string) (map[string]any, bool) {
	a, ok := v.Span.Attributes().Get(key)
	if !ok {
		return nil, false
	}
	switch a.Type() {
	case pcommon.ValueTypeStr:
		var x any
		if json.Unmarshal([]byte(a.Str()), &x) != nil {
			return nil, false
		}
		m, _ := x.(map[string]any) // not an object: no usage ({})
		if m == nil {
			m = map[string]any{}
		}
		return m, true
	case pcommon.ValueTypeMap:
		m := make(map[string]any, a.Map().Len())
		for k, x := range a.Map().All() {
			if f, ok := number(x, true); ok {
				m[k] = f
			}
		}
		return m, true
	}
	return nil, false
}

// number is an int or double attribute (or a string holding a number) as a float64.
func number(v pcommon.Value, ok bool) (float64, bool) {
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return float64(v.Int()), true
	case pcommon.ValueTypeDouble:
		return v.Double(), true
	}
	return 0, false
}
