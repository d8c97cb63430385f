// Command bench runs the side-by-side load runs of `make bench`: svc-otelcol with the default
// gateway pipeline (A), the same with its exporter queue in memory (M: the cost of persistence),
// the forwarding floor (B) and the contrib OTTL peer (C), one after
// another on the same workload, and writes testbed/results/bench.{md,svg,json}.
//
//	go run ./cmd/bench --svc-otelcol ../bin/svc-otelcol --peer ../build/peer/peer-otelcol
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/svc/svc-collector/testbed/bench"
	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/loadgen"
)

func main() {
	root := collector.RepoRoot()
	svcBin := flag.String("svc-otelcol", filepath.Join(root, "bin", "svc-otelcol"), "the svc-otelcol binary (builds A and B)")
	peerBin := flag.String("peer", bench.DefaultPeerBinary(), "the OTTL peer binary (build C), from testbed/peer/builder-config.yaml")
	builds := flag.String("builds", "A,M,B,C", "builds to measure, in order (M: A with the exporter queue in memory, the cost of persistence)")
	out := flag.String("out", filepath.Join(root, "testbed", "results"), "directory for bench.md, bench.svg, bench.json")
	protocol := flag.String("protocol", loadgen.ProtocolHTTP, "OTLP protocol of the sender: http or grpc")
	seed := flag.Uint64("seed", 1, "workload seed")
	step := flag.Duration("step", 10*time.Second, "duration of each step of the sustained-rate search")
	startRate := flag.Float64("start-rate", 250, "first step of the rate search, spans/s")
	maxRate := flag.Float64("max-rate", 64000, "highest step of the rate search, spans/s")
	refinements := flag.Int("refinements", 2, "bisection steps after the first failed step (-1: none)")
	drain := flag.Duration("drain", 8*time.Second, "how long after a step the platform may still be receiving its spans")
	fixedRate := flag.Float64("fixed-rate", 0, "rate of the fixed run, spans/s (0: half the lowest sustained rate)")
	fixedDuration := flag.Duration("fixed", 20*time.Second, "duration of each fixed run")
	rounds := flag.Int("rounds", 3, "fixed runs per build, the builds taking turns (the report takes medians)")
	concurrency := flag.Int("concurrency", 4, "requests in flight")
	timeout := flag.Duration("timeout", 14*time.Minute, "upper bound of the whole run")
	render := flag.String("render", "", "render the report of an earlier run from its bench.json into --out, without running anything")
	search := flag.Bool("search", true, "run the sustained-rate search (false: the fixed runs alone, at --fixed-rate)")
	profile := flag.String("cpu-profile", "", "directory for a CPU profile of each fixed run (builds with the pprof extension: A, M, B); figures of such a run compare only with each other")
	quick := flag.Bool("quick", false, "a short run to check the machinery: 3s steps, no refinement, one 6s fixed run")
	flag.Parse()

	if *render != "" {
		rep, err := bench.ReadReport(*render)
		if err != nil {
			fail(err)
		}
		if err := rep.Write(*out); err != nil {
			fail(err)
		}
		fmt.Printf("rendered %s into %s\n", *render, *out)
		return
	}
	if *quick {
		*step, *refinements, *fixedDuration, *drain, *rounds = 3*time.Second, -1, 6*time.Second, 5*time.Second, 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	cfg := bench.Config{
		Workload:      loadgen.WorkloadOptions{Seed: *seed},
		Protocol:      *protocol,
		Concurrency:   *concurrency,
		StartRate:     *startRate,
		MaxRate:       *maxRate,
		StepDuration:  *step,
		Refinements:   *refinements,
		DrainTimeout:  *drain,
		FixedRate:     *fixedRate,
		FixedDuration: *fixedDuration,
		Rounds:        *rounds,
		ProfileDir:    *profile,
		NoSearch:      !*search,
		Log:           os.Stderr,
	}
	for _, name := range strings.Split(*builds, ",") {
		switch strings.TrimSpace(name) {
		case "A":
			cfg.Builds = append(cfg.Builds, bench.Gateway(*svcBin))
		case "M":
			cfg.Builds = append(cfg.Builds, bench.GatewayMemoryQueue(*svcBin))
		case "B":
			cfg.Builds = append(cfg.Builds, bench.Forwarder(*svcBin))
		case "C":
			if _, err := os.Stat(*peerBin); err != nil {
				fail(fmt.Errorf("peer binary: %w (build it: make peer)", err))
			}
			cfg.Builds = append(cfg.Builds, bench.Peer(*peerBin))
		default:
			fail(fmt.Errorf("unknown build %q (A, M, B, C)", name))
		}
	}

	rep, runErr := bench.Run(ctx, cfg)
	if runErr != nil {
		if len(rep.Results) == 0 {
			fail(runErr)
		}
		rep.Error = runErr.Error()
	}
	if err := rep.Write(*out); err != nil {
		fail(err)
	}
	fmt.Println(rep.Markdown(""))
	fmt.Printf("wrote %s/bench.md, bench.svg, bench.json in %s\n", *out, rep.Elapsed.Round(time.Second))
	for _, q := range rep.Ratios() {
		if strings.HasPrefix(q.Name, "CPU") || strings.HasPrefix(q.Name, "sustained") || strings.HasPrefix(q.Name, "peak RSS (fixed") {
			fmt.Printf("%-48s %6.2f %s\n", q.Name, q.Value, q.Target)
		}
	}
	if runErr != nil {
		fail(fmt.Errorf("the run did not finish; the report holds what was measured: %w", runErr))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
