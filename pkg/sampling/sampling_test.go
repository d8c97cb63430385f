package sampling

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// sdkKeeps is the decision of the OpenTelemetry Go SDK's sampler for this trace id.
func sdkKeeps(sampler sdktrace.Sampler, id pcommon.TraceID) bool {
	res := sampler.ShouldSample(sdktrace.SamplingParameters{
		ParentContext: context.Background(),
		TraceID:       trace.TraceID(id),
		Name:          "span",
	})
	return res.Decision == sdktrace.RecordAndSample
}

// traceIDWithLow64 returns a trace id whose low 64 bits (the ones the rule reads) are low.
func traceIDWithLow64(high, low uint64) pcommon.TraceID {
	var id pcommon.TraceID
	binary.BigEndian.PutUint64(id[:8], high)
	binary.BigEndian.PutUint64(id[8:], low)
	return id
}

func TestKeepAgreesWithGoSDK(t *testing.T) {
	rates := []float64{1e-9, 0.001, 0.01, 0.1, 0.25, 1.0 / 3, 0.5, 0.75, 0.9, 0.999999, 1}
	rng := rand.New(rand.NewPCG(42, 1))
	const randomIDs = 50_000
	for _, rate := range rates {
		sdkSampler := sdktrace.TraceIDRatioBased(rate)
		ours := NewRatio(rate)

		ids := make([]pcommon.TraceID, 0, randomIDs+8)
		for range randomIDs {
			ids = append(ids, traceIDWithLow64(rng.Uint64(), rng.Uint64()))
		}
		// The ids on both sides of the rate's bound, where an off-by-one would show.
		bound := uint64(rate * (1 << 63))
		for _, low := range []uint64{0, 1, 2*bound - 2, 2*bound - 1, 2 * bound, 2*bound + 1, math.MaxUint64} {
			ids = append(ids, traceIDWithLow64(0, low))
		}

		kept := 0
		for _, id := range ids {
			want := sdkKeeps(sdkSampler, id)
			if got := ours.Keep(id); got != want {
				t.Fatalf("rate %v, trace id %s: Keep = %v, Go SDK TraceIDRatioBased = %v", rate, id, got, want)
			}
			if want {
				kept++
			}
		}
		// The agreement above is the contract; this only shows the sample is not degenerate.
		if rate >= 0.01 && rate < 1 && (kept == 0 || kept == len(ids)) {
			t.Fatalf("rate %v kept %d of %d ids: the random ids do not exercise both outcomes", rate, kept, len(ids))
		}
	}
}

func TestKeepReadsOnlyTheLow64Bits(t *testing.T) {
	r := NewRatio(0.5)
	// The high half does not matter; the low half decides (OpenTelemetry's rule, not the JS SDK's).
	low := traceIDWithLow64(math.MaxUint64, 1)
	high := traceIDWithLow64(0, math.MaxUint64)
	if !r.Keep(low) {
		t.Errorf("trace id %s with a small low half must be kept at rate 0.5", low)
	}
	if r.Keep(high) {
		t.Errorf("trace id %s with the largest low half must be dropped at rate 0.5", high)
	}
}

func TestValidateRate(t *testing.T) {
	tests := []struct {
		rate    float64
		wantErr bool
	}{
		{rate: 1},
		{rate: 0.5},
		{rate: math.SmallestNonzeroFloat64},
		{rate: 0, wantErr: true},
		{rate: -0.1, wantErr: true},
		{rate: 1.0000001, wantErr: true},
		{rate: math.NaN(), wantErr: true},
		{rate: math.Inf(1), wantErr: true},
	}
	for _, tt := range tests {
		err := ValidateRate(tt.rate)
		if (err != nil) != tt.wantErr {
			t.Errorf("ValidateRate(%v) = %v, want error: %v", tt.rate, err, tt.wantErr)
		}
	}
}

func TestRateOneKeepsEverything(t *testing.T) {
	r := NewRatio(1)
	if !r.KeepAll() {
		t.Fatal("rate 1 must report KeepAll so callers skip per-span work")
	}
	for _, low := range []uint64{0, 1 << 62, math.MaxUint64} {
		if id := traceIDWithLow64(7, low); !r.Keep(id) {
			t.Errorf("rate 1 dropped trace id %s", id)
		}
	}
	if NewRatio(0.5).KeepAll() {
		t.Error("rate 0.5 must not report KeepAll")
	}
}

// Rates outside (0, 1] never come from a validated config, but NewRatio must still agree with the
// SDK, which keeps nothing for a rate of 0 or less.
func TestNonPositiveRateKeepsNothingLikeTheSDK(t *testing.T) {
	for _, rate := range []float64{0, -0.5, -1, math.Inf(-1)} {
		sdkSampler := sdktrace.TraceIDRatioBased(rate)
		ours := NewRatio(rate)
		for _, low := range []uint64{0, 1, 1 << 62, math.MaxUint64 - 1, math.MaxUint64} {
			id := traceIDWithLow64(3, low)
			if got, want := ours.Keep(id), sdkKeeps(sdkSampler, id); got != want {
				t.Errorf("rate %v, trace id %s: Keep = %v, Go SDK TraceIDRatioBased = %v", rate, id, got, want)
			}
		}
	}
}
