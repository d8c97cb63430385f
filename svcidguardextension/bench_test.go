package svcidguardextension

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// decodingReceiver decodes each request as the otlp receiver does and answers 200: the baseline
// cost of a request without the guard.
var decodingReceiver = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := ptraceotlp.NewExportRequest()
	_ = req.UnmarshalProto(body)
	w.WriteHeader(http.StatusOK)
})

// The cost of the guard on a request of 512 spans, beside the receiver's own decoding in the same
// run: a good request (the common case), and one with a bad span.
func BenchmarkHTTPRequest(b *testing.B) {
	t := &testing.T{}
	good := protoBody(t, makeTraces(512, nil, nil))
	bad := protoBody(t, makeTraces(512, []int{300}, nil))
	g, err := newGuard(createDefaultConfig(), nopSettings())
	if err != nil {
		b.Fatal(err)
	}
	wrap, _ := g.GetHTTPHandler(context.Background())
	guarded, _ := wrap(context.Background(), decodingReceiver)
	for _, bc := range []struct {
		name string
		h    http.Handler
		body []byte
	}{
		{"receiver only/good", decodingReceiver, good},
		{"with guard/good", guarded, good},
		{"with guard/one bad span", guarded, bad},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for i := 0; i < b.N; i++ {
				r := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(bc.body))
				r.Header.Set("Content-Type", contentTypeProtobuf)
				bc.h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
}

func nopSettings() component.TelemetrySettings { return componenttest.NewNopTelemetrySettings() }
