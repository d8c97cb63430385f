package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/svc/svc-collector/testbed/bench"
	"github.com/svc/svc-collector/testbed/loadgen"
	"github.com/svc/svc-collector/testbed/platform"
)

// The fault tests put svc-otelcol with the default gateway configuration under the load
// generator's workload while the platform (or the collector itself) misbehaves, then account
// for every span and score: each prints
//
//	fault <name>: sent=N accepted=N delivered=N lost=N duplicated=N | ...
//
// (spans first; the scores' figures follow on the same line) and fails when an accepted span
// or score was lost or delivered twice, except where the case says otherwise. They share the
// load runs' rig (testbed/bench): collector via testbed/collector, load via testbed/loadgen,
// counts via the platform's statistics.
//
// `make test` runs the short version (about two minutes); `make faults` sets SVC_FAULTS=long:
// a 60-second outage instead of 30, and longer loads.

// faultsLong is SVC_FAULTS=long.
func faultsLong() bool { return os.Getenv("SVC_FAULTS") == "long" }

// longer returns the long-mode duration when SVC_FAULTS=long, else the short one.
func longer(short, long time.Duration) time.Duration {
	if faultsLong() {
		return long
	}
	return short
}

// faultWorkload is the fault tests' traffic: the load runs' workload with smaller LLM input and
// output (1–8 KiB), so that a load the machine easily carries still fills queues and batches.
func faultWorkload(t *testing.T, opts loadgen.WorkloadOptions) *loadgen.Workload {
	t.Helper()
	opts.Seed = 6
	opts.Templates = 32
	opts.IOMinBytes, opts.IOMaxBytes = 1<<10, 8<<10
	w, err := loadgen.NewWorkload(opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// startFaultRig starts the platform and svc-otelcol with the default config (plus opts'
// overrides); the collector is stopped (SIGTERM) and its output logged on failure at the end.
func startFaultRig(t *testing.T, opts bench.RigOptions) *bench.Rig {
	t.Helper()
	return startFaultRigOf(t, bench.Gateway(collectorBinary(t)), opts)
}

// startFaultRigOf is startFaultRig with another build (another config) than the default.
func startFaultRigOf(t *testing.T, build bench.Build, opts bench.RigOptions) *bench.Rig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rig, err := bench.StartRig(ctx, build, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rig.Close(); err != nil {
			t.Errorf("stop: %v", err)
		}
		if t.Failed() {
			t.Logf("collector output:\n%s", rig.Collector.Logs())
		}
	})
	return rig
}

// runLoad runs the load generator against the rig's collector and returns what became of
// each request. It may run beside the test's goroutine.
func runLoad(rig *bench.Rig, w *loadgen.Workload, protocol string, opts loadgen.RunOptions) (loadgen.Result, error) {
	s, err := rig.Sender(protocol)
	if err != nil {
		return loadgen.Result{}, err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opts.Duration+time.Minute)
	defer cancel()
	return loadgen.Run(ctx, w, s, opts)
}

