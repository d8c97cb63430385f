package scorerecord

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// ErrInvalidTarget reports a svc.score.target that is neither observation nor trace.
var ErrInvalidTarget = fmt.Errorf("%s must be %q or %q", AttrTarget, TargetObservation, TargetTrace)

// Typed is a score's data type, value and target as the platform takes them.
type Typed struct {
	DataType string
	// Value is the zero Value when the score has none (Validate reports it missing).
	Value pcommon.Value
	// TraceLevel tells that the score is about the whole trace: it names no observation.
	TraceLevel bool
}

// Normalize is the one rule for what a producer wrote as a score's data type, value and target,
// applied by both readers: Event.Score (the connector, from a scoring event) and Read (the
// exporter, from a score record, which an application may also send straight to it). So a score
// says the same to the platform whichever path it took.
//
//   - The data type is case-insensitive: "boolean" is sent as BOOLEAN, as the platform names it.
//   - A boolean value (an OpenTelemetry bool attribute) is a BOOLEAN score valued 1 or 0.
//   - Without a data type, a number is NUMERIC and a string CATEGORICAL.
//   - The target is "observation" (the default) or "trace", case-insensitive; anything else is
//     refused (ErrInvalidTarget): guessing would attach the score to the wrong thing.
//
// Whether a data type is one the platform knows and fits the value (BOOLEAN 0 or 1, ...) is the
// platform's to judge: it refuses such a score in a 207 answer with its reason, which the exporter
// logs (the client-side validation is Request.Validate's, the SDKs' rule). A value that is neither
// number, string nor boolean (or none) is left as it is, for Validate to report. Normalize of its
// own result returns it unchanged.
func Normalize(dataType string, value pcommon.Value, target string) (Typed, error) {
	t := Typed{DataType: strings.ToUpper(strings.TrimSpace(dataType)), Value: value}
	switch strings.ToLower(strings.TrimSpace(target)) {
	case "", TargetObservation:
	case TargetTrace:
		t.TraceLevel = true
	default:
		return t, fmt.Errorf("%w, got %q", ErrInvalidTarget, target)
	}
	if value == (pcommon.Value{}) {
		return t, nil
	}
	if value.Type() == pcommon.ValueTypeBool {
		b := value.Bool()
		t.Value = pcommon.NewValueDouble(0)
		if b {
			t.Value.SetDouble(1)
		}
		if t.DataType == "" {
			t.DataType = DataTypeBoolean
		}
	}
	if t.DataType == "" {
		switch t.Value.Type() {
		case pcommon.ValueTypeDouble, pcommon.ValueTypeInt:
			t.DataType = DataTypeNumeric
		case pcommon.ValueTypeStr:
			t.DataType = DataTypeCategorical
		}
	}
	return t, nil
}
