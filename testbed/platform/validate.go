package platform

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// spanIDs are a span's ids as the platform reads them (docs/contract.md §14.1, §14.4): the lowercase hex of
// protobuf bytes (empty bytes give ""), or the JSON string as sent, case kept.
type spanIDs struct {
	traceID, spanID, parentID string
}

// protoSpanIDs reads the ids of every span of a protobuf request, in order. pdata cannot tell an
// absent id from an all-zero one; the platform can (empty bytes give an empty id).
func protoSpanIDs(body []byte) ([]spanIDs, error) {
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	var out []spanIDs
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				out = append(out, spanIDs{hex.EncodeToString(s.GetTraceId()), hex.EncodeToString(s.GetSpanId()), hex.EncodeToString(s.GetParentSpanId())})
			}
		}
	}
	return out, nil
}

// OTLP/JSON is read as the platform's route reads it: camelCase only (no resourceSpans: an empty
// request), every list checked to be an array.

// jsonSpanIDs validates the structure of an OTLP/JSON request as the platform does (a failure
// rejects the whole export) and reads its span ids. empty is true when resourceSpans is missing or
// empty (the platform answers 200 and stores nothing).
func jsonSpanIDs(body []byte) (ids []spanIDs, empty bool, herr *httpError) {
	bad := func(format string, args ...any) ([]spanIDs, bool, *httpError) {
		return nil, false, errorf(http.StatusBadRequest, "invalid OTLP request, no spans were ingested: "+format, args...)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, false, errorf(http.StatusBadRequest, "malformed OTLP JSON payload: %v", err)
	}
	var resourceSpans []map[string]json.RawMessage
	if raw, ok := top["resourceSpans"]; !ok || isNull(raw) {
		return nil, true, nil
	} else if err := json.Unmarshal(raw, &resourceSpans); err != nil {
		return bad("resourceSpans is not an array")
	}
	if len(resourceSpans) == 0 {
		return nil, true, nil
	}
	for i, rs := range resourceSpans {
		if res, ok := rs["resource"]; ok && !isNull(res) {
			var r map[string]json.RawMessage
			if json.Unmarshal(res, &r) == nil {
				if !arrayIfPresent(r, "attributes") {
					return bad("resourceSpans[%d].resource.attributes is not an array", i)
				}
			}
		}
		scopeSpans, ok := objectArray(rs, "scopeSpans")
		if !ok {
			return bad("resourceSpans[%d].scopeSpans is not an array", i)
		}
		for j, ss := range scopeSpans {
			if sc, ok := ss["scope"]; ok && !isNull(sc) {
				var s map[string]json.RawMessage
				if json.Unmarshal(sc, &s) == nil && !arrayIfPresent(s, "attributes") {
					return bad("resourceSpans[%d].scopeSpans[%d].scope.attributes is not an array", i, j)
				}
			}
			spans, ok := objectArray(ss, "spans")
			if !ok {
				return bad("resourceSpans[%d].scopeSpans[%d].spans is not an array", i, j)
			}
			for k, sp := range spans {
				where := fmt.Sprintf("resourceSpans[%d].scopeSpans[%d].spans[%d]", i, j, k)
				traceID, ok := jsonID(sp["traceId"])
				if !ok {
					return bad("%s.traceId is missing or not a string or byte array", where)
				}
				spanID, ok := jsonID(sp["spanId"])
				if !ok {
					return bad("%s.spanId is missing or not a string or byte array", where)
				}
				parent := ""
				if raw, present := sp["parentSpanId"]; present && jsonTruthy(raw) {
					if parent, ok = jsonID(raw); !ok {
						return bad("%s.parentSpanId is not a string or byte array", where)
					}
				}
				if !arrayIfPresent(sp, "attributes") || !arrayIfPresent(sp, "events") {
					return bad("%s: attributes and events must be arrays", where)
				}
				if events, _ := objectArray(sp, "events"); events != nil {
					for _, ev := range events {
						if !arrayIfPresent(ev, "attributes") {
							return bad("%s: event attributes must be an array", where)
						}
					}
				}
				ids = append(ids, spanIDs{traceID, spanID, parent})
			}
		}
	}
	return ids, false, nil
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// arrayIfPresent: the key is absent, null, or an array.
func arrayIfPresent(m map[string]json.RawMessage, key string) bool {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return true
	}
	var list []json.RawMessage
	return json.Unmarshal(raw, &list) == nil
}

// objectArray is m[key] as an array of objects (nil, true when absent).
func objectArray(m map[string]json.RawMessage, key string) ([]map[string]json.RawMessage, bool) {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return nil, true
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, false
	}
	return list, true
}

// jsonID is an id as the platform takes it: a string verbatim, or a byte array (an array of
// ints, or {type:"Buffer", data}) as hex.
func jsonID(raw json.RawMessage) (string, bool) {
	if isNull(raw) {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var b []byte
	var ints []int
	if json.Unmarshal(raw, &ints) == nil {
		for _, n := range ints {
			b = append(b, byte(n))
		}
		return hex.EncodeToString(b), true
	}
	var buf struct {
		Type string `json:"type"`
		Data []int  `json:"data"`
	}
	if json.Unmarshal(raw, &buf) == nil && buf.Type == "Buffer" {
		for _, n := range buf.Data {
			b = append(b, byte(n))
		}
		return hex.EncodeToString(b), true
	}
	return "", false
}

func jsonTruthy(raw json.RawMessage) bool {
	switch string(raw) {
	case "", "null", `""`, "0", "false":
		return false
	}
	return true
}