// sendLoad is runLoad from the test's goroutine.
func sendLoad(t *testing.T, rig *bench.Rig, w *loadgen.Workload, protocol string, opts loadgen.RunOptions) loadgen.Result {
	t.Helper()
	res, err := runLoad(rig, w, protocol, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// settleAndReport waits up to timeout for everything accepted to arrive, prints the case's
// line and returns the account.
func settleAndReport(t *testing.T, name string, rig *bench.Rig, w *loadgen.Workload, timeout time.Duration, results ...loadgen.Result) bench.Account {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	a := bench.Settle(ctx, rig.Platform, w, rig.Build, results...)
	line := a.Line("fault " + name)
	fmt.Println(line)
	t.Log(line)
	return a
}

// requireNoLoss fails when an accepted span or score is missing, or (unless duplicatesAllowed)
// arrived more than once, or when the load was not accepted at all (a test that sent nothing
// proves nothing).
func requireNoLoss(t *testing.T, a bench.Account, duplicatesAllowed bool) {
	t.Helper()
	if a.Spans.Accepted == 0 || a.Spans.Expected == 0 || a.Scores.Expected == 0 {
		t.Fatalf("nothing to account for: %d spans accepted, %d expected, %d scores expected", a.Spans.Accepted, a.Spans.Expected, a.Scores.Expected)
	}
	if a.Spans.Lost != 0 || a.Scores.Lost != 0 {
		t.Errorf("lost %d of %d accepted spans and %d of %d scores", a.Spans.Lost, a.Spans.Expected, a.Scores.Lost, a.Scores.Expected)
	}
	if !duplicatesAllowed && (a.Spans.Duplicated != 0 || a.Scores.Duplicated != 0) {
		t.Errorf("delivered %d spans and %d scores more than once", a.Spans.Duplicated, a.Scores.Duplicated)
	}
}

// statuses counts the platform's answers on an endpoint by status code.
func statuses(p *platform.Platform, endpoint platform.Endpoint) map[int]int {
	return p.Stats().Requests[endpoint]
}

// TestFaultPlatformOutage: the platform is down for 30 s (60 s long) while load keeps coming:
// first answering 503 to everything, then closing every connection unanswered. The collector
// keeps accepting into its queue and delivers everything once the platform is back (the
// issue-2 requirement: a 30-second outage under load loses no span).
func TestFaultPlatformOutage(t *testing.T) {
	rig := startFaultRig(t, bench.RigOptions{})
	w := faultWorkload(t, loadgen.WorkloadOptions{})
	outage := longer(30*time.Second, 60*time.Second)
	const before, after = 3 * time.Second, 5 * time.Second

	var wg sync.WaitGroup
	var res loadgen.Result
	var loadErr error
	wg.Go(func() {
		res, loadErr = runLoad(rig, w, loadgen.ProtocolHTTP, loadgen.RunOptions{Rate: 300, Duration: before + outage + after, RequestSpans: 256})
	})
	time.Sleep(before)
	if err := rig.Platform.SetDown(platform.DownRefuse); err != nil {
		t.Fatal(err)
	}
	time.Sleep(outage / 2)
	if err := rig.Platform.SetDown(platform.DownDrop); err != nil {
		t.Fatal(err)
	}
	time.Sleep(outage / 2)
	if err := rig.Platform.SetDown(platform.Up); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if loadErr != nil {
		t.Fatal(loadErr)
	}

	if res.Refused.Requests+res.Failed.Requests != 0 {
		t.Errorf("the collector turned the sender away during the outage: %v", res.Statuses)
	}
	// After the outage the exporter's backoff may wait up to its 30 s maximum interval.
	a := settleAndReport(t, "platform-outage-"+outage.String(), rig, w, 2*time.Minute, res)
	requireNoLoss(t, a, false)
	if st := statuses(rig.Platform, platform.EndpointTraces); st[http.StatusServiceUnavailable] == 0 || st[0] == 0 {
		t.Errorf("the outage did not turn the collector's requests away (503 and dropped): %v", st)
	}
}

// TestFaultKillAndRestart: the collector with the default config (its queue on disk,
// svc_file_storage) accepts load while the platform is down, is killed with SIGKILL, and is started
// again on the same directory with the platform back up. Everything it accepted arrives, all of
// it from the queue on disk (nothing had arrived before the kill). Requests in flight to the
// platform at a kill may be sent again (at-least-once): they would count as duplicated, not
// lost, and the platform upserts them; with the platform down nothing is in flight, so none are
// expected here.
func TestFaultKillAndRestart(t *testing.T) {
	rig := startFaultRig(t, bench.RigOptions{})
	w := faultWorkload(t, loadgen.WorkloadOptions{})
	if err := rig.Platform.SetDown(platform.DownRefuse); err != nil {
		t.Fatal(err)
	}
	res := sendLoad(t, rig, w, loadgen.ProtocolGRPC, loadgen.RunOptions{Rate: 1000, Duration: longer(4*time.Second, 20*time.Second), RequestSpans: 256})
	if res.Accepted.Requests != res.Sent.Requests {
		t.Fatalf("the collector did not accept the load: %v", res.Statuses)
	}
	time.Sleep(time.Second) // the exporter retries against the outage meanwhile
	rig.Collector.Kill()
	before := rig.Platform.Stats()

	if err := rig.Platform.SetDown(platform.Up); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := rig.StartCollector(ctx); err != nil {
		t.Fatal(err)
	}
	a := settleAndReport(t, "kill-and-restart", rig, w, time.Minute, res)
	requireNoLoss(t, a, true)
	if before.UniqueSpans != 0 || before.UniqueScores != 0 {
		t.Errorf("%d spans and %d scores arrived before the kill: the platform was not down", before.UniqueSpans, before.UniqueScores)
	}
}

// TestFaultRetryAfter429: the platform answers 429 with Retry-After: 2 to the first requests of
// spans and of scores. The collector waits and retries; nothing is lost or doubled.
func TestFaultRetryAfter429(t *testing.T) {
	rig := startFaultRig(t, bench.RigOptions{})
	w := faultWorkload(t, loadgen.WorkloadOptions{})
	for _, ep := range []platform.Endpoint{platform.EndpointTraces, platform.EndpointScores} {
		if err := rig.Platform.SetFault(ep, platform.Fault{Status: http.StatusTooManyRequests, RetryAfter: 2, Times: 3}); err != nil {
			t.Fatal(err)
		}
	}
	res := sendLoad(t, rig, w, loadgen.ProtocolHTTP, loadgen.RunOptions{Rate: 1000, Duration: longer(3*time.Second, 15*time.Second), RequestSpans: 256})
	a := settleAndReport(t, "429-retry-after", rig, w, time.Minute, res)
	requireNoLoss(t, a, false)
	for _, ep := range []platform.Endpoint{platform.EndpointTraces, platform.EndpointScores} {
		if n := statuses(rig.Platform, ep)[http.StatusTooManyRequests]; n != 3 {
			t.Errorf("%s: %d answers were 429, want the 3 injected", ep, n)
		}
	}
}

// TestFault413: the platform refuses span bodies over 64 KiB once decompressed (the workload's
// text compresses too well for a limit on the gzip body to bite) and score bodies over 4 KiB
// with 413. The exporter splits the batches until they fit; nothing is lost.
func TestFault413(t *testing.T) {
	rig := startFaultRig(t, bench.RigOptions{})
	w := faultWorkload(t, loadgen.WorkloadOptions{})
	if err := rig.Platform.SetFault(platform.EndpointTraces, platform.Fault{MaxDecompressedBytes: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	if err := rig.Platform.SetFault(platform.EndpointScores, platform.Fault{MaxBodyBytes: 4 << 10}); err != nil {
		t.Fatal(err)
	}
	res := sendLoad(t, rig, w, loadgen.ProtocolHTTP, loadgen.RunOptions{Rate: 1000, Duration: longer(3*time.Second, 15*time.Second), RequestSpans: 512})
	a := settleAndReport(t, "413-split", rig, w, time.Minute, res)
	requireNoLoss(t, a, false)
	for _, ep := range []platform.Endpoint{platform.EndpointTraces, platform.EndpointScores} {
		if statuses(rig.Platform, ep)[http.StatusRequestEntityTooLarge] == 0 {
			t.Errorf("%s: no request was too large; the limit did not bite: %v", ep, statuses(rig.Platform, ep))
		}
	}
}

// TestFault207: some score events are valid for the collector but not for the platform (a
// BOOLEAN score valued 7); their batches get 207. The platform keeps the valid scores, the
// collector logs the rejection and does not resend the rejected scores (the platform's count
// of rejected scores equals the number sent: none was sent twice).
func TestFault207(t *testing.T) {
	rig := startFaultRig(t, bench.RigOptions{})
	w := faultWorkload(t, loadgen.WorkloadOptions{InvalidScoreShare: 0.3})
	res := sendLoad(t, rig, w, loadgen.ProtocolHTTP, loadgen.RunOptions{Rate: 1000, Duration: longer(3*time.Second, 15*time.Second), RequestSpans: 256})
	a := settleAndReport(t, "207-partial-scores", rig, w, time.Minute, res)
	requireNoLoss(t, a, false)
	if res.Accepted.InvalidScores == 0 {
		t.Fatal("the workload sent no invalid score")
	}
	// The rejected scores come back with the batch's answer; wait for the last of them.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = rig.Platform.WaitUntil(ctx, func() bool { return int64(rig.Platform.Stats().ScoresRejected) >= res.Accepted.InvalidScores })
	if got := rig.Platform.Stats().ScoresRejected; int64(got) != res.Accepted.InvalidScores {
		t.Errorf("the platform rejected %d scores, %d invalid ones were sent once each (more means resent)", got, res.Accepted.InvalidScores)
	}
	if statuses(rig.Platform, platform.EndpointScores)[http.StatusMultiStatus] == 0 {
		t.Errorf("no score batch was answered 207: %v", statuses(rig.Platform, platform.EndpointScores))
	}
	if rig.Collector.CountLines("svc rejected") == 0 {
		t.Errorf("the collector did not log the rejected scores (svc rejected N of M scores in batch:)")
	}
}

// TestFaultSlowPlatform: every request to the platform takes 1.5 s (the exporter's timeout is
// longer). The queue absorbs the load; the sender is never turned away; nothing is lost or
// doubled.
func TestFaultSlowPlatform(t *testing.T) {
	rig := startFaultRig(t, bench.RigOptions{})
	w := faultWorkload(t, loadgen.WorkloadOptions{})
	for _, ep := range []platform.Endpoint{platform.EndpointTraces, platform.EndpointScores} {
		if err := rig.Platform.SetFault(ep, platform.Fault{Delay: 1500 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	res := sendLoad(t, rig, w, loadgen.ProtocolGRPC, loadgen.RunOptions{Rate: 1000, Duration: longer(5*time.Second, 30*time.Second), RequestSpans: 256})
	if res.Refused.Requests+res.Failed.Requests != 0 {
		t.Errorf("the collector turned the sender away: %v", res.Statuses)
	}
	a := settleAndReport(t, "slow-platform", rig, w, time.Minute, res)
	requireNoLoss(t, a, false)
}

// TestFaultMalformedInput: malformed OTLP (protobuf garbage over HTTP and gRPC, broken JSON,
// a corrupt gzip body) gets a 400 / INVALID_ARGUMENT; the collector keeps running and delivers
// the valid load that follows.
func TestFaultMalformedInput(t *testing.T) {
	rig := startFaultRig(t, bench.RigOptions{})
	w := faultWorkload(t, loadgen.WorkloadOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	garbage := []byte("\x0a\xff\xff\xff\xff\x0f this is not an ExportTraceServiceRequest")
	var malformed int
	for _, protocol := range []string{loadgen.ProtocolHTTP, loadgen.ProtocolGRPC} {
		s, err := rig.Sender(protocol)
		if err != nil {
			t.Fatal(err)
		}
		out := s.Send(ctx, garbage)
		s.Close()
		malformed++
		// gRPC: grpc-go's decoder answers INTERNAL, a code the OTLP specification does not
		// retry: the sender drops the request, as it should.
		if out.Verdict != loadgen.Rejected {
			t.Errorf("%s: malformed protobuf answered %s (%s), want rejected for good (HTTP 400, a non-retryable gRPC code)", protocol, out.Status, out.Verdict)
		}
		t.Logf("%s: malformed protobuf answered %s", protocol, out.Status)
	}
	url := "http://" + rig.Collector.OTLPHTTPEndpoint + "/v1/traces"
	for _, bad := range []struct{ contentType, encoding, body string }{
		{"application/json", "", `{"resourceSpans": [ {"scopeSpans": [ {"spans": [ {"traceId": `},
		{"application/x-protobuf", "gzip", "\x1f\x8b\x08\x00 not really gzip"},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(bad.body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", bad.contentType)
		if bad.encoding != "" {
			req.Header.Set("Content-Encoding", bad.encoding)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		malformed++
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s %s body: answered %d, want 400", bad.contentType, bad.encoding, resp.StatusCode)
		}
	}

	res := sendLoad(t, rig, w, loadgen.ProtocolHTTP, loadgen.RunOptions{Rate: 1000, Duration: longer(2*time.Second, 10*time.Second), RequestSpans: 256})
	a := settleAndReport(t, "malformed-input", rig, w, time.Minute, res)
	t.Logf("%d malformed requests sent before the valid load, none accepted", malformed)
	requireNoLoss(t, a, false)
	select {
	case <-rig.Collector.Exited():
		t.Fatal("the collector exited")
	default:
	}
}

// TestFaultOverload: the platform takes 3 s per request while the sender pushes as fast as the
// collector answers: at least ten times what the collector can take (the test checks the
// factor and prints it). The collector's bounded queue (2,000 spans here, with the items
// sizer: the queue's own limit must bind within the run, which the shipped 1 GiB would not)
// and memory limiter
// (400 MiB here) turn the sender away (HTTP 503, gRPC UNAVAILABLE) instead of growing; its
// memory stays bounded; nothing it accepted is lost. A refused request is not always a request
// of which nothing was taken: the traces pipeline fans out to the exporter and to the score
// connector, and when one of them refuses, what the other took is delivered all the same. Those
// spans and scores count as unexpected (not accepted, but arrived); a sender that retries them
// delivers them twice, and the platform upserts them by id.
func TestFaultOverload(t *testing.T) {
	rig := startFaultRig(t, bench.RigOptions{Sets: []string{
		"exporters::svc::sending_queue::sizer=items",
		"exporters::svc::sending_queue::queue_size=2000",
		"processors::memory_limiter::limit_mib=400",
		"processors::memory_limiter::spike_limit_mib=100",
	}})
	w := faultWorkload(t, loadgen.WorkloadOptions{})
	for _, ep := range []platform.Endpoint{platform.EndpointTraces, platform.EndpointScores} {
		if err := rig.Platform.SetFault(ep, platform.Fault{Delay: 3 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	load := longer(15*time.Second, 60*time.Second)
	var results []loadgen.Result
	for _, protocol := range []string{loadgen.ProtocolHTTP, loadgen.ProtocolGRPC} {
		results = append(results, sendLoad(t, rig, w, protocol, loadgen.RunOptions{Duration: load / 2, RequestSpans: 256, Concurrency: 8}))
	}
	rig.Platform.ClearFaults()
	u, err := rig.Usage()
	if err != nil {
		t.Fatal(err)
	}
	a := settleAndReport(t, "overload", rig, w, 2*time.Minute, results...)

	var offered, accepted, refused int64
	statusesSeen := map[string]int64{}
	for _, r := range results {
		offered += r.Sent.Spans
		accepted += r.Accepted.Spans
		refused += r.Refused.Requests
		for k, v := range r.Statuses {
			statusesSeen[k] += v
		}
	}
	overload := float64(offered) / float64(max(accepted, 1))
	t.Logf("offered %d input spans in %s, %.1f times the %d accepted; answers %v; peak RSS %d MiB",
		offered, load, overload, accepted, statusesSeen, u.PeakRSS>>20)
	fmt.Printf("fault overload: offered/accepted=%.1f refused-requests=%d peak-rss=%dMiB\n", overload, refused, u.PeakRSS>>20)
	requireNoLoss(t, a, false)
	if refused == 0 {
		t.Errorf("the sender was never told to back off: %v", statusesSeen)
	}
	if overload < 10 {
		t.Errorf("offered only %.1f times what the collector accepted: not the overload the test is about", overload)
	}
	// The limiter's 400 MiB plus the Go runtime's slack and the binary: bounded, not growing with the offered load.
	if u.PeakRSS > 1<<30 {
		t.Errorf("peak RSS %d MiB: memory not bounded by the queue and the limiter", u.PeakRSS>>20)
	}
	var others int64
	for _, r := range results {
		others += r.Rejected.Requests + r.Failed.Requests
	}
	if others != 0 {
		t.Errorf("answers other than success and back-off: %v", statusesSeen)
	}
}
