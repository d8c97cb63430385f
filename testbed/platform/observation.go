package platform

import (
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Observation types the platform assigns.
const (
	TypeSpan       = "SPAN"
	TypeGeneration = "GENERATION"
)

// Levels of an observation.
const (
	LevelDefault = "DEFAULT"
	LevelError   = "ERROR"
)

// DefaultEnvironment is the environment of spans that name none, as on the real platform.
const DefaultEnvironment = "default"

// Attributes the platform reads beside its own (metadata.go): OpenTelemetry GenAI and general
// semantic conventions.
const (
	attrRequestModel      = "gen_ai.request.model"
	attrResponseModel     = "gen_ai.response.model"
	attrOperationName     = "gen_ai.operation.name"
	attrInputMessages     = "gen_ai.input.messages"
	attrOutputMessages    = "gen_ai.output.messages"
	attrUsageInputTokens  = "gen_ai.usage.input_tokens"
	attrUsageOutputTokens = "gen_ai.usage.output_tokens"
	attrSessionID         = "session.id"
	attrSvcSessionID      = "svc.session.id"
)

// generationOperations are the gen_ai.operation.name values that make a span a GENERATION.
var generationOperations = map[string]bool{"chat": true, "text_completion": true, "generate_content": true}

// Observation is one stored span, as the platform sees it. Maps are shared with the store:
// read them, do not modify them.
type Observation struct {
	ID                  string // span id, hex
	TraceID             string // hex
	ParentObservationID string // parent span id, hex; empty for a root
	Name                string
	Type                string // see observationType
	StartTime           time.Time
	EndTime             time.Time
	Level               string // ERROR when the span status is Error, else DEFAULT
	StatusMessage       string
	Environment         string // svc.environment of the span, else of the resource, else "default"
	SessionID           string // svc.session.id, else session.id
	// Input and Output are raw strings (docs/contract.md §13): svc.observation.input/output, else
	// gen_ai.input.messages/gen_ai.output.messages; empty when the span has neither.
	Input  string
	Output string
	// Metadata holds svc.observation.metadata.<key> values by key, TraceMetadata the
	// svc.trace.metadata.<key> ones: decoded JSON values when the span comes from a new SDK
	// (decodesMetadata), else the values as they arrived, with their OTLP types (see
	// metadataValue). Nil when none.
	Metadata      map[string]any
	TraceMetadata map[string]any
	// MetadataJSONEncoded tells which of the two rules above read Metadata and TraceMetadata:
	// true when the platform decoded them as JSON.
	MetadataJSONEncoded bool
	Model               string // gen_ai.request.model, else gen_ai.response.model
	Usage               *Usage // nil when the span reports no token counts

	ScopeName          string
	ScopeVersion       string
	ResourceAttributes map[string]any // shared by the spans of one resource
	Attributes         map[string]any // every span attribute as it arrived
	SDKName            string         // X-Svc-Sdk-Name header of the request that delivered it
	SDKVersion         string         // X-Svc-Sdk-Version header

	ReceivedAt time.Time // when the last delivery arrived
	Deliveries int       // how many times this (traceId, id) arrived; >1 means duplicates
}

// Usage is token usage of a generation.
type Usage struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
	Total  int64 `json:"total"`
}

// spanKey identifies a span on the platform: a resent (traceId, spanId) replaces.
type spanKey struct {
	traceID pcommon.TraceID
	spanID  pcommon.SpanID
}

// delivery is what one request carried, ready for the store.
type delivery struct {
	keys         []spanKey
	observations []Observation // empty in StatsOnly mode
	rejected     int
	rejectReason string
	// arrived is when the request's body had been read: the first arrival of its new spans.
	arrived time.Time
}

