package e2e

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/svc/svc-collector/testbed/platform"
)

// deliveryTap stands between the gateway and the local platform (loopback) and keeps every span of
// the trace exports the platform accepted, as they arrived: the local platform's records keep no
// span events and it does not expose the OTLP it received, while masking and content must be
// judged on everything that reached it, events included.
type deliveryTap struct {
	url string

	mu    sync.Mutex
	spans map[string]deliveredSpan // by trace id + "/" + span id; a redelivery replaces
}

// deliveredSpan is one span as the platform received it.
type deliveredSpan struct {
	Name, StatusMessage string
	Scope               string
	Attributes          map[string]any
	Resource            map[string]any
	Events              []spanEvent
	// Text is every string of the span (name, status, attributes, resource, events, links) as
	// JSON, for the personal-data scan.
	Text string
}

func startDeliveryTap(t *testing.T, p *platform.Platform) *deliveryTap {
	t.Helper()
	target, err := url.Parse(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	tap := &deliveryTap{spans: map[string]deliveredSpan{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != platform.PathTraces {
			proxy.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		proxy.ServeHTTP(rec, r)
		if rec.status/100 == 2 {
			if err := tap.record(r.Header, body); err != nil {
				t.Errorf("delivery tap: a trace export the platform accepted does not decode: %v", err)
			}
		}
	}))
	t.Cleanup(srv.Close)
	tap.url = srv.URL
	return tap
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (tap *deliveryTap) record(h http.Header, body []byte) error {
	if strings.Contains(h.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return err
		}
		if body, err = io.ReadAll(zr); err != nil {
			return err
		}
	}
	req := ptraceotlp.NewExportRequest()
	var err error
	if strings.Contains(h.Get("Content-Type"), "json") {
		err = req.UnmarshalJSON(body)
	} else {
		err = req.UnmarshalProto(body)
	}
	if err != nil {
		return err
	}
	tap.mu.Lock()
	defer tap.mu.Unlock()
	rss := req.Traces().ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		res := rss.At(i).Resource().Attributes().AsRaw()
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				s := spans.At(k)
				d := deliveredSpan{Name: s.Name(), StatusMessage: s.Status().Message(), Scope: sss.At(j).Scope().Name(),
					Attributes: s.Attributes().AsRaw(), Resource: res}
				for e := 0; e < s.Events().Len(); e++ {
					ev := s.Events().At(e)
					d.Events = append(d.Events, spanEvent{Name: ev.Name(), Attributes: ev.Attributes().AsRaw()})
				}
				d.Text = jsonOf([]any{d.Name, d.StatusMessage, d.Attributes, d.Resource, d.Events, linksOf(s)})
				tap.spans[s.TraceID().String()+"/"+s.SpanID().String()] = d
			}
		}
	}
	return nil
}

func linksOf(s ptrace.Span) []map[string]any {
	var out []map[string]any
	for i := 0; i < s.Links().Len(); i++ {
		out = append(out, s.Links().At(i).Attributes().AsRaw())
	}
	return out
}

// span returns the span with these ids as the platform received it last.
func (tap *deliveryTap) span(traceID, spanID string) (deliveredSpan, bool) {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	d, ok := tap.spans[traceID+"/"+spanID]
	return d, ok
}

// counts is how many distinct spans the platform accepted, and how many span events they carry.
func (tap *deliveryTap) counts() (spans, events int) {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	for _, d := range tap.spans {
		events += len(d.Events)
	}
	return len(tap.spans), events
}

// startDirectExport gives the clients an OTLP/HTTP endpoint that passes every request on to the
// gateway and, for trace exports, also sends the same body to the platform `direct` as a direct
// export would (Basic auth, no gateway), so that what a direct export shows is the platform's own
// record of the client's spans. It returns the endpoint's base URL.
func startDirectExport(t *testing.T, gatewayOTLPHTTP string, direct *platform.Platform) string {
	t.Helper()
	target, err := url.Parse("http://" + gatewayOTLPHTTP)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, direct.URL()+platform.PathTraces, bytes.NewReader(body))
			if err != nil {
				t.Errorf("direct export: %v", err)
			} else {
				for _, h := range []string{"Content-Type", "Content-Encoding"} {
					req.Header.Set(h, r.Header.Get(h))
				}
				req.SetBasicAuth(testPublicKey, testSecretKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("direct export: %v", err)
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode/100 != 2 {
						t.Errorf("direct export: the platform answered %s", resp.Status)
					}
				}
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
