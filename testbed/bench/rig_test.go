package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/svc/svc-collector/testbed/loadgen"
	"github.com/svc/svc-collector/testbed/platform"
)

// builds returns the builds whose binaries are at hand: A and B need SVC_OTELCOL_BIN, C the
// peer binary (SVC_PEER_BIN or build/peer/peer-otelcol).
func builds(t *testing.T) []Build {
	t.Helper()
	var out []Build
	if bin := os.Getenv("SVC_OTELCOL_BIN"); bin != "" {
		out = append(out, Gateway(bin), Forwarder(bin), ForwarderBestSpeed(bin))
	}
	peer := os.Getenv("SVC_PEER_BIN")
	if peer == "" {
		peer = DefaultPeerBinary()
	}
	if _, err := os.Stat(peer); err == nil && os.Getenv("SVC_OTELCOL_BIN") != "" {
		out = append(out, Peer(peer), TargetedPeer(peer))
	}
	if len(out) == 0 {
		t.Skip("SVC_OTELCOL_BIN is not set: no collector binary to run")
	}
	return out
}

// Each build delivers exactly what it should of a small run, over HTTP and gRPC: the GenAI
// spans and their scores (A), every span (B), the GenAI spans (C); nothing lost, nothing twice.
func TestRigAccountsForEveryBuild(t *testing.T) {
	w, err := loadgen.NewWorkload(loadgen.WorkloadOptions{Seed: 42, Templates: 16, IOMinBytes: 512, IOMaxBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range builds(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rig, err := StartRig(ctx, b, RigOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := rig.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
				if t.Failed() {
					t.Logf("collector output:\n%s", rig.Collector.Logs())
				}
			}()
			var results []loadgen.Result
			seq := uint64(0)
			for _, protocol := range []string{loadgen.ProtocolHTTP, loadgen.ProtocolGRPC} {
				s, err := rig.Sender(protocol)
				if err != nil {
					t.Fatal(err)
				}
				res, err := loadgen.Run(ctx, w, s, loadgen.RunOptions{FirstSeq: seq, MaxTraces: 100, Duration: 30 * time.Second, RequestSpans: 200})
				s.Close()
				if err != nil {
					t.Fatal(err)
				}
				if res.Accepted.Traces != 100 {
					t.Fatalf("%s: %d of 100 traces accepted: %v", protocol, res.Accepted.Traces, res.Statuses)
				}
				results = append(results, res)
				seq = res.NextSeq
			}
			settle, cancelSettle := context.WithTimeout(ctx, 30*time.Second)
			defer cancelSettle()
			a := Settle(settle, rig.Platform, w, b, results...)
			t.Log(a.Line("build " + b.Name))
			if a.Spans.Expected == 0 || a.Spans.Lost != 0 || a.Spans.Duplicated != 0 || a.Spans.Unexpected != 0 {
				t.Errorf("spans: %+v", a.Spans)
			}
			if b.Delivers == GenAISpansAndScores && (a.Scores.Expected == 0 || a.Scores.Lost != 0 || a.Scores.Duplicated != 0 || a.Scores.Unexpected != 0) {
				t.Errorf("scores: %+v", a.Scores)
			}
			u, err := rig.Usage()
			if err != nil {
				t.Fatal(err)
			}
			if u.CPU <= 0 || u.PeakRSS < u.RSS || u.RSS <= 0 {
				t.Errorf("usage %+v: want some CPU time and a peak at least the current RSS", u)
			}
		})
	}
}

// Every build that masks (A, C, C2) leaves none of the workload's personal data in what the
// platform stores, whatever instrumentation shape the LLM spans take: C2 masks only the content
// attributes, so a shape whose content it missed would show here.
func TestMaskingBuildsLeaveNoPersonalData(t *testing.T) {
	w, err := loadgen.NewWorkload(loadgen.WorkloadOptions{Seed: 7, Templates: 12, IOMinBytes: 256, IOMaxBytes: 1 << 10, PIIShare: 1, Mix: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range builds(t) {
		if b.Delivers == AllSpans {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rig, err := StartRig(ctx, b, RigOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rig.Close()
			s, err := rig.Sender(loadgen.ProtocolHTTP)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			res, err := loadgen.Run(ctx, w, s, loadgen.RunOptions{MaxTraces: 12, Duration: 30 * time.Second})
			if err != nil || res.Accepted.Traces != 12 {
				t.Fatalf("%d of 12 traces accepted: %v %v", res.Accepted.Traces, err, res.Statuses)
			}
			settle, cancelSettle := context.WithTimeout(ctx, 30*time.Second)
			defer cancelSettle()
			if a := Settle(settle, rig.Platform, w, b, res); a.Spans.Lost != 0 {
				t.Fatalf("spans: %+v", a.Spans)
			}
			stored := fmt.Sprintf("%#v", rig.Platform.Observations(platform.ObservationFilter{}))
			for _, pii := range []string{"@example.com", "4111 1111 1111 1111", "sk-proj-"} {
				if n := strings.Count(stored, pii); n > 0 {
					t.Errorf("%q reached the platform %d times", pii, n)
					for _, o := range rig.Platform.Observations(platform.ObservationFilter{}) {
						for k, v := range o.Attributes {
							if strings.Contains(fmt.Sprint(v), pii) {
								t.Logf("in %s of a span of scope %s", k, o.ScopeName)
							}
						}
						if strings.Contains(fmt.Sprint(o.Metadata), pii) {
							t.Logf("in the metadata of a span of scope %s", o.ScopeName)
						}
					}
				}
			}
			if !strings.Contains(stored, "Use key") {
				t.Errorf("the prompts' text around the personal data did not arrive")
			}
		})
	}
}

// A build profiled (the pprof extension added to its service::extensions, as `make bench` does for
// the stage table and --cpu-profile) starts and answers a CPU profile. Build A's list once lacked an
// extension its processors name: it did not start, and the stage table went missing.
func TestProfiledBuildsStartAndAnswerAProfile(t *testing.T) {
	for _, b := range builds(t) {
		sets, addr, ok, err := ProfileSets(b)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue // the peer binary has no pprof extension
		}
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rig, err := StartRig(ctx, b, RigOptions{StatsOnly: true, Sets: sets})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = rig.Close() }()
			if _, err := fetchCPUProfile(ctx, addr, time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
}
