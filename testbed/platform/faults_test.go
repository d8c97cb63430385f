package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// requestTo sends one valid request to the endpoint and returns the answer or the error.
func requestTo(t *testing.T, p *Platform, ep Endpoint, timeout time.Duration) (response, error) {
	t.Helper()
	switch ep {
	case EndpointTraces:
		return trySend(p, http.MethodPost, PathTraces, protoHeaders, protoBody(t, makeTraces(t, testResource{}, oneSpan)), timeout)
	case EndpointScores:
		return trySend(p, http.MethodPost, PathScores, map[string]string{"Content-Type": "application/json"}, []byte(scoresJSON(1, "f")), timeout)
	case EndpointHealth:
		return trySend(p, http.MethodGet, PathHealth, nil, nil, timeout)
	}
	t.Fatalf("no request for %s", ep)
	return response{}, nil
}

func TestFaultStatus(t *testing.T) {
	tests := []struct {
		name       string
		fault      Fault
		requests   int // sent while the fault is set
		faulted    int // of them answered with the fault
		retryAfter string
	}{
		{"503 for the next 2", Fault{Status: 503, Times: 2}, 3, 2, ""},
		{"429 with Retry-After once", Fault{Status: 429, RetryAfter: 3, Times: 1}, 2, 1, "3"},
		{"500 until cleared", Fault{Status: 500}, 4, 4, ""},
		{"413 once", Fault{Status: 413, Times: 1}, 2, 1, ""},
	}
	for _, ep := range []Endpoint{EndpointTraces, EndpointScores, EndpointHealth} {
		for _, tt := range tests {
			t.Run(string(ep)+"/"+tt.name, func(t *testing.T) {
				p := startPlatform(t)
				if err := p.SetFault(ep, tt.fault); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < tt.requests; i++ {
					resp, err := requestTo(t, p, ep, 10*time.Second)
					if err != nil {
						t.Fatal(err)
					}
					want := http.StatusOK
					if i < tt.faulted {
						want = tt.fault.Status
					}
					if resp.status != want {
						t.Fatalf("request %d: status %d, want %d", i, resp.status, want)
					}
					if i < tt.faulted && resp.header.Get("Retry-After") != tt.retryAfter {
						t.Errorf("request %d: Retry-After %q, want %q", i, resp.header.Get("Retry-After"), tt.retryAfter)
					}
				}
				p.ClearFault(ep)
				if resp, _ := requestTo(t, p, ep, 10*time.Second); resp.status != http.StatusOK {
					t.Errorf("after ClearFault: status %d", resp.status)
				}
				st := p.Stats()
				if st.Requests[ep][tt.fault.Status] != tt.faulted {
					t.Errorf("stats count %d answers %d, want %d", st.Requests[ep][tt.fault.Status], tt.fault.Status, tt.faulted)
				}
				if ep == EndpointTraces && st.SpansReceived != tt.requests-tt.faulted+1 {
					t.Errorf("%d span deliveries stored; faulted requests must store nothing", st.SpansReceived)
				}
			})
		}
	}
}

