// Package observation is the gateway's one reading of how the svc platform turns a span into an
// observation (docs/contract.md §5, §13): its type, level, model, input and output, usage, cost,
// environment and metadata. The gateway's components that reason about observations (the
// svcevaluator connector's selection and checks) import it; the local platform
// (testbed/platform/observation.go) keeps its own reading of docs/contract.md and does not, so that
// the two readings check each other in the end-to-end tests.
package observation

import (
	"encoding/json"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/svcattr"
)

// Observation types the platform assigns when the span names none (svc.observation.type).
const (
	TypeSpan       = "SPAN"
	TypeGeneration = "GENERATION"
)

// Levels of an observation: ERROR when the span's status is Error.
const (
	LevelDefault = "DEFAULT"
	LevelError   = "ERROR"
)

// DefaultEnvironment is the environment of a span whose span and resource name none.
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

// generationOperations are the gen_ai.operation.name values that make a span a GENERATION.
func isGenerationOperation(op string) bool {
	return op == "chat" || op == "text_completion" || op == "generate_content"
}

// View is one span read as the observation the platform makes of it. It reads the span in
// place: nothing is copied, and what is derived (the metadata encoding) is worked out once.
type View struct {
	Span     ptrace.Span
	Resource pcommon.Resource
	Scope    pcommon.InstrumentationScope

	encoding int8 // 0: not yet known; 1: JSON-encoded metadata (new SDK); 2: values as sent
}

// NewView reads span, of the given resource and scope, as an observation.
func NewView(span ptrace.Span, resource pcommon.Resource, scope pcommon.InstrumentationScope) View {
	return View{Span: span, Resource: resource, Scope: scope}
}

// Name is the observation's name: the span's name.
func (v *View) Name() string { return v.Span.Name() }

// Type is the platform's rule for the observation type:
//  1. svc.observation.type when set, upper-cased ("generation" → GENERATION, "tool" → TOOL);
//  2. else GENERATION when the span names a model (gen_ai.request.model or gen_ai.response.model)
//     or its gen_ai.operation.name is chat, text_completion or generate_content;
//  3. else SPAN.
func (v *View) Type() string {
	attrs := v.Span.Attributes()
	if t, ok := attrs.Get(svcattr.ObservationType); ok {
		if s := t.AsString(); s != "" {
			return upper(s)
		}
	}
	if _, ok := attrs.Get(AttrRequestModel); ok {
		return TypeGeneration
	}
	if _, ok := attrs.Get(AttrResponseModel); ok {
		return TypeGeneration
	}
	if op, ok := attrs.Get(AttrOperationName); ok && op.Type() == pcommon.ValueTypeStr && isGenerationOperation(op.Str()) {
		return TypeGeneration
	}
	return TypeSpan
}

// upper upper-cases s without allocating when it already is (the common "GENERATION").
func upper(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'a' && c <= 'z' || c >= 0x80 {
			return strings.ToUpper(s)
		}
	}
	return s
}

// Level is ERROR when the span's status is Error, else DEFAULT.
func (v *View) Level() string {
	if v.Span.Status().Code() == ptrace.StatusCodeError {
		return LevelError
	}
	return LevelDefault
}

// StatusMessage is the span's status message.
func (v *View) StatusMessage() string { return v.Span.Status().Message() }

// Model is gen_ai.request.model, else gen_ai.response.model, else "".
func (v *View) Model() string { return v.firstString(AttrRequestModel, AttrResponseModel) }

// Input is the observation's raw input (docs/contract.md §13): svc.observation.input, else
// gen_ai.input.messages; ok is false when the span has neither.
func (v *View) Input() (string, bool) {
	s := v.firstString(svcattr.ObservationInput, svcattr.GenAIInputMessages)
	return s, s != ""
}

// Output is the observation's raw output: svc.observation.output, else gen_ai.output.messages.
func (v *View) Output() (string, bool) {
	s := v.firstString(svcattr.ObservationOutput, svcattr.GenAIOutputMessages)
	return s, s != ""
}

// Environment is svc.environment of the span, else of the resource, else "default".
func (v *View) Environment() string {
	if s := v.firstString(svcattr.Environment); s != "" {
		return s
	}
	if e, ok := v.Resource.Attributes().Get(svcattr.Environment); ok && e.AsString() != "" {
		return e.AsString()
	}
	return DefaultEnvironment
}

// SessionID is svc.session.id, else session.id.
func (v *View) SessionID() string { return v.firstString(AttrSvcSessionID, AttrSessionID) }

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

// Usage is the observation's token usage: gen_ai.usage.input_tokens and output_tokens as the
// platform reads them (total = input + output), else the svc SDKs' usage_details object (its
// "input", "output" and "total"; total is input + output when it names none). ok is false when the
// span reports neither.
func (v *View) Usage() (input, output, total float64, ok bool) {
	attrs := v.Span.Attributes()
	in, hasIn := attrs.Get(AttrUsageInputTokens)
	out, hasOut := attrs.Get(AttrUsageOutputTokens)
	if hasIn || hasOut {
		input, _ = number(in, hasIn)
		output, _ = number(out, hasOut)
		return input, output, input + output, true
	}
	details, ok := v.detailsObject(AttrUsageDetails)
	if !ok {
		return 0, 0, 0, false
	}
	input, _ = details["input"].(float64)
	output, _ = details["output"].(float64)
	total, hasTotal := details["total"].(float64)
	if !hasTotal {
		total = input + output
	}
	return input, output, total, true
}

// Cost is the observation's total cost: the "total" of the svc SDKs' cost_details object (the sum
// of its numbers when it has no total), else gen_ai.usage.cost. ok is false when the span reports
// no cost.
func (v *View) Cost() (float64, bool) {
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
	c, ok := v.Span.Attributes().Get(AttrUsageCost)
	if !ok {
		return 0, false
	}
	return number(c, true)
}

// detailsObject decodes a JSON object attribute (or a map attribute) of numbers.
func (v *View) detailsObject(key string) (map[string]any, bool) {
	a, ok := v.Span.Attributes().Get(key)
	if !ok {
		return nil, false
	}
	switch a.Type() {
	case pcommon.ValueTypeStr:
		var m map[string]any
		if json.Unmarshal([]byte(a.Str()), &m) != nil {
			return nil, false
		}
		return m, true
	case pcommon.ValueTypeMap:
		m := make(map[string]any, a.Map().Len())
		a.Map().Range(func(k string, x pcommon.Value) bool {
			if f, ok := number(x, true); ok {
				m[k] = f
			}
			return true
		})
		return m, true
	}
	return nil, false
}

// number is an int or double attribute as a float64.
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

// firstString is the first of the span attributes that is set and not empty, as a string.
func (v *View) firstString(names ...string) string {
	attrs := v.Span.Attributes()
	for _, name := range names {
		if a, ok := attrs.Get(name); ok {
			if a.Type() == pcommon.ValueTypeStr {
				if s := a.Str(); s != "" {
					return s
				}
				continue
			}
			if s := a.AsString(); s != "" {
				return s
			}
		}
	}
	return ""
}
