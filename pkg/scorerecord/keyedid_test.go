package scorerecord

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestKeyedIDIsDeterministicIDOfTheHexIDs(t *testing.T) {
	tests := []struct {
		trace pcommon.TraceID
		span  pcommon.SpanID
		key   string
	}{
		{pcommon.TraceID{1, 2, 3, 15: 0xff}, pcommon.SpanID{7: 9}, "slow_generation"},
		{pcommon.TraceID{1}, pcommon.SpanID{}, "trace-level"},
		{pcommon.TraceID{}, pcommon.SpanID{}, ""},
	}
	for _, tt := range tests {
		want := DeterministicID("svcevaluator", tt.trace.String(), tt.span.String(), tt.key)
		if got := KeyedID("svcevaluator", tt.trace, tt.span, tt.key); got != want {
			t.Errorf("KeyedID(%s, %s, %q) = %s, want %s", tt.trace, tt.span, tt.key, got, want)
		}
	}
	if KeyedID("a", pcommon.TraceID{1}, pcommon.SpanID{1}, "x") == KeyedID("a", pcommon.TraceID{1}, pcommon.SpanID{1}, "y") {
		t.Error("two keys of one span share an id")
	}
}