func TestFaultDelay(t *testing.T) {
	p := startPlatform(t)
	if err := p.SetFault(EndpointTraces, Fault{Delay: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := requestTo(t, p, EndpointTraces, 200*time.Millisecond); err == nil {
		t.Fatal("a client that waits less than the delay got an answer")
	}
	// The platform notices the client gave up and stores nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.WaitUntil(ctx, func() bool { return len(p.Requests(EndpointTraces)) == 1 }); err != nil {
		t.Fatal("the abandoned request was not logged:", err)
	}
	if rec := p.Requests(EndpointTraces)[0]; rec.Fault != "delay" || p.Stats().SpansReceived != 0 {
		t.Errorf("abandoned request %+v; stored %d spans", rec, p.Stats().SpansReceived)
	}
	// A short delay for one request only: the request goes through.
	if err := p.SetFault(EndpointTraces, Fault{Delay: 10 * time.Millisecond, Times: 1}); err != nil {
		t.Fatal(err)
	}
	if resp, err := requestTo(t, p, EndpointTraces, 10*time.Second); err != nil || resp.status != http.StatusOK {
		t.Fatalf("delayed request: %v %d", err, resp.status)
	}
	if len(p.Faults()) != 0 {
		t.Errorf("faults %v left after their one request", p.Faults())
	}
}

func TestFaultDrop(t *testing.T) {
	for _, ep := range []Endpoint{EndpointTraces, EndpointScores, EndpointHealth} {
		t.Run(string(ep), func(t *testing.T) {
			p := startPlatform(t)
			if err := p.SetFault(ep, Fault{Drop: true, Times: 1}); err != nil {
				t.Fatal(err)
			}
			if resp, err := requestTo(t, p, ep, 10*time.Second); err == nil {
				t.Fatalf("dropped request got an answer: %d", resp.status)
			}
			if resp, err := requestTo(t, p, ep, 10*time.Second); err != nil || resp.status != http.StatusOK {
				t.Fatalf("request after the drop: %v", err)
			}
			st := p.Stats()
			if st.Requests[ep][0] != 1 || st.SpansReceived+st.ScoresReceived > 1 {
				t.Errorf("stats %+v: want one dropped request and nothing stored by it", st)
			}
		})
	}
}

func TestFaultDropAfterStoreMakesRetriesDuplicates(t *testing.T) {
	p := startPlatform(t)
	for _, ep := range []Endpoint{EndpointTraces, EndpointScores} {
		if err := p.SetFault(ep, Fault{DropAfterStore: true, Times: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := requestTo(t, p, ep, 10*time.Second); err == nil {
			t.Fatalf("%s: the answer was not dropped", ep)
		}
		// The client, seeing no answer, retries the same payload.
		if resp, err := requestTo(t, p, ep, 10*time.Second); err != nil || resp.status != http.StatusOK {
			t.Fatalf("%s retry: %v", ep, err)
		}
	}
	st := p.Stats()
	if st.UniqueSpans != 1 || st.SpansReceived != 2 || st.DuplicatedSpans[hexTrace(1)+"/"+hexSpan(1)] != 2 {
		t.Errorf("spans: unique %d received %d duplicated %v; want one span delivered twice", st.UniqueSpans, st.SpansReceived, st.DuplicatedSpans)
	}
	if st.UniqueScores != 1 || st.ScoreDeliveries["f-0"] != 2 {
		t.Errorf("scores: unique %d deliveries %v; want f-0 delivered twice", st.UniqueScores, st.ScoreDeliveries)
	}
	if recs := p.Requests(EndpointTraces); !recs[0].Dropped || recs[0].Fault != "dropAfterStore" || recs[0].Status != 0 {
		t.Errorf("request record %+v", recs[0])
	}
}

func TestFaultBodyLimits(t *testing.T) {
	// Highly compressible spans: the gzip body is far smaller than the decompressed one.
	var spans []testSpan
	for i := 1; i <= 50; i++ {
		spans = append(spans, testSpan{traceID: 1, spanID: byte(i), name: "s", attrs: map[string]any{"svc.observation.input": strings.Repeat("a", 1000)}})
	}
	plain := protoBody(t, makeTraces(t, testResource{}, spans...))
	zipped := gzipBytes(t, plain)
	if len(zipped)*10 > len(plain) {
		t.Fatalf("test payload compresses to %d of %d bytes; the cases need a big gap", len(zipped), len(plain))
	}
	between := int64(len(plain) / 2) // above the gzip size, below the decompressed size
	tests := []struct {
		name   string
		fault  Fault
		gzip   bool
		status int
	}{
		{"wire limit, gzip body fits", Fault{MaxBodyBytes: between}, true, http.StatusOK},
		{"wire limit, plain body too big", Fault{MaxBodyBytes: between}, false, http.StatusRequestEntityTooLarge},
		{"decompressed limit, gzip body too big", Fault{MaxDecompressedBytes: between}, true, http.StatusRequestEntityTooLarge},
		{"decompressed limit, plain body too big", Fault{MaxDecompressedBytes: between}, false, http.StatusRequestEntityTooLarge},
		{"limit at the exact size", Fault{MaxBodyBytes: int64(len(plain))}, false, http.StatusOK},
		{"one byte less", Fault{MaxBodyBytes: int64(len(plain)) - 1}, false, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startPlatform(t)
			if err := p.SetFault(EndpointTraces, tt.fault); err != nil {
				t.Fatal(err)
			}
			headers, body := map[string]string{"Content-Type": "application/x-protobuf"}, plain
			if tt.gzip {
				headers["Content-Encoding"], body = "gzip", zipped
			}
			resp := send(t, p, http.MethodPost, PathTraces, headers, body)
			if resp.status != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tt.status, resp.body)
			}
			if stored := p.Stats().UniqueSpans; (tt.status == http.StatusOK) != (stored == len(spans)) {
				t.Errorf("%d spans stored with status %d", stored, resp.status)
			}
		})
	}
}

