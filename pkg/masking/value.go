package masking // import "github.com/svc/svc-collector/pkg/masking"

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/jsontext"
)

// StructuralAttributes are attribute names (an entry ending in "*" is a prefix) whose values
// are ids, model names, enums and counters: they are skipped for speed. Keep the list short and
// the README's copy in sync: everything not listed is masked.
var StructuralAttributes = []string{
	"gen_ai.operation.name", "gen_ai.system", "gen_ai.provider.name",
	"gen_ai.request.model", "gen_ai.response.model", "gen_ai.response.id",
	"gen_ai.response.finish_reasons", "gen_ai.usage.*",
	"llm.model_name", "llm.provider", "llm.system", "llm.token_count.*",
	"openinference.span.kind", "traceloop.span.kind", "langsmith.span.kind",
	"ai.operationId", "ai.model.id", "ai.model.provider", "ai.usage.*",
	"ai.response.finishReason", "ai.response.id", "ai.response.model",
	"svc.observation.type", "svc.observation.level", "svc.original_parent_span_id",
	"svc.environment", "svc.release", "svc.version",
}

// Skips reports whether the attribute name is structural (builtin list) or listed in
// masking.skip_attributes: its value is not masked.
func (e *Engine) Skips(name string) bool {
	if e == nil {
		return true
	}
	if _, ok := e.skipNames[name]; ok {
		return true
	}
	for _, p := range e.skipPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Stats counts the values masking changed, by what it did (for the components' metrics).
// A nil *Stats counts nothing.
type Stats struct {
	Masked, Oversized, Failed int64
}

// Add counts one value's result.
func (st *Stats) Add(r Result) {
	if st == nil {
		return
	}
	switch r {
	case Masked:
		st.Masked++
	case Oversized:
		st.Oversized++
	case Failed:
		st.Failed++
	}
}

// Attributes masks every attribute of m in place, except structural and skipped ones and
// those for which skip (may be nil) is true. An attribute whose name, or the last dotted
// segment of it, is a masked key is replaced whole (`langsmith.metadata.password`). st (may be
// nil) counts the changed attributes.
func (e *Engine) Attributes(m pcommon.Map, skip func(name string) bool, st *Stats) Result {
	if e == nil {
		return Unchanged
	}
	res := Unchanged
	for name, v := range m.All() {
		if e.Skips(name) || (skip != nil && skip(name)) {
			continue
		}
		if e.isMaskedAttribute(name) {
			if v.Type() != pcommon.ValueTypeStr || v.Str() != e.keyReplacement {
				v.SetStr(e.keyReplacement)
				res = max(res, Masked)
				st.Add(Masked)
			}
			continue
		}
		r := e.Value(v)
		st.Add(r)
		res = max(res, r)
	}
	return res
}

func (e *Engine) isMaskedAttribute(name string) bool {
	if len(e.keys) == 0 {
		return false
	}
	if e.IsMaskedKey(name) {
		return true
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return e.IsMaskedKey(name[i+1:])
	}
	return false
}

// Value masks an OTLP value in place: a string as Text (JSON text inside it is masked as
// JSON), the strings of maps and slices at any depth, values under masked map keys whole, and
// numbers and booleans as their text (a card number sent as an integer is masked; a changed
// number or boolean becomes the masked string). Nesting deeper than 128 levels replaces the
// whole value by Placeholder.
func (e *Engine) Value(v pcommon.Value) Result {
	if e == nil {
		return Unchanged
	}
	res, tooDeep := e.valueAt(v, 0)
	if tooDeep {
		v.SetStr(Placeholder)
		return Failed
	}
	return res
}

func (e *Engine) valueAt(v pcommon.Value, depth int) (Result, bool) {
	res := Unchanged
	maskScalar := func(text string) {
		if out, changed := e.String(text); changed {
			v.SetStr(out)
			res = Masked
		}
	}
	switch v.Type() {
	case pcommon.ValueTypeStr:
		if out, r := e.Text(v.Str()); r != Unchanged {
			v.SetStr(out)
			res = r
		}
	case pcommon.ValueTypeInt:
		if len(e.rules) > 0 {
			maskScalar(strconv.FormatInt(v.Int(), 10))
		}
	case pcommon.ValueTypeDouble:
		if len(e.rules) > 0 {
			var buf [32]byte // room for the text of any float64 (at most 26 bytes)
			maskScalar(string(jsontext.AppendFloat(buf[:0], v.Double())))
		}
	case pcommon.ValueTypeBool:
		if len(e.rules) > 0 {
			maskScalar(strconv.FormatBool(v.Bool()))
		}
	case pcommon.ValueTypeBytes:
		if n := v.Bytes().Len(); e.oversized(n) {
			v.SetStr(SizeMarker(n))
			return Oversized, false
		}
		maskScalar(string(v.Bytes().AsRaw()))
	case pcommon.ValueTypeMap:
		if depth >= jsontext.MaxDepth {
			return Unchanged, true
		}
		for k, mv := range v.Map().All() {
			if e.IsMaskedKey(k) {
				if mv.Type() != pcommon.ValueTypeStr || mv.Str() != e.keyReplacement {
					mv.SetStr(e.keyReplacement)
					res = max(res, Masked)
				}
				continue
			}
			r, tooDeep := e.valueAt(mv, depth+1)
			if tooDeep {
				return Unchanged, true
			}
			res = max(res, r)
		}
	case pcommon.ValueTypeSlice:
		if depth >= jsontext.MaxDepth {
			return Unchanged, true
		}
		s := v.Slice()
		for i := 0; i < s.Len(); i++ {
			r, tooDeep := e.valueAt(s.At(i), depth+1)
			if tooDeep {
				return Unchanged, true
			}
			res = max(res, r)
		}
	}
	return res, false
}
