package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/jsontext"
	"github.com/svc/svc-collector/pkg/svcattr"
)

// ownedCopy copies v, so that the copy survives changes to the map v lives in.
func ownedCopy(v pcommon.Value) pcommon.Value {
	c := pcommon.NewValueEmpty()
	v.CopyTo(c)
	return c
}

// objectEntries returns the members of a metadata object: an OTLP map (values as OTLP values)
// or a JSON object string (values as their JSON text). ok is false for any other value, which
// cannot be split into keys.
func objectEntries(v pcommon.Value) (entries []metadataEntry, ok bool) {
	switch v.Type() {
	case pcommon.ValueTypeMap:
		entries = make([]metadataEntry, 0, v.Map().Len())
		for k, mv := range v.Map().All() {
			entries = append(entries, metadataEntry{key: k, value: ownedCopy(mv)})
		}
		return entries, true
	case pcommon.ValueTypeStr:
		err := jsontext.ObjectMembers(v.Str(), func(key, valueJSON string) {
			entries = append(entries, metadataEntry{key: key, valueJSON: valueJSON, fromJSON: true})
		})
		return entries, err == nil
	default:
		return nil, false
	}
}

// putEntries writes each entry as prefix+key in encoding enc unless the span already has that
// attribute (an explicit per-key attribute wins over the same key found elsewhere). It returns
// how many it wrote.
func putEntries(attrs pcommon.Map, prefix string, entries []metadataEntry, enc spanEncoding) int64 {
	var n int64
	for _, e := range entries {
		name := prefix + e.key
		if _, exists := attrs.Get(name); exists {
			continue
		}
		enc.write(attrs.PutEmpty(name), e)
		n++
	}
	return n
}

// flatten replaces a bare svc.observation.metadata / svc.trace.metadata object by per-key
// attributes in the span's encoding. A bare value that is not an object is left where it is.
func flatten(attrs pcommon.Map, bare, prefix string, enc spanEncoding) int64 {
	v, ok := attrs.Get(bare)
	if !ok {
		return 0
	}
	entries, ok := objectEntries(v)
	if !ok {
		return 0
	}
	n := putEntries(attrs, prefix, entries, enc)
	attrs.Remove(bare)
	return n
}

// promoteOpenInference moves the members of OpenInference's `metadata` JSON object into
// svc.observation.metadata.<key>. A `metadata` value that is not an object is left as it is.
func promoteOpenInference(attrs pcommon.Map, enc spanEncoding) int64 {
	return flatten(attrs, openInferenceMetadata, svcattr.ObservationMetadataPrefix, enc)
}

// promotePrefixed moves every attribute sourcePrefix+<key> to svc.observation.metadata.<key>,
// in the span's encoding (on the third-party spans that carry these, its raw OTLP value and
// type). The source attribute is removed even when the span already has
// svc.observation.metadata.<key> (which wins), so that the value is not sent twice.
func promotePrefixed(attrs pcommon.Map, sourcePrefix string, enc spanEncoding) int64 {
	var sources [8]string
	names := sources[:0]
	for k := range attrs.All() {
		if strings.HasPrefix(k, sourcePrefix) {
			names = append(names, k)
		}
	}
	entries := make([]metadataEntry, 0, len(names))
	for _, name := range names {
		v, _ := attrs.Get(name)
		entries = append(entries, metadataEntry{key: name[len(sourcePrefix):], value: ownedCopy(v)})
	}
	for _, name := range names {
		attrs.Remove(name)
	}
	return putEntries(attrs, svcattr.ObservationMetadataPrefix, entries, enc)
}
