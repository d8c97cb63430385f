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

// promoteOpenInference copies the members of OpenInference's `metadata` JSON object (or map)
// to svc.observation.metadata.<key>. The `metadata` attribute itself stays: the platform shows it
// among the span's attributes, and promotion adds, never takes away. A value that is not an
// object is left alone.
func promoteOpenInference(attrs pcommon.Map, enc spanEncoding) int64 {
	v, ok := attrs.Get(openInferenceMetadata)
	if !ok {
		return 0
	}
	entries, ok := objectEntries(v)
	if !ok {
		return 0
	}
	return putEntries(attrs, svcattr.ObservationMetadataPrefix, entries, enc)
}

// promoteCopies copies every attribute sourcePrefix+<key> to svc.observation.metadata.<key>, in
// the span's encoding (on the third-party spans that carry these, its raw OTLP value and type),
// except the keys in skip. The source attribute stays as it is: the platform reads some of them
// itself (the Vercel AI SDK's userId, sessionId and tags become the trace's user, session and
// tags), and an attribute it reads must reach it unchanged. An existing
// svc.observation.metadata.<key> wins over the copy.
func promoteCopies(attrs pcommon.Map, sourcePrefix string, skip func(key string) bool, enc spanEncoding) int64 {
	var buf [8]metadataEntry
	entries := buf[:0]
	for k, v := range attrs.All() {
		key, ok := strings.CutPrefix(k, sourcePrefix)
		if !ok || key == "" || (skip != nil && skip(key)) {
			continue
		}
		entries = append(entries, metadataEntry{key: key, value: ownedCopy(v)})
	}
	return putEntries(attrs, svcattr.ObservationMetadataPrefix, entries, enc)
}

// vercelAITraceKey reports the ai.telemetry.metadata keys the platform takes as the trace's
// user, session, tags and prompt link instead of as metadata (README: What the platform shows): a copy of
// them under svc.observation.metadata would add metadata that a direct export does not show.
func vercelAITraceKey(key string) bool {
	switch key {
	case "userId", "sessionId", "tags", "svcPrompt":
		return true
	}
	return false
}
