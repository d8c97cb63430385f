package platform

import (
	"encoding/hex"
	"net/http"
	"reflect"
	"strings"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

var oneSpan = testSpan{traceID: 1, spanID: 1, name: "chat", attrs: map[string]any{"gen_ai.request.model": "m"}}

func TestTracesRequestRules(t *testing.T) {
	p := startPlatform(t)
	td := makeTraces(t, testResource{scopeName: "s"}, oneSpan)
	proto, js := protoBody(t, td), jsonTracesBody(t, td)
	tests := []struct {
		name        string
		contentType string
		encoding    string
		body        []byte
		status      int
		message     string
	}{
		{"protobuf", "application/x-protobuf", "", proto, http.StatusOK, ""},
		{"json", "application/json", "", js, http.StatusOK, ""},
		{"json with charset", "application/json; charset=utf-8", "", js, http.StatusOK, ""},
		{"protobuf gzip", "application/x-protobuf", "gzip", gzipBytes(t, proto), http.StatusOK, ""},
		{"json gzip", "application/json", "gzip", gzipBytes(t, js), http.StatusOK, ""},
		{"identity encoding", "application/x-protobuf", "identity", proto, http.StatusOK, ""},
		{"empty protobuf is an empty request", "application/x-protobuf", "", nil, http.StatusOK, ""},
		{"upper-case content type", "Application/X-Protobuf", "", proto, http.StatusOK, ""},
		{"snake_case JSON is an empty request", "application/json", "", []byte(`{"resource_spans":[{"scope_spans":[]}]}`), http.StatusOK, ""},
		{"missing content type", "", "", proto, http.StatusBadRequest, "Content-Type"},
		{"text content type", "text/plain", "", proto, http.StatusBadRequest, "text/plain"},
		{"protobuf without x-", "application/protobuf", "", proto, http.StatusBadRequest, "application/protobuf"},
		{"deflate encoding", "application/x-protobuf", "deflate", proto, http.StatusUnsupportedMediaType, "deflate"},
		{"br encoding", "application/x-protobuf", "br", proto, http.StatusUnsupportedMediaType, "br"},
		{"gzip header on plain body", "application/x-protobuf", "gzip", proto, http.StatusBadRequest, "not gzip"},
		{"truncated gzip", "application/x-protobuf", "gzip", gzipBytes(t, proto)[:20], http.StatusBadRequest, "gzip"},
		{"malformed protobuf", "application/x-protobuf", "", []byte("\xff\xff\xff\xff"), http.StatusBadRequest, "malformed OTLP"},
		{"malformed json", "application/json", "", []byte(`{"resourceSpans":[`), http.StatusBadRequest, "malformed OTLP"},
		{"json span without trace id", "application/json", "", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"0102030405060708","name":"x"}]}]}]}`), http.StatusBadRequest, "traceId"},
		{"json span id a number", "application/json", "", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01","spanId":5}]}]}]}`), http.StatusBadRequest, "spanId"},
		{"json attributes as a map", "application/json", "", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01","spanId":"02","attributes":{"k":"v"}}]}]}]}`), http.StatusBadRequest, "arrays"},
		{"json spans not an array", "application/json", "", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":{}}]}]}`), http.StatusBadRequest, "spans is not an array"},
		{"json body sent as protobuf", "application/x-protobuf", "", js, http.StatusBadRequest, "malformed OTLP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			headers := map[string]string{"Content-Type": tt.contentType, "Content-Encoding": tt.encoding}
			resp := send(t, p, http.MethodPost, PathTraces, headers, tt.body)
			if resp.status != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tt.status, resp.body)
			}
			if tt.status != http.StatusOK {
				if msg, _ := resp.jsonBody(t)["message"].(string); !strings.Contains(msg, tt.message) {
					t.Errorf("message %q does not mention %q", msg, tt.message)
				}
			}
		})
	}
}

// The platform answers 200 with a JSON body, to protobuf clients too, and never a partial success.
func TestTracesAnswerJSON(t *testing.T) {
	p := startPlatform(t)
	td := makeTraces(t, testResource{}, oneSpan)
	for _, tt := range []struct {
		name, contentType string
		body              []byte
	}{
		{"protobuf", "application/x-protobuf", protoBody(t, td)},
		{"json", "application/json", jsonTracesBody(t, td)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := send(t, p, http.MethodPost, PathTraces, map[string]string{"Content-Type": tt.contentType}, tt.body)
			if resp.status != http.StatusOK || resp.header.Get("Content-Type") != "application/json" || string(resp.body) != "{}" {
				t.Errorf("answer %d %q %s, want 200 application/json {}", resp.status, resp.header.Get("Content-Type"), resp.body)
			}
		})
	}
}

