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
	if r.Header.Get("Content-Type") == contentTypeJSON {
		_ = req.UnmarshalJSON(body)
	} else {
		_ = req.UnmarshalProto(body)
	}
	w.WriteHeader(http.StatusOK)
})

// The cost of the guard on a request of 512 spans, beside the receiver's own decoding in the same
// run: a good request (the common case), and one with a bad span.
func BenchmarkHTTPRequest(b *testing.B) {
	t := &testing.T{}
	good := protoBody(t, makeTraces(512, nil, nil))
	bad := protoBody(t, makeTraces(512, []int{300}, nil))
	goodJSON, _ := ptraceotlp.NewExportRequestFromTraces(makeTraces(512, nil, nil)).MarshalJSON()
	g, err := newGuard(createDefaultConfig(), nopSettings())
	if err != nil {
		b.Fatal(err)
	}
	wrap, _ := g.GetHTTPHandler(context.Background())
	guarded, _ := wrap(context.Background(), decodingReceiver)
	for _, bc := range []struct {
		name, contentType string
		h                 http.Handler
		body              []byte
	}{
		{"receiver only/good", contentTypeProtobuf, decodingReceiver, good},
		{"with guard/good", contentTypeProtobuf, guarded, good},
		{"with guard/one bad span", contentTypeProtobuf, guarded, bad},
		{"receiver only/json good", contentTypeJSON, decodingReceiver, goodJSON},
		{"with guard/json good", contentTypeJSON, guarded, goodJSON},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for i := 0; i < b.N; i++ {
				r := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(bc.body))
				r.Header.Set("Content-Type", bc.contentType)
				bc.h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
}

// The guard's check of a good gRPC request (it arrives decoded: encoded once more, then scanned),
// beside the decoding the gRPC server does for the receiver, in the same run.
func BenchmarkGRPCCheck(b *testing.B) {
	wire, _ := ptraceotlp.NewExportRequestFromTraces(makeTraces(512, nil, nil)).MarshalProto()
	decoded := ptraceotlp.NewExportRequest()
	if err := decoded.UnmarshalProto(wire); err != nil {
		b.Fatal(err)
	}
	b.Run("server decode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			req := ptraceotlp.NewExportRequest()
			_ = req.UnmarshalProto(wire)
		}
	})
	b.Run("guard check", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			body, _ := decoded.MarshalProto()
			if hasInvalidSpan(body) {
				b.Fatal("a good request")
			}
		}
	})
}

func nopSettings() component.TelemetrySettings { return componenttest.NewNopTelemetrySettings() }
