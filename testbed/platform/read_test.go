package platform

import (
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// readPlatform holds one trace of three spans and one of another session.
func readPlatform(t *testing.T) *Platform {
	t.Helper()
	p := startPlatform(t)
	newSDK := testResource{attrs: map[string]any{"telemetry.sdk.language": "python"}, scopeName: "svc-sdk", scopeVersion: "5.0.0"}
	sendSpans(t, p, newSDK,
		testSpan{traceID: 1, spanID: 1, name: "agent", attrs: map[string]any{
			"session.id": "s-1", "svc.trace.name": "run", "svc.trace.metadata.user": `"u-1"`,
			"svc.observation.metadata.tier": `{"level":2,"paid":true}`,
		}},
		testSpan{traceID: 1, spanID: 2, parent: 1, name: "llm", attrs: map[string]any{
			"session.id": "s-1", "gen_ai.request.model": "gpt-x", "gen_ai.usage.input_tokens": int64(3),
			"svc.observation.input": "hi", "svc.observation.output": "hello",
			"svc.observation.metadata.n": "5", "svc.observation.metadata.label": `"5"`,
		}},
		testSpan{traceID: 1, spanID: 3, parent: 1, name: "tool", attrs: map[string]any{"session.id": "s-1", "svc.observation.type": "tool"}},
	)
	// A third-party span: the same metadata rules (docs/contract.md §5.2 has no SDK branch).
	sendSpans(t, p, testResource{scopeName: "my-app"}, testSpan{traceID: 2, spanID: 9, name: "other", attrs: map[string]any{
		"session.id": "s-2", "svc.observation.metadata.env": `"prod"`, "svc.observation.metadata.count": int64(7),
		"svc.observation.metadata.plan": map[string]any{"seats": int64(3)},
	}})
	return p
}

// readObservations calls the v2 API and returns the answer's data and meta.
func readObservations(t *testing.T, p *Platform, query url.Values) (int, []map[string]any, map[string]any, string) {
	t.Helper()
	resp := send(t, p, http.MethodGet, PathObservations+"?"+query.Encode(), nil, nil)
	body := resp.jsonBody(t)
	if resp.status != http.StatusOK {
		msg, _ := body["message"].(string)
		return resp.status, nil, nil, msg
	}
	var data []map[string]any
	for _, d := range body["data"].([]any) {
		data = append(data, d.(map[string]any))
	}
	return resp.status, data, body["meta"].(map[string]any), ""
}

func keysOf(m map[string]any) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestObservationsReadFieldGroups(t *testing.T) {
	p := readPlatform(t)
	tests := []struct {
		fields string
		want   []string
	}{
		{"", []string{"endTime", "environment", "id", "level", "name", "parentObservationId", "release", "sessionId", "startTime", "statusMessage", "traceId", "type", "userId", "version"}},
		{"core", []string{"endTime", "id", "parentObservationId", "startTime", "traceId", "type"}},
		{"core,io", []string{"endTime", "id", "input", "output", "parentObservationId", "startTime", "traceId", "type"}},
		{" io , metadata ", []string{"input", "metadata", "output"}},
		{"model,usage", []string{"costDetails", "model", "modelParameters", "totalCost", "usageDetails"}},
		{"time", []string{"completionStartTime", "createdAt"}},
		{"prompt", []string{"promptName", "promptVersion"}},
		{"metrics", []string{"latency", "timeToFirstToken"}},
		{"trace_context", []string{"traceMetadata", "traceName", "traceTags"}},
		{"otel", []string{"attributes", "resourceAttributes", "scope", "sdk"}},
	}
	for _, tt := range tests {
		t.Run(tt.fields, func(t *testing.T) {
			q := url.Values{"traceId": {hexTrace(1)}}
			if tt.fields != "" {
				q.Set("fields", tt.fields)
			}
			status, data, _, msg := readObservations(t, p, q)
			if status != http.StatusOK || len(data) != 3 {
				t.Fatalf("status %d, %d observations (%s)", status, len(data), msg)
			}
			if got := keysOf(data[1]); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("fields %v, want %v", got, tt.want)
			}
		})
	}
}