func TestPlatformBodyLimit(t *testing.T) {
	p := startPlatform(t, func(o *Options) { o.MaxBodyBytes = 100 })
	resp := sendScores(t, p, scoresJSON(5, "big"))
	if resp.status != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413 above Options.MaxBodyBytes", resp.status)
	}
}

func TestDown(t *testing.T) {
	p := startPlatform(t)
	sendSpans(t, p, testResource{}, oneSpan)

	if err := p.SetDown(DownRefuse); err != nil {
		t.Fatal(err)
	}
	for _, ep := range []Endpoint{EndpointTraces, EndpointScores, EndpointHealth} {
		if resp, err := requestTo(t, p, ep, 10*time.Second); err != nil || resp.status != http.StatusServiceUnavailable {
			t.Errorf("%s while down (refuse): %v status %d, want 503", ep, err, resp.status)
		}
	}
	if resp := send(t, p, http.MethodGet, PathObservations, nil, nil); resp.status != http.StatusServiceUnavailable {
		t.Errorf("read API while down: status %d, want 503", resp.status)
	}

	if err := p.SetDown(DownDrop); err != nil {
		t.Fatal(err)
	}
	for _, ep := range []Endpoint{EndpointTraces, EndpointHealth} {
		if resp, err := requestTo(t, p, ep, 10*time.Second); err == nil {
			t.Errorf("%s while down (drop): got status %d, want no answer", ep, resp.status)
		}
	}
	if resp, err := trySend(p, http.MethodGet, PathControlStats, nil, nil, 10*time.Second); err != nil || resp.status != http.StatusOK {
		t.Errorf("control API during an outage: %v %d", err, resp.status)
	}

	if err := p.SetDown(Up); err != nil {
		t.Fatal(err)
	}
	if resp, _ := requestTo(t, p, EndpointTraces, 10*time.Second); resp.status != http.StatusOK {
		t.Errorf("after the outage: status %d", resp.status)
	}
	if st := p.Stats(); st.UniqueSpans != 1 || st.SpansReceived != 2 {
		t.Errorf("outage stored data: %+v", st)
	}
	if err := p.SetDown("sideways"); err == nil {
		t.Error("SetDown accepted an unknown mode")
	}
}

func TestFaultValidation(t *testing.T) {
	p := startPlatform(t)
	tests := []struct {
		name     string
		endpoint Endpoint
		fault    Fault
		message  string
	}{
		{"unknown endpoint", "ingestion", Fault{Status: 500}, "unknown endpoint"},
		{"empty fault", EndpointTraces, Fault{Times: 2}, "does nothing"},
		{"success status", EndpointTraces, Fault{Status: 200}, "not an error status"},
		{"negative delay", EndpointTraces, Fault{Delay: -time.Second}, "negative"},
		{"retry-after alone", EndpointTraces, Fault{RetryAfter: 2}, "needs a status"},
		{"drop and status", EndpointTraces, Fault{Drop: true, Status: 503}, "drop excludes"},
		{"status and drop after store", EndpointScores, Fault{Status: 503, DropAfterStore: true}, "excludes dropAfterStore"},
		{"size limit on health", EndpointHealth, Fault{MaxBodyBytes: 10}, "traces and scores"},
		{"drop after store on health", EndpointHealth, Fault{DropAfterStore: true}, "traces and scores"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.SetFault(tt.endpoint, tt.fault)
			if err == nil || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %v, want one saying %q", err, tt.message)
			}
		})
	}
	if len(p.Faults()) != 0 {
		t.Errorf("invalid faults were set: %v", p.Faults())
	}
}

