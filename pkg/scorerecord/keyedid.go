package scorerecord

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// KeyedID is DeterministicID(namespace, trace id, span id, key) with the ids as lower-case hex
// ("" when empty), derived without building those strings: for producers that derive an id per
// span and rule (the svcevaluator connector: one score per span and evaluator). The same span
// resent yields the same id.
func KeyedID(namespace string, traceID pcommon.TraceID, spanID pcommon.SpanID, key string) string {
	var stack [256]byte
	buf := appendSpanKey(appendPart(stack[:0], namespace), traceID, spanID)
	buf = appendPart(buf, key)
	return idOf(buf)
}