func TestObservationsReadValues(t *testing.T) {
	p := readPlatform(t)
	q := url.Values{"traceId": {hexTrace(1)}, "fields": {"core,basic,io,metadata,model,usage,metrics,trace_context"}}
	_, data, _, _ := readObservations(t, p, q)
	root, llm := data[0], data[1]
	checks := []struct {
		name      string
		got, want any
	}{
		{"ordered by start time", []any{root["name"], llm["name"], data[2]["name"]}, []any{"agent", "llm", "tool"}},
		{"root parent is null", root["parentObservationId"], nil},
		{"child parent", llm["parentObservationId"], hexSpan(1)},
		{"type", llm["type"], TypeGeneration},
		{"tool type", data[2]["type"], "TOOL"},
		{"input raw string", llm["input"], "hi"},
		{"no input is null", root["input"], nil},
		{"typed metadata number", llm["metadata"].(map[string]any)["n"], 5.0},
		{"typed metadata string", llm["metadata"].(map[string]any)["label"], "5"},
		{"svc-sdk metadata has no attributes key", data[2]["metadata"], map[string]any{
			"resourceAttributes.telemetry.sdk.language": "python", "scope.name": "svc-sdk", "scope.version": "5.0.0"}},
		{"model", llm["model"], "gpt-x"},
		{"usage details", llm["usageDetails"], map[string]any{"input": 3.0}},
		{"no usage is an empty object", root["usageDetails"], map[string]any{}},
		{"no cost is null", root["totalCost"], nil},
		{"latency in seconds", llm["latency"], 1.5},
		{"trace name", root["traceName"], "run"},
		{"trace metadata", root["traceMetadata"], map[string]any{"user": "u-1"}},
		{"start time RFC 3339", root["startTime"], "2025-03-01T12:00:00Z"},
		{"third-party metadata: JSON parsed on read, a kvlist as its OTLP wrapper", userMetadata(readOne(t, p, hexTrace(2))["metadata"]), map[string]any{
			"env": "prod", "count": 7.0, "plan": map[string]any{"kvlistValue": map[string]any{"values": []any{
				map[string]any{"key": "seats", "value": map[string]any{"intValue": "3"}}}}}}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

// userMetadata leaves out the keys the platform adds (attributes, resourceAttributes, scope).
func userMetadata(v any) map[string]any {
	out := map[string]any{}
	for k, val := range v.(map[string]any) {
		if !isSystemKey(k) {
			out[k] = val
		}
	}
	return out
}

// readOne reads the one observation of a trace with every standard field group.
func readOne(t *testing.T, p *Platform, traceID string) map[string]any {
	t.Helper()
	_, data, _, msg := readObservations(t, p, url.Values{"traceId": {traceID}, "fields": {"core,basic,metadata"}})
	if len(data) != 1 {
		t.Fatalf("trace %s: %d observations (%s), want 1", traceID, len(data), msg)
	}
	return data[0]
}

func TestObservationsReadFilters(t *testing.T) {
	p := readPlatform(t)
	tests := []struct {
		name   string
		query  url.Values
		want   []string // names, in order
		status int
		msg    string
	}{
		{"all, by start time then id", url.Values{}, []string{"agent", "other", "llm", "tool"}, http.StatusOK, ""},
		{"by trace", url.Values{"traceId": {hexTrace(2)}}, []string{"other"}, http.StatusOK, ""},
		{"unknown trace", url.Values{"traceId": {hexTrace(7)}}, nil, http.StatusOK, ""},
		{"by session", url.Values{"sessionId": {"s-1"}}, []string{"agent", "llm", "tool"}, http.StatusOK, ""},
		{"string column", url.Values{"filter": {`[{"type":"string","column":"type","operator":"=","value":"GENERATION"}]`}}, []string{"llm"}, http.StatusOK, ""},
		{"string contains", url.Values{"filter": {`[{"type":"string","column":"name","operator":"contains","value":"o"}]`}}, []string{"other", "tool"}, http.StatusOK, ""},
		{"typed number matches a number", url.Values{"filter": {`[{"type":"number","column":"metadata.n","operator":"=","value":5}]`}}, []string{"llm"}, http.StatusOK, ""},
		{"typed number ignores the string 5", url.Values{"filter": {`[{"type":"number","column":"metadata.label","operator":"=","value":5}]`}}, nil, http.StatusOK, ""},
		{"number comparison", url.Values{"filter": {`[{"type":"number","column":"metadata.n","operator":">","value":4.5}]`}}, []string{"llm"}, http.StatusOK, ""},
		{"nested dotted path", url.Values{"filter": {`[{"type":"number","column":"metadata.tier.level","operator":"=","value":2}]`}}, []string{"agent"}, http.StatusOK, ""},
		{"nested boolean", url.Values{"filter": {`[{"type":"boolean","column":"metadata.tier.paid","operator":"=","value":true}]`}}, []string{"agent"}, http.StatusOK, ""},
		{"trace metadata", url.Values{"filter": {`[{"type":"string","column":"traceMetadata.user","operator":"=","value":"u-1"}]`}}, []string{"agent"}, http.StatusOK, ""},
		{"third-party int is a number", url.Values{"filter": {`[{"type":"number","column":"metadata.count","operator":">=","value":7}]`}}, []string{"other"}, http.StatusOK, ""},
		{"a kvlist is its OTLP wrapper, no path to its keys", url.Values{"filter": {`[{"type":"number","column":"metadata.plan.seats","operator":"=","value":3}]`}}, nil, http.StatusOK, ""},
		{"a JSON string reads back decoded", url.Values{"filter": {`[{"type":"string","column":"metadata.env","operator":"=","value":"prod"}]`}}, []string{"other"}, http.StatusOK, ""},
		{"flattened system keys", url.Values{"filter": {`[{"type":"string","column":"metadata.scope.name","operator":"=","value":"my-app"}]`}}, []string{"other"}, http.StatusOK, ""},
		{"datetime", url.Values{"filter": {`[{"type":"datetime","column":"startTime","operator":">=","value":"2025-03-01T12:00:01Z"}]`}}, []string{"llm", "tool"}, http.StatusOK, ""},
		{"filters combine", url.Values{"sessionId": {"s-1"}, "filter": {`[{"type":"string","column":"name","operator":"!=","value":"agent"},{"type":"string","column":"type","operator":"=","value":"TOOL"}]`}}, []string{"tool"}, http.StatusOK, ""},
		{"unknown group", url.Values{"fields": {"core,bogus"}}, nil, http.StatusBadRequest, `unknown field group "bogus"`},
		{"empty group", url.Values{"fields": {"core,"}}, nil, http.StatusBadRequest, `unknown field group ""`},
		{"filter not an array", url.Values{"filter": {`{"type":"string"}`}}, nil, http.StatusBadRequest, "JSON array"},
		{"filter unknown key", url.Values{"filter": {`[{"type":"string","column":"name","operator":"=","value":"x","key":"k"}]`}}, nil, http.StatusBadRequest, "unknown field"},
		{"filter unknown column", url.Values{"filter": {`[{"type":"string","column":"color","operator":"=","value":"x"}]`}}, nil, http.StatusBadRequest, `unsupported string column "color"`},
		{"filter unknown operator", url.Values{"filter": {`[{"type":"number","column":"metadata.n","operator":"~","value":1}]`}}, nil, http.StatusBadRequest, "number operators"},
		{"filter value of wrong type", url.Values{"filter": {`[{"type":"number","column":"metadata.n","operator":"=","value":"5"}]`}}, nil, http.StatusBadRequest, "numeric value"},
		{"filter unknown type", url.Values{"filter": {`[{"type":"regex","column":"name","operator":"=","value":"x"}]`}}, nil, http.StatusBadRequest, "unsupported filter type"},
		{"bad limit", url.Values{"limit": {"0"}}, nil, http.StatusBadRequest, "limit"},
		{"bad cursor", url.Values{"cursor": {"!!"}}, nil, http.StatusBadRequest, "cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, data, _, msg := readObservations(t, p, tt.query)
			if status != tt.status {
				t.Fatalf("status %d, want %d (%s)", status, tt.status, msg)
			}
			if tt.status != http.StatusOK {
				if !strings.Contains(msg, tt.msg) {
					t.Errorf("message %q does not say %q", msg, tt.msg)
				}
				return
			}
			var names []string
			for _, d := range data {
				names = append(names, d["name"].(string))
			}
			if !reflect.DeepEqual(names, tt.want) {
				t.Errorf("got %v, want %v", names, tt.want)
			}
		})
	}
}

func TestObservationsReadPages(t *testing.T) {
	p := readPlatform(t)
	var names []string
	q := url.Values{"limit": {"3"}}
	for pages := 1; ; pages++ {
		_, data, meta, msg := readObservations(t, p, q)
		if data == nil && msg != "" {
			t.Fatal(msg)
		}
		for _, d := range data {
			names = append(names, d["name"].(string))
		}
		cursor, _ := meta["cursor"].(string)
		if cursor == "" {
			if pages != 2 {
				t.Errorf("%d pages of 3 for 4 observations, want 2", pages)
			}
			break
		}
		q.Set("cursor", cursor)
	}
	if want := []string{"agent", "other", "llm", "tool"}; !reflect.DeepEqual(names, want) {
		t.Errorf("paged through %v, want %v", names, want)
	}
}

func TestScoresRead(t *testing.T) {
	p := startPlatform(t)
	sendScores(t, p, `[
		{"id":"a","traceId":"t1","observationId":"o1","name":"q","value":1},
		{"id":"b","traceId":"t1","name":"label","value":"good","dataType":"CATEGORICAL"},
		{"id":"c","traceId":"t2","name":"q","value":0}]`)
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"a", "b", "c"}},
		{"traceId=t1", []string{"a", "b"}},
		{"id=c", []string{"c"}},
		{"id=a,c", []string{"a", "c"}},
		{"id=a&id=b", []string{"a", "b"}},
		{"traceId=t2&id=a", nil},
		{"observationId=o1", []string{"a"}},
		{"name=q&fields=subject", []string{"a", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			resp := send(t, p, http.MethodGet, PathScoresRead+"?"+tt.query, nil, nil)
			if resp.status != http.StatusOK {
				t.Fatalf("status %d: %s", resp.status, resp.body)
			}
			var ids []string
			for _, d := range resp.jsonBody(t)["data"].([]any) {
				ids = append(ids, d.(map[string]any)["id"].(string))
			}
			if !reflect.DeepEqual(ids, tt.want) {
				t.Errorf("ids %v, want %v", ids, tt.want)
			}
		})
	}
	resp := send(t, p, http.MethodGet, PathScoresRead+"?id=b", nil, nil)
	b := resp.jsonBody(t)["data"].([]any)[0].(map[string]any)
	if b["value"] != "good" || b["stringValue"] != "good" || b["dataType"] != DataTypeCategorical || b["observationId"] != nil {
		t.Errorf("score b read back as %v", b)
	}
}
