package platform

import (
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
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
		{"missing content type", "", "", proto, http.StatusUnsupportedMediaType, "missing Content-Type"},
		{"text content type", "text/plain", "", proto, http.StatusUnsupportedMediaType, "text/plain"},
		{"protobuf without x-", "application/protobuf", "", proto, http.StatusUnsupportedMediaType, "application/protobuf"},
		{"deflate encoding", "application/x-protobuf", "deflate", proto, http.StatusUnsupportedMediaType, "deflate"},
		{"br encoding", "application/x-protobuf", "br", proto, http.StatusUnsupportedMediaType, "br"},
		{"gzip header on plain body", "application/x-protobuf", "gzip", proto, http.StatusBadRequest, "not gzip"},
		{"truncated gzip", "application/x-protobuf", "gzip", gzipBytes(t, proto)[:20], http.StatusBadRequest, "gzip"},
		{"malformed protobuf", "application/x-protobuf", "", []byte("\xff\xff\xff\xff"), http.StatusBadRequest, "malformed OTLP"},
		{"malformed json", "application/json", "", []byte(`{"resourceSpans":[`), http.StatusBadRequest, "malformed OTLP"},
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

func TestTracesAnswerInTheRequestEncoding(t *testing.T) {
	p := startPlatform(t)
	td := makeTraces(t, testResource{}, oneSpan)
	tests := []struct {
		name        string
		contentType string
		body        []byte
		decode      func(ptraceotlp.ExportResponse, []byte) error
	}{
		{"protobuf", "application/x-protobuf", protoBody(t, td), ptraceotlp.ExportResponse.UnmarshalProto},
		{"json", "application/json", jsonTracesBody(t, td), ptraceotlp.ExportResponse.UnmarshalJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := send(t, p, http.MethodPost, PathTraces, map[string]string{"Content-Type": tt.contentType}, tt.body)
			if resp.status != http.StatusOK {
				t.Fatalf("status %d: %s", resp.status, resp.body)
			}
			if got := resp.header.Get("Content-Type"); got != tt.contentType {
				t.Errorf("answer Content-Type %q, want %q", got, tt.contentType)
			}
			if err := tt.decode(ptraceotlp.NewExportResponse(), resp.body); err != nil {
				t.Errorf("answer is not an ExportTraceServiceResponse: %v", err)
			}
		})
	}
}

func TestTracesRejectSpansWithoutIDsAsPartialSuccess(t *testing.T) {
	p := startPlatform(t)
	td := makeTraces(t, testResource{},
		testSpan{traceID: 1, spanID: 1, name: "ok"},
		testSpan{traceID: 1, name: "no span id"},
		testSpan{spanID: 3, name: "no trace id"},
	)
	resp := send(t, p, http.MethodPost, PathTraces, protoHeaders, protoBody(t, td))
	if resp.status != http.StatusOK {
		t.Fatalf("status %d: %s", resp.status, resp.body)
	}
	answer := ptraceotlp.NewExportResponse()
	if err := answer.UnmarshalProto(resp.body); err != nil {
		t.Fatal(err)
	}
	if got := answer.PartialSuccess().RejectedSpans(); got != 2 {
		t.Errorf("rejected spans %d, want 2", got)
	}
	if answer.PartialSuccess().ErrorMessage() == "" {
		t.Error("partial success has no error message")
	}
	st := p.Stats()
	if st.UniqueSpans != 1 || st.SpansRejected != 2 {
		t.Errorf("stored %d spans and rejected %d, want 1 and 2", st.UniqueSpans, st.SpansRejected)
	}
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
