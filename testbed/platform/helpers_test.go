package platform

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

const (
	testPublicKey = "pk-test"
	testSecretKey = "sk-test"
)

// startPlatform starts a platform with the test keys, closed at the end of the test.
func startPlatform(t *testing.T, opts ...func(*Options)) *Platform {
	t.Helper()
	o := Options{PublicKey: testPublicKey, SecretKey: testSecretKey}
	for _, f := range opts {
		f(&o)
	}
	p, err := Start(o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func basicAuth(public, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(public+":"+secret))
}

// response is what a test request got back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// jsonBody decodes the response body as JSON into a generic value.
func (r response) jsonBody(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response body is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}

// send makes one request with the test credentials unless headers set Authorization
// (an empty value removes it).
func send(t *testing.T, p *Platform, method, path string, headers map[string]string, body []byte) response {
	t.Helper()
	resp, err := trySend(p, method, path, headers, body, 10*time.Second)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

func trySend(p *Platform, method, path string, headers map[string]string, body []byte, timeout time.Duration) (response, error) {
	req, err := http.NewRequest(method, p.URL()+path, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Authorization", basicAuth(testPublicKey, testSecretKey))
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	client := &http.Client{Timeout: timeout}
	resp, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

func gzipBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testSpan describes one span of a test payload.
type testSpan struct {
	traceID byte // every byte of the trace id
	spanID  byte // every byte of the span id
	parent  byte // 0: root
	name    string
	attrs   map[string]any
	status  ptrace.StatusCode
}

func traceID(b byte) pcommon.TraceID {
	var id pcommon.TraceID
	for i := range id {
		id[i] = b
	}
	return id
}

func spanID(b byte) pcommon.SpanID {
	var id pcommon.SpanID
	for i := range id {
		id[i] = b
	}
	return id
}

// testResource is the resource and scope the spans of a payload share.
type testResource struct {
	attrs        map[string]any
	scopeName    string
	scopeVersion string
}

var testStart = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func makeTraces(t *testing.T, res testResource, spans ...testSpan) ptrace.Traces {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	if err := rs.Resource().Attributes().FromRaw(res.attrs); err != nil {
		t.Fatal(err)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(res.scopeName)
	ss.Scope().SetVersion(res.scopeVersion)
	for i, s := range spans {
		span := ss.Spans().AppendEmpty()
		if s.traceID != 0 {
			span.SetTraceID(traceID(s.traceID))
		}
		if s.spanID != 0 {
			span.SetSpanID(spanID(s.spanID))
		}
		if s.parent != 0 {
			span.SetParentSpanID(spanID(s.parent))
		}
		span.SetName(s.name)
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(testStart.Add(time.Duration(i) * time.Second)))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(testStart.Add(time.Duration(i)*time.Second + 1500*time.Millisecond)))
		span.Status().SetCode(s.status)
		if err := span.Attributes().FromRaw(s.attrs); err != nil {
			t.Fatal(err)
		}
	}
	return td
}

func protoBody(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	data, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func jsonTracesBody(t *testing.T, td ptrace.Traces) []byte {
	t.Helper()
	data, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var protoHeaders = map[string]string{"Content-Type": "application/x-protobuf"}

// sendSpans posts the spans as protobuf and fails unless the platform answers 200.
func sendSpans(t *testing.T, p *Platform, res testResource, spans ...testSpan) {
	t.Helper()
	resp := send(t, p, http.MethodPost, PathTraces, protoHeaders, protoBody(t, makeTraces(t, res, spans...)))
	if resp.status != http.StatusOK {
		t.Fatalf("traces: status %d: %s", resp.status, resp.body)
	}
}

// sendScores posts a JSON score batch and returns the answer.
func sendScores(t *testing.T, p *Platform, body string) response {
	t.Helper()
	return send(t, p, http.MethodPost, PathScores, map[string]string{"Content-Type": "application/json"}, []byte(body))
}

func hexTrace(b byte) string { return traceID(b).String() }
func hexSpan(b byte) string  { return spanID(b).String() }