func TestVersionAndReset(t *testing.T) {
	p := startPlatform(t)
	if err := p.SetVersion("4.58.9"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := requestTo(t, p, EndpointHealth, 10*time.Second); !strings.Contains(string(resp.body), `"version":"4.58.9"`) {
		t.Errorf("health after SetVersion: %s", resp.body)
	}
	sendSpans(t, p, testResource{}, oneSpan)
	sendScores(t, p, scoresJSON(2, "r"))
	_ = p.SetFault(EndpointScores, Fault{Status: 500})

	p.Reset()
	st := p.Stats()
	if st.UniqueSpans != 0 || st.UniqueScores != 0 || len(st.Requests) != 0 || len(p.Faults()) != 0 ||
		p.Version() != DefaultVersion || len(p.Observations(ObservationFilter{})) != 0 || len(p.Requests("")) != 0 {
		t.Errorf("after Reset: stats %+v, faults %v, version %s", st, p.Faults(), p.Version())
	}
}

// control calls the control API and decodes its JSON answer.
func control(t *testing.T, p *Platform, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, p.URL()+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("%s %s: answer is not JSON: %v", method, path, err)
	}
	return resp.StatusCode, m
}

func TestControlAPI(t *testing.T) {
	p := startPlatform(t)
	steps := []struct {
		method, path, body string
		status             int
		check              func(t *testing.T, answer map[string]any)
	}{
		{"POST", PathControlFaults, `{"endpoint":"traces","status":503,"retryAfter":2,"times":1,"delay":"5ms"}`, 200, func(t *testing.T, a map[string]any) {
			f := p.Faults()[EndpointTraces]
			if f.Status != 503 || f.RetryAfter != 2 || f.Times != 1 || f.Delay != 5*time.Millisecond {
				t.Errorf("fault set by the control API: %+v", f)
			}
			if fmt.Sprint(a["faults"]) != "[map[delay:5ms endpoint:traces retryAfter:2 status:503 times:1]]" {
				t.Errorf("state %v", a)
			}
		}},
		{"POST", PathControlFaults, `{"endpoint":"scores","maxBodyBytes":100,"dropAfterStore":true}`, 200, func(t *testing.T, _ map[string]any) {
			if f := p.Faults()[EndpointScores]; f.MaxBodyBytes != 100 || !f.DropAfterStore {
				t.Errorf("scores fault %+v", f)
			}
		}},
		{"POST", PathControlFaults, `{"endpoint":"traces","stauts":503}`, 400, nil},
		{"POST", PathControlFaults, `{"endpoint":"traces","delay":"soon"}`, 400, nil},
		{"POST", PathControlFaults, `{"endpoint":"nowhere","status":503}`, 400, nil},
		{"GET", PathControlFaults, "", 200, func(t *testing.T, a map[string]any) {
			if n := len(a["faults"].([]any)); n != 2 {
				t.Errorf("%d faults listed, want 2", n)
			}
		}},
		{"DELETE", PathControlFaults + "?endpoint=scores", "", 200, func(t *testing.T, _ map[string]any) {
			if _, ok := p.Faults()[EndpointScores]; ok || len(p.Faults()) != 1 {
				t.Errorf("faults after clearing scores: %v", p.Faults())
			}
		}},
		{"DELETE", PathControlFaults, "", 200, func(t *testing.T, _ map[string]any) {
			if len(p.Faults()) != 0 {
				t.Errorf("faults after clearing all: %v", p.Faults())
			}
		}},
		{"POST", PathControlDown, `{"mode":"refuse"}`, 200, func(t *testing.T, _ map[string]any) {
			if p.Down() != DownRefuse {
				t.Errorf("down mode %q", p.Down())
			}
		}},
		{"POST", PathControlDown, `{}`, 400, nil},
		{"DELETE", PathControlDown, "", 200, func(t *testing.T, _ map[string]any) {
			if p.Down() != Up {
				t.Errorf("down mode %q after DELETE", p.Down())
			}
		}},
		{"POST", PathControlVersion, `{"version":"4.50.0"}`, 200, func(t *testing.T, a map[string]any) {
			if p.Version() != "4.50.0" || a["version"] != "4.50.0" {
				t.Errorf("version %q, answer %v", p.Version(), a)
			}
		}},
		{"POST", PathControlVersion, `{"version":""}`, 400, nil},
		{"GET", PathControlStats, "", 200, func(t *testing.T, a map[string]any) {
			if _, ok := a["uniqueSpans"]; !ok {
				t.Errorf("stats answer %v", a)
			}
		}},
		{"POST", PathControlReset, "", 200, func(t *testing.T, _ map[string]any) {
			if p.Version() != DefaultVersion {
				t.Errorf("version %q after reset", p.Version())
			}
		}},
		{"GET", PathControlReset, "", 405, nil},
		{"GET", "/_testbed/nothing", "", 404, nil},
	}
	for i, s := range steps {
		status, answer := control(t, p, s.method, s.path, s.body)
		if status != s.status {
			t.Fatalf("step %d %s %s %s: status %d, want %d: %v", i, s.method, s.path, s.body, status, s.status, answer)
		}
		if s.check != nil {
			s.check(t, answer)
		}
	}
}

