package scorerecord

import (
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Errors of Normalize, for callers that count drops by reason.
var (
	// ErrInvalidTarget reports a svc.score.target that is neither observation nor trace.
	ErrInvalidTarget = fmt.Errorf("%s must be %q or %q", AttrTarget, TargetObservation, TargetTrace)
	// ErrInvalidDataType reports a svc.score.data_type the platform does not know.
	ErrInvalidDataType = fmt.Errorf("%s must be %s, %s or %s", AttrDataType, DataTypeNumeric, DataTypeCategorical, DataTypeBoolean)
	// ErrDataTypeMismatch reports a value that does not fit its declared data type, which the
	// platform refuses: NUMERIC needs a number, BOOLEAN 0 or 1, CATEGORICAL a string.
	ErrDataTypeMismatch = errors.New("score value does not fit its data type")
)

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
//   - The data type is case-insensitive: "boolean" is BOOLEAN. Any other name is refused
//     (ErrInvalidDataType).
//   - A boolean value (an OpenTelemetry bool attribute) is a BOOLEAN score valued 1 or 0.
//   - Without a data type, a number is NUMERIC and a string CATEGORICAL.
//   - A declared type must fit the value as the platform checks it (ErrDataTypeMismatch):
//     NUMERIC a number, BOOLEAN the number 0 or 1, CATEGORICAL a string.
//   - The target is "observation" (the default) or "trace", case-insensitive; anything else is
//     refused (ErrInvalidTarget): guessing would send the score to the wrong place.
//
// A value that is neither number, string nor boolean (or none) is left as it is, for Validate to
// report. Normalize of its own result returns it unchanged.
func Normalize(dataType string, value pcommon.Value, target string) (Typed, error) {
	t := Typed{DataType: strings.ToUpper(strings.TrimSpace(dataType)), Value: value}
	switch strings.ToLower(strings.TrimSpace(target)) {
	case "", TargetObservation:
	case TargetTrace:
		t.TraceLevel = true
	default:
		return t, fmt.Errorf("%w, got %q", ErrInvalidTarget, target)
	}
	switch t.DataType {
	case "", DataTypeNumeric, DataTypeCategorical, DataTypeBoolean:
	default:
		return t, fmt.Errorf("%w, got %q", ErrInvalidDataType, dataType)
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
	var isNumber, isString bool
	var number float64
	switch t.Value.Type() {
	case pcommon.ValueTypeDouble:
		isNumber, number = true, t.Value.Double()
	case pcommon.ValueTypeInt:
		isNumber, number = true, float64(t.Value.Int())
	case pcommon.ValueTypeStr:
		isString = true
	default:
		return t, nil
	}
	switch t.DataType {
	case "":
		if isNumber {
			t.DataType = DataTypeNumeric
		} else {
			t.DataType = DataTypeCategorical
		}
	case DataTypeNumeric:
		if !isNumber {
			return t, fmt.Errorf("%w: %s needs a number, got %q", ErrDataTypeMismatch, DataTypeNumeric, t.Value.Str())
		}
	case DataTypeBoolean:
		if !isNumber || (number != 0 && number != 1) {
			return t, fmt.Errorf("%w: %s needs true, false, 0 or 1, got %s", ErrDataTypeMismatch, DataTypeBoolean, t.Value.AsString())
		}
	case DataTypeCategorical:
		if !isString {
			return t, fmt.Errorf("%w: %s needs a string, got %s", ErrDataTypeMismatch, DataTypeCategorical, t.Value.AsString())
		}
	}
	return t, nil
}