// observationsFrom maps the spans of one request onto observations. Spans without a valid
// trace or span id are rejected (counted in rejected), as the platform cannot store them.
func observationsFrom(td ptrace.Traces, sdkName, sdkVersion string, now time.Time, keysOnly bool) delivery {
	var d delivery
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var resourceAttrs map[string]any
		if !keysOnly {
			resourceAttrs = rs.Resource().Attributes().AsRaw()
		}
		resourceEnv := firstString(rs.Resource().Attributes(), attrEnvironment)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			jsonEncoded := decodesMetadata(rs.Resource(), ss.Scope())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				if span.TraceID().IsEmpty() || span.SpanID().IsEmpty() {
					d.rejected++
					d.rejectReason = "spans need a non-zero trace id and span id"
					continue
				}
				d.keys = append(d.keys, spanKey{span.TraceID(), span.SpanID()})
				if keysOnly {
					continue
				}
				o := Observation{
					ID:                  span.SpanID().String(),
					TraceID:             span.TraceID().String(),
					Name:                span.Name(),
					Type:                observationType(span.Attributes()),
					StartTime:           span.StartTimestamp().AsTime().UTC(),
					EndTime:             span.EndTimestamp().AsTime().UTC(),
					Level:               LevelDefault,
					StatusMessage:       span.Status().Message(),
					Environment:         DefaultEnvironment,
					MetadataJSONEncoded: jsonEncoded,
					ScopeName:           ss.Scope().Name(),
					ScopeVersion:        ss.Scope().Version(),
					ResourceAttributes:  resourceAttrs,
					Attributes:          span.Attributes().AsRaw(),
					SDKName:             sdkName,
					SDKVersion:          sdkVersion,
					ReceivedAt:          now,
				}
				if !span.ParentSpanID().IsEmpty() {
					o.ParentObservationID = span.ParentSpanID().String()
				}
				if span.Status().Code() == ptrace.StatusCodeError {
					o.Level = LevelError
				}
				fillFromAttributes(&o, span.Attributes(), resourceEnv)
				d.observations = append(d.observations, o)
			}
		}
	}
	return d
}

// observationType is the platform's rule for an observation's type:
//  1. svc.observation.type when set, upper-cased (e.g. "generation" → GENERATION, "tool" → TOOL);
//  2. else GENERATION when the span names a model (gen_ai.request.model or
//     gen_ai.response.model) or its gen_ai.operation.name is chat, text_completion or
//     generate_content;
//  3. else SPAN.
func observationType(attrs pcommon.Map) string {
	if v, ok := attrs.Get(attrObservationType); ok && v.AsString() != "" {
		return strings.ToUpper(v.AsString())
	}
	_, hasRequestModel := attrs.Get(attrRequestModel)
	_, hasResponseModel := attrs.Get(attrResponseModel)
	if hasRequestModel || hasResponseModel {
		return TypeGeneration
	}
	if v, ok := attrs.Get(attrOperationName); ok && generationOperations[v.AsString()] {
		return TypeGeneration
	}
	return TypeSpan
}

func fillFromAttributes(o *Observation, attrs pcommon.Map, resourceEnv string) {
	o.Input = firstString(attrs, attrObservationInput, attrInputMessages)
	o.Output = firstString(attrs, attrObservationOutput, attrOutputMessages)
	o.Model = firstString(attrs, attrRequestModel, attrResponseModel)
	o.SessionID = firstString(attrs, attrSvcSessionID, attrSessionID)
	if env := firstString(attrs, attrEnvironment); env != "" {
		o.Environment = env
	} else if resourceEnv != "" {
		o.Environment = resourceEnv
	}
	o.Metadata = metadataFrom(attrs, attrObservationMetadataPrefix, o.MetadataJSONEncoded)
	o.TraceMetadata = metadataFrom(attrs, attrTraceMetadataPrefix, o.MetadataJSONEncoded)

	input, hasInput := attrs.Get(attrUsageInputTokens)
	output, hasOutput := attrs.Get(attrUsageOutputTokens)
	if hasInput || hasOutput {
		u := &Usage{Input: tokenCount(input, hasInput), Output: tokenCount(output, hasOutput)}
		u.Total = u.Input + u.Output
		o.Usage = u
	}
}

// firstString is the first of the attributes that is set and not empty, as a string (maps
// and slices as JSON text).
func firstString(attrs pcommon.Map, names ...string) string {
	for _, name := range names {
		if v, ok := attrs.Get(name); ok {
			if s := v.AsString(); s != "" {
				return s
			}
		}
	}
	return ""
}

func tokenCount(v pcommon.Value, ok bool) int64 {
	if !ok {
		return 0
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int()
	case pcommon.ValueTypeDouble:
		return int64(v.Double())
	default:
		return 0
	}
}
