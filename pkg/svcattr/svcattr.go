// Package svcattr names the span attributes of the svc platform's contract (docs/contract.md §5)
// and the one rule that tells whether a span's metadata is in the new JSON encoding, which the
// platform decodes (svc SDK JS/TS >= 6, Python >= 5).
// The gateway's components import these; the local platform (testbed/platform) keeps its own
// reading of docs/contract.md and does not.
package svcattr

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Span attributes of the platform.
const (
	ObservationMetadataPrefix = "svc.observation.metadata."
	TraceMetadataPrefix       = "svc.trace.metadata."
	// ObservationMetadata and TraceMetadata are the bare forms (a map, or a JSON object string)
	// that older SDKs and hand-written instrumentation set; the svcmetadata processor flattens them.
	ObservationMetadata = "svc.observation.metadata"
	TraceMetadata       = "svc.trace.metadata"

	ObservationInput  = "svc.observation.input"
	ObservationOutput = "svc.observation.output"
	ObservationType   = "svc.observation.type"
	TraceInput        = "svc.trace.input"
	TraceOutput       = "svc.trace.output"
	TraceName         = "svc.trace.name"
	Environment       = "svc.environment"

	// OriginalParentSpanID is set by the svcspanfilter processor on every span whose parent span
	// id it changed (re-parented to a kept ancestor, or made a root): the parent span id the span
	// had, as 16 hex digits.
	OriginalParentSpanID = "svc.original_parent_span_id"

	ExperimentPrefix = "svc.experiment."
	// EnvironmentExperiment is the svc.environment value of experiment spans (docs/contract.md §9).
	EnvironmentExperiment = "sdk-experiment"
)

// OpenTelemetry GenAI content attributes (semantic conventions): message and instruction
// content that masking covers beside svc's own input and output.
const (
	GenAIInputMessages      = "gen_ai.input.messages"
	GenAIOutputMessages     = "gen_ai.output.messages"
	GenAISystemInstructions = "gen_ai.system_instructions"
)

// SDKScopeName is the instrumentation scope of the platform's own SDKs.
const SDKScopeName = "svc-sdk"

// Resource attribute that names the SDK's language (OpenTelemetry semantic conventions).
const TelemetrySDKLanguage = "telemetry.sdk.language"

// newEncodingMajor is the first SDK major, by telemetry.sdk.language, whose metadata values
// are JSON-encoded (docs/contract.md §5: JS/TS v6, Python v5).
var newEncodingMajor = map[string]int{
	"nodejs":     6,
	"javascript": 6,
	"webjs":      6,
	"python":     5,
}

// IsNewSDKEncoding reports whether spans of this scope and resource come from a svc SDK whose
// metadata values are already JSON text (JS/TS >= 6, Python >= 5).
func IsNewSDKEncoding(resource pcommon.Resource, scope pcommon.InstrumentationScope) bool {
	if scope.Name() != SDKScopeName {
		return false
	}
	lang, ok := resource.Attributes().Get(TelemetrySDKLanguage)
	if !ok {
		return false
	}
	minMajor, known := newEncodingMajor[strings.ToLower(lang.AsString())]
	if !known {
		return false
	}
	major, ok := majorVersion(scope.Version())
	return ok && major >= minMajor
}

func majorVersion(version string) (int, bool) {
	version = strings.TrimPrefix(strings.TrimSpace(version), "v")
	head, _, _ := strings.Cut(version, ".")
	major, err := strconv.Atoi(head)
	return major, err == nil
}

// IsExperimentAttribute reports whether one span attribute marks its span as part of an
// experiment run: any svc.experiment.* attribute, or svc.environment = sdk-experiment. Spans and
// scores of experiments are never sampled out (docs/contract.md §9). Callers that already range over
// a span's attributes test each one with this; others use IsExperiment.
func IsExperimentAttribute(key string, value pcommon.Value) bool {
	return strings.HasPrefix(key, ExperimentPrefix) ||
		(key == Environment && value.Type() == pcommon.ValueTypeStr && value.Str() == EnvironmentExperiment)
}

// IsExperiment reports whether attrs mark an experiment run (see IsExperimentAttribute).
func IsExperiment(attrs pcommon.Map) bool {
	found := false
	attrs.Range(func(k string, v pcommon.Value) bool {
		found = IsExperimentAttribute(k, v)
		return !found
	})
	return found
}