func TestTracesIngestionVersionHeader(t *testing.T) {
	p := startPlatform(t)
	body := protoBody(t, makeTraces(t, testResource{}, oneSpan))
	for v, want := range map[string]int{"4": http.StatusOK, "1": http.StatusOK, "5": http.StatusBadRequest, "four": http.StatusBadRequest} {
		resp := send(t, p, http.MethodPost, PathTraces, map[string]string{"Content-Type": "application/x-protobuf", HeaderIngestionVersion: v}, body)
		if resp.status != want {
			t.Errorf("%s %q: status %d, want %d", HeaderIngestionVersion, v, resp.status, want)
		}
	}
}

// Any id passes the door (docs/contract.md §3): an all-zero id is an id like another; an empty id gets
// the observation dropped alone after the 200; a missing JSON id rejects the whole request.
func TestTracesIDs(t *testing.T) {
	zeroSpan := func(traceID, spanID []byte, name string) *tracepb.Span {
		return &tracepb.Span{TraceId: traceID, SpanId: spanID, Name: name}
	}
	good := bytes16(1)
	raw, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
		zeroSpan(good, []byte{1, 1, 1, 1, 1, 1, 1, 1}, "ok"),
		zeroSpan(good, make([]byte, 8), "all-zero span id"),
		zeroSpan(good, nil, "empty span id"),
		zeroSpan(nil, []byte{3, 3, 3, 3, 3, 3, 3, 3}, "empty trace id"),
	}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	p := startPlatform(t)
	resp := send(t, p, http.MethodPost, PathTraces, protoHeaders, raw)
	if resp.status != http.StatusOK || string(resp.body) != "{}" {
		t.Fatalf("answer %d %s, want 200 {}", resp.status, resp.body)
	}
	if _, ok := p.Observation(hex.EncodeToString(good), "0000000000000000"); !ok {
		t.Error("the all-zero span id is not stored under 0000000000000000")
	}
	if st := p.Stats(); st.UniqueSpans != 2 || st.SpansRejected != 2 {
		t.Errorf("stored %d, dropped %d; want 2 and 2", st.UniqueSpans, st.SpansRejected)
	}
	var reasons []string
	for _, d := range p.Dropped() {
		reasons = append(reasons, d.Reason)
	}
	if !reflect.DeepEqual(reasons, []string{"empty id", "empty id"}) {
		t.Errorf("dropped %v", reasons)
	}

	// JSON ids are kept verbatim, case and all; "" is an empty id; a missing one rejects the request.
	p.Reset()
	js := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"ABCDEF0123456789ABCDEF0123456789","spanId":"0102030405060708","name":"upper"},` +
		`{"traceId":"ABCDEF0123456789ABCDEF0123456789","spanId":"","name":"empty"}]}]}]}`
	resp = send(t, p, http.MethodPost, PathTraces, map[string]string{"Content-Type": "application/json"}, []byte(js))
	if resp.status != http.StatusOK {
		t.Fatalf("status %d: %s", resp.status, resp.body)
	}
	if _, ok := p.Observation("ABCDEF0123456789ABCDEF0123456789", "0102030405060708"); !ok || p.Stats().SpansRejected != 1 {
		t.Errorf("want the upper-case id kept verbatim and the empty one dropped: %+v", p.Stats())
	}
	bad := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01010101010101010101010101010101","spanId":"0202020202020202","name":"good"},{"traceId":"01010101010101010101010101010101","name":"no span id"}]}]}]}`
	resp = send(t, p, http.MethodPost, PathTraces, map[string]string{"Content-Type": "application/json"}, []byte(bad))
	if resp.status != http.StatusBadRequest || p.Stats().UniqueSpans != 1 {
		t.Errorf("status %d, %d spans stored: want 400 and the good span of that request not stored", resp.status, p.Stats().UniqueSpans)
	}
}

func bytes16(b byte) []byte {
	out := make([]byte, 16)
	for i := range out {
		out[i] = b
	}
	return out
}

