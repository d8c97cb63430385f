// Package sampling holds the one TraceIdRatioBased decision that the svc components share.
//
// The span filter and the score connector must drop the same traces for the same rate, and both
// must agree with an OpenTelemetry SDK configured with that rate (docs/contract.md §9: sampled-out traces lose
// their spans and their scores). The rule is the OpenTelemetry Go SDK's TraceIDRatioBased sampler:
// the low 64 bits of the trace id, shifted right by one, against floor(rate * 2^63).
package sampling

import (
	"encoding/binary"
	"fmt"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Ratio is a TraceIdRatioBased sampler for a fixed rate.
type Ratio struct {
	upperBound uint64
	keepAll    bool
}

// ValidateRate reports whether rate is a usable sample rate: 0 < rate <= 1.
func ValidateRate(rate float64) error {
	if math.IsNaN(rate) || rate <= 0 || rate > 1 {
		return fmt.Errorf("sample_rate must be greater than 0 and at most 1, got %v", rate)
	}
	return nil
}

// NewRatio returns the sampler for rate. Callers validate rate with ValidateRate first; a rate of 1
// or more keeps every trace and a rate of 0 or less (or NaN) keeps none, as the SDK's sampler does.
func NewRatio(rate float64) Ratio {
	if rate >= 1 {
		return Ratio{keepAll: true}
	}
	if !(rate > 0) {
		// The SDK clamps such rates to 0; converting a negative or NaN float to uint64 would
		// give an implementation-specific bound (on amd64 one that keeps about every trace).
		return Ratio{}
	}
	return Ratio{upperBound: uint64(rate * (1 << 63))}
}

// KeepAll is true when the rate keeps every trace, so callers can skip per-span work.
func (r Ratio) KeepAll() bool { return r.keepAll }

// Keep reports whether the trace with this id is sampled in.
func (r Ratio) Keep(traceID pcommon.TraceID) bool {
	if r.keepAll {
		return true
	}
	x := binary.BigEndian.Uint64(traceID[8:16]) >> 1
	return x < r.upperBound
}
