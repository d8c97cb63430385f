package platform

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestStartValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		message string
	}{
		{"all interfaces", Options{Addr: ":0", PublicKey: "pk", SecretKey: "sk"}, "not a loopback"},
		{"any address", Options{Addr: "0.0.0.0:0", PublicKey: "pk", SecretKey: "sk"}, "not a loopback"},
		{"no port", Options{Addr: "127.0.0.1", PublicKey: "pk", SecretKey: "sk"}, "listen address"},
		{"no public key", Options{SecretKey: "sk"}, "PublicKey and SecretKey are required"},
		{"no secret key", Options{PublicKey: "pk"}, "PublicKey and SecretKey are required"},
		{"negative body limit", Options{PublicKey: "pk", SecretKey: "sk", MaxBodyBytes: -1}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Start(tt.opts)
			if err == nil {
				_ = p.Close()
				t.Fatal("Start accepted the options")
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %q does not say %q", err, tt.message)
			}
		})
	}
}

func TestStartDefaultsAndClose(t *testing.T) {
	p, err := Start(Options{PublicKey: "pk", SecretKey: "sk"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.URL(), "http://127.0.0.1:") || p.Version() != DefaultVersion {
		t.Errorf("URL %q version %q", p.URL(), p.Version())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := http.Get(p.URL() + PathHealth); err == nil {
		t.Error("the platform still answers after Close")
	}
}

func TestWaitHelpers(t *testing.T) {
	p := startPlatform(t)
	done := make(chan error, 2)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- p.WaitForSpans(ctx, 2)
	}()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- p.WaitForScores(ctx, 1)
	}()
	sendSpans(t, p, testResource{}, testSpan{traceID: 1, spanID: 1, name: "a"})
	sendSpans(t, p, testResource{}, testSpan{traceID: 1, spanID: 2, name: "b"})
	sendScores(t, p, scoresJSON(1, "w"))
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := p.WaitForSpans(ctx, 3)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "2 of 3 spans") {
		t.Errorf("WaitForSpans past the deadline: %v; want a deadline error that says 2 of 3 spans", err)
	}
}

func TestStatsOnlyKeepsCountsNotContent(t *testing.T) {
	p := startPlatform(t, func(o *Options) { o.StatsOnly = true })
	sendSpans(t, p, testResource{}, testSpan{traceID: 1, spanID: 1, name: "a"}, testSpan{traceID: 1, spanID: 2, name: "b"})
	sendSpans(t, p, testResource{}, testSpan{traceID: 1, spanID: 1, name: "a"})
	sendScores(t, p, `[{"id":"s","traceId":"t","name":"q","value":1}]`)
	sendScores(t, p, `[{"id":"s","traceId":"t","name":"q","value":1}]`)
	st := p.Stats()
	if st.UniqueSpans != 2 || st.SpansReceived != 3 || p.SpanDeliveries(hexTrace(1), hexSpan(1)) != 2 || st.ScoreDeliveries["s"] != 2 {
		t.Errorf("stats %+v", st)
	}
	if obs := p.Observations(ObservationFilter{}); len(obs) != 0 {
		t.Errorf("StatsOnly stored %d observations", len(obs))
	}
	if s, _ := p.Score("s"); s.Name != "" || s.Deliveries != 2 {
		t.Errorf("StatsOnly score %+v: want the id and deliveries only", s)
	}
}

// A span's arrival time is its first delivery's, also when the platform keeps ids only: a
// redelivery counts but does not move it.
func TestSpanArrivalIsTheFirstDelivery(t *testing.T) {
	p := startPlatform(t, func(o *Options) { o.StatsOnly = true })
	before := time.Now()
	sendSpans(t, p, testResource{}, testSpan{traceID: 1, spanID: 1, name: "a"})
	between := time.Now()
	sendSpans(t, p, testResource{}, testSpan{traceID: 1, spanID: 1, name: "a"}, testSpan{traceID: 1, spanID: 2, name: "b"})
	after := time.Now()
	for _, tc := range []struct {
		span       byte
		deliveries int
		from, to   time.Time
	}{
		{span: 1, deliveries: 2, from: before, to: between},
		{span: 2, deliveries: 1, from: between, to: after},
		{span: 3},
	} {
		n, first := p.SpanArrival(hexTrace(1), hexSpan(tc.span))
		if n != tc.deliveries {
			t.Errorf("span %d: %d deliveries, want %d", tc.span, n, tc.deliveries)
		}
		if n == 0 {
			if !first.IsZero() {
				t.Errorf("span %d never arrived but has an arrival time %v", tc.span, first)
			}
			continue
		}
		if first.Before(tc.from) || first.After(tc.to) {
			t.Errorf("span %d: first arrival %v, want within [%v, %v]", tc.span, first, tc.from, tc.to)
		}
	}
}

func TestConcurrentSenders(t *testing.T) {
	p := startPlatform(t)
	const senders, batches = 4, 5
	bodies := make([][]byte, senders*batches)
	for i := range bodies {
		id := byte(i + 1)
		bodies[i] = protoBody(t, makeTraces(t, testResource{}, testSpan{traceID: id, spanID: 1, name: "x"}, testSpan{traceID: id, spanID: 2, name: "y"}))
	}
	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			for b := 0; b < batches; b++ {
				body := bodies[s*batches+b]
				if resp, err := trySend(p, http.MethodPost, PathTraces, protoHeaders, body, 10*time.Second); err != nil || resp.status != http.StatusOK {
					t.Errorf("sender %d: %v", s, err)
				}
			}
		}(s)
	}
	wg.Wait()
	if st := p.Stats(); st.UniqueSpans != 2*senders*batches || len(p.TraceIDs()) != senders*batches {
		t.Errorf("%d spans in %d traces, want %d in %d", st.UniqueSpans, len(p.TraceIDs()), 2*senders*batches, senders*batches)
	}
}