func TestControlFaultTakesEffect(t *testing.T) {
	p := startPlatform(t)
	if status, _ := control(t, p, "POST", PathControlFaults, `{"endpoint":"traces","status":429,"retryAfter":7,"times":1}`); status != 200 {
		t.Fatalf("status %d", status)
	}
	resp, err := requestTo(t, p, EndpointTraces, 10*time.Second)
	if err != nil || resp.status != http.StatusTooManyRequests || resp.header.Get("Retry-After") != "7" {
		t.Fatalf("first request: %v status %d Retry-After %q", err, resp.status, resp.header.Get("Retry-After"))
	}
	if resp, _ := requestTo(t, p, EndpointTraces, 10*time.Second); resp.status != http.StatusOK {
		t.Errorf("second request: status %d", resp.status)
	}
	status, stats := control(t, p, "GET", PathControlStats, "")
	if status != 200 || fmt.Sprint(stats["requests"]) != "map[traces:map[200:1 429:1]]" {
		t.Errorf("stats %v", stats["requests"])
	}
}

// RefuseSpansWithAttribute: 400 to any request holding a marked span, nothing of it stored; a
// request without one is stored as usual.
func TestFaultRefuseSpansWithAttribute(t *testing.T) {
	p := startPlatform(t)
	if err := p.SetFault(EndpointTraces, Fault{RefuseSpansWithAttribute: "test.unreadable"}); err != nil {
		t.Fatal(err)
	}
	marked := makeTraces(t, testResource{}, testSpan{traceID: 1, spanID: 1, name: "good"},
		testSpan{traceID: 1, spanID: 2, name: "bad", attrs: map[string]any{"test.unreadable": true}})
	if resp := send(t, p, http.MethodPost, PathTraces, protoHeaders, protoBody(t, marked)); resp.status != http.StatusBadRequest {
		t.Fatalf("marked batch: status %d, want 400", resp.status)
	}
	clean := makeTraces(t, testResource{}, testSpan{traceID: 1, spanID: 1, name: "good"})
	if resp := send(t, p, http.MethodPost, PathTraces, protoHeaders, protoBody(t, clean)); resp.status != http.StatusOK {
		t.Fatalf("clean batch: status %d, want 200", resp.status)
	}
	if st := p.Stats(); st.UniqueSpans != 1 {
		t.Errorf("stored %d spans, want only the clean batch's one", st.UniqueSpans)
	}
	if err := p.SetFault(EndpointScores, Fault{RefuseSpansWithAttribute: "x"}); err == nil {
		t.Error("refuseSpansWithAttribute on scores must be refused")
	}
	fr := faultRequestOf(EndpointTraces, Fault{RefuseSpansWithAttribute: "k"})
	if f, err := fr.fault(); err != nil || f.RefuseSpansWithAttribute != "k" {
		t.Errorf("control API round trip: %+v %v", f, err)
	}
}
