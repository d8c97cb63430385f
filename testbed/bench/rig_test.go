package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/svc/svc-collector/testbed/loadgen"
)

// builds returns the builds whose binaries are at hand: A and B need SVC_OTELCOL_BIN, C the
// peer binary (SVC_PEER_BIN or build/peer/peer-otelcol).
func builds(t *testing.T) []Build {
	t.Helper()
	var out []Build
	if bin := os.Getenv("SVC_OTELCOL_BIN"); bin != "" {
		out = append(out, Gateway(bin), Forwarder(bin))
	}
	peer := os.Getenv("SVC_PEER_BIN")
	if peer == "" {
		peer = DefaultPeerBinary()
	}
	if _, err := os.Stat(peer); err == nil && os.Getenv("SVC_OTELCOL_BIN") != "" {
		out = append(out, Peer(peer))
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