func TestTracesRecordGzipAndSDKPerRequest(t *testing.T) {
	p := startPlatform(t)
	body := protoBody(t, makeTraces(t, testResource{}, oneSpan))
	sdk := map[string]string{"Content-Type": "application/x-protobuf", HeaderSDKName: "svc-otelcol", HeaderSDKVersion: "0.1.0"}
	send(t, p, http.MethodPost, PathTraces, sdk, body)
	sdk["Content-Encoding"] = "gzip"
	send(t, p, http.MethodPost, PathTraces, sdk, gzipBytes(t, body))

	reqs := p.Requests(EndpointTraces)
	if len(reqs) != 2 {
		t.Fatalf("%d requests logged, want 2", len(reqs))
	}
	if reqs[0].Gzip || !reqs[1].Gzip {
		t.Errorf("gzip per request = %v, %v; want false, true", reqs[0].Gzip, reqs[1].Gzip)
	}
	if reqs[1].BodyBytes == reqs[1].DecodedBytes || reqs[1].DecodedBytes != int64(len(body)) {
		t.Errorf("gzip request: %d bytes sent, %d decoded; want %d decoded", reqs[1].BodyBytes, reqs[1].DecodedBytes, len(body))
	}
	if reqs[0].SDKName != "svc-otelcol" || reqs[0].SDKVersion != "0.1.0" || reqs[0].Spans != 1 {
		t.Errorf("request record %+v lacks the SDK headers or span count", reqs[0])
	}
	if st := p.Stats(); st.GzipRequests != 1 || st.Requests[EndpointTraces][http.StatusOK] != 2 {
		t.Errorf("stats %+v: want 1 gzip request and 2 answered 200", st)
	}
	o, ok := p.Observation(hexTrace(1), hexSpan(1))
	if !ok || o.SDKName != "svc-otelcol" || o.SDKVersion != "0.1.0" {
		t.Errorf("observation %+v does not carry the SDK headers", o)
	}
}

func TestTracesUpsertRedeliveredSpans(t *testing.T) {
	p := startPlatform(t)
	first := testSpan{traceID: 1, spanID: 1, name: "first", attrs: map[string]any{"svc.observation.output": "v1"}}
	sendSpans(t, p, testResource{}, first, testSpan{traceID: 1, spanID: 2, parent: 1, name: "child"})
	resent := first
	resent.attrs = map[string]any{"svc.observation.output": "v2"}
	sendSpans(t, p, testResource{}, resent)
	// Same span id in another trace is another span.
	sendSpans(t, p, testResource{}, testSpan{traceID: 2, spanID: 1, name: "other trace"})

	obs := p.ObservationsByTrace(hexTrace(1))
	if len(obs) != 2 {
		t.Fatalf("trace 1 has %d observations, want 2 (a resent span replaces)", len(obs))
	}
	if obs[0].Output != "v2" || obs[0].Deliveries != 2 {
		t.Errorf("resent span: output %q, deliveries %d; want v2 and 2", obs[0].Output, obs[0].Deliveries)
	}
	if obs[1].ParentObservationID != hexSpan(1) || obs[1].Deliveries != 1 {
		t.Errorf("child: parent %q deliveries %d", obs[1].ParentObservationID, obs[1].Deliveries)
	}
	if n := p.SpanDeliveries(hexTrace(1), hexSpan(1)); n != 2 {
		t.Errorf("SpanDeliveries = %d, want 2", n)
	}
	st := p.Stats()
	want := map[string]int{hexTrace(1) + "/" + hexSpan(1): 2}
	if st.SpansReceived != 4 || st.UniqueSpans != 3 || st.DuplicateSpanDeliveries != 1 || len(st.DuplicatedSpans) != 1 ||
		st.DuplicatedSpans[hexTrace(1)+"/"+hexSpan(1)] != 2 {
		t.Errorf("stats received %d unique %d duplicates %d %v; want 4, 3, 1 %v",
			st.SpansReceived, st.UniqueSpans, st.DuplicateSpanDeliveries, st.DuplicatedSpans, want)
	}
}

func TestTracesWrongMethod(t *testing.T) {
	p := startPlatform(t)
	resp := send(t, p, http.MethodGet, PathTraces, nil, nil)
	if resp.status != http.StatusMethodNotAllowed || resp.header.Get("Allow") != http.MethodPost {
		t.Errorf("GET traces: status %d Allow %q; want 405 and POST", resp.status, resp.header.Get("Allow"))
	}
	if resp := send(t, p, http.MethodGet, "/api/public/nope", nil, nil); resp.status != http.StatusNotFound {
		t.Errorf("unknown path: status %d, want 404", resp.status)
	}
}
