// Command bench runs the side-by-side load runs of `make bench`: svc-otelcol with the default
// gateway pipeline (A), the same with its exporter queue in memory (M: the cost of persistence),
// the forwarding floor (B), the contrib OTTL peer (C) and the strongest hand-written contrib peer
// (C2), one after another on the same workload, then the cost curves, and writes
// testbed/results/bench.{md,svg,json} and the curves' charts (bench-*.svg). With --outcome it runs
// the outcome-sampling comparison instead (make bench-outcome: bench-outcome.md).
//
// The driver re-executes itself on CPU 0 (taskset) and starts every collector on the last CPU
// with GOMAXPROCS=1 (--pin=false: no pinning).
//
//	go run ./cmd/bench --svc-otelcol ../bin/svc-otelcol --peer ../build/peer/peer-otelcol
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/pprof/profile"

	"github.com/svc/svc-collector/testbed/bench"
	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/loadgen"
	"github.com/svc/svc-collector/testbed/workload"
)

func main() {
	root := collector.RepoRoot()
	svcBin := flag.String("svc-otelcol", filepath.Join(root, "bin", "svc-otelcol"), "the svc-otelcol binary (builds A and B)")
	peerBin := flag.String("peer", bench.DefaultPeerBinary(), "the OTTL peer binary (build C), from testbed/peer/builder-config.yaml")
	builds := flag.String("builds", "A,M,B,B1,C,C2", "builds to measure, in order (M: A with the exporter queue in memory, the cost of persistence; B1: B with gzip at A's level, best speed; C2: the contrib peer masking only content attributes)")
	memoryLimit := flag.String("gomemlimit", "1GiB", "GOMEMLIMIT of every collector, as a deployment sets it from the container's memory limit (distribution/kubernetes: 1 GiB); empty: none")
	pin := flag.Bool("pin", true, "run the collector on the last CPU alone (taskset, GOMAXPROCS=1) and the driver (sender and platform) on CPU 0")
	curves := flag.Bool("curves", true, "measure the cost curves after the fixed runs (prompt size, traces open at once, scores, A's CPU by stage)")
	out := flag.String("out", filepath.Join(root, "testbed", "results"), "directory for bench.md, bench.svg, bench.json")
	protocol := flag.String("protocol", loadgen.ProtocolHTTP, "OTLP protocol of the sender: http or grpc")
	seed := flag.Uint64("seed", 1, "workload seed")
	mix := flag.Bool("mix", true, "LLM spans in the shapes of six instrumentations (Vercel AI SDK, OpenLLMetry, OpenInference, GenAI semconv old and new, svc SDK); false: GenAI semconv only")
	step := flag.Duration("step", 5*time.Second, "duration of each step of the sustained-rate search")
	startRate := flag.Float64("start-rate", 2000, "first step of the rate search, spans/s (a first step that fails is bisected below, by the same rule)")
	maxRate := flag.Float64("max-rate", 64000, "highest step of the rate search, spans/s")
	refinements := flag.Int("refinements", 6, "most bisection steps after the first failed step (-1: none)")
	resolution := flag.Float64("resolution", 16, "bisect until the interval between the highest rate held and the lowest failed is at most 1/N of the failed rate")
	searches := flag.Int("searches", 2, "sustained-rate searches per build, the builds taking turns; the report takes the best (other processes only ever slow a search down)")
	spanSizes := flag.String("span-sizes", "4,16", "average KiB per input span of the further workloads whose sustained rate is searched (empty: none)")
	sizedBuilds := flag.String("sized-builds", "A,M,B", "builds searched on the workloads of --span-sizes")
	repeats := flag.Int("repeats", 1, "how many times a step that failed only because other processes took a pinned CPU is run again (-1: never)")
	drain := flag.Duration("drain", 10*time.Second, "how long after a step the platform may still be receiving its spans (A holds content-candidate spans up to content_join.wait, 5s)")
	fixedRate := flag.Float64("fixed-rate", 0, "rate of the fixed run, spans/s (0: half the lowest sustained rate)")
	fixedDuration := flag.Duration("fixed", 10*time.Second, "duration of each fixed run")
	idle := flag.Duration("idle", 3*time.Second, "idle CPU measurement before each fixed run")
	rounds := flag.Int("rounds", 3, "fixed runs per build, the builds taking turns (the report takes medians)")
	concurrency := flag.Int("concurrency", 4, "requests in flight")
	timeout := flag.Duration("timeout", 40*time.Minute, "upper bound of the whole run")
	render := flag.String("render", "", "render the report of an earlier run from its bench.json into --out, without running anything")
	search := flag.Bool("search", true, "run the sustained-rate search (false: the fixed runs alone, at --fixed-rate)")
	profile := flag.String("cpu-profile", "", "directory for a CPU profile of each fixed run (builds with the pprof extension: A, M, B); figures of such a run compare only with each other")
	outcome := flag.Bool("outcome", false, "run the outcome-sampling comparison instead (issue 30): O (outcome rules), A (default config) and T (contrib tail_sampling) on the outcome workload, then O and T with a SIGKILL halfway; writes bench-outcome.md into --out")
	outcomeSessions := flag.Int("outcome-sessions", 600, "conversations of the outcome workload (2 to 6 traces each)")
	outcomeCompress := flag.Float64("outcome-compress", 6, "how many times faster than the workload's own time the outcome run replays its exports (the collectors' waits are divided alike)")
	outcomeKill := flag.Bool("outcome-kill", true, "run O and T once more with a SIGKILL halfway")
	quick := flag.Bool("quick", false, "a short run to check the machinery: 3s steps from 500 spans/s, no refinement, one search, one sized search (16 KiB per span), one 6s fixed run, small curves")
	stages := flag.Bool("stages", false, "print the CPU by stage of the CPU profiles named as arguments (e.g. those of --cpu-profile), without running anything")
	flag.Parse()

	if *stages {
		if err := printStages(os.Stdout, flag.Args()); err != nil {
			fail(err)
		}
		return
	}

	pinning := bench.Pinning{}
	if *pin && *render == "" {
		pinning = bench.NewPinning()
		if err := bench.PinDriver(pinning); err != nil { // returns only when not re-executed
			fail(err)
		}
	}

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
	if *outcome {
		runOutcome(*svcBin, *peerBin, *out, *seed, *outcomeSessions, *outcomeCompress, *outcomeKill, *quick, *timeout, pinning)
		return
	}
	if *quick {
		*step, *refinements, *repeats, *fixedDuration, *drain, *rounds = 3*time.Second, -1, -1, 6*time.Second, 8*time.Second, 1
		// Without bisection a search from 2000 would find nothing for C and C2.
		*searches, *spanSizes, *startRate = 1, "16", 500
	}
	curveOpts := bench.CurveOptions{Enabled: *curves, SVCOtelcol: *svcBin}
	if *quick {
		curveOpts.PromptSizes, curveOpts.PromptBytes, curveOpts.PromptSpans = []int{1 << 10, 64 << 10, 1 << 20}, 4<<20, 1000
		curveOpts.OpenTraces, curveOpts.ScoreEvents, curveOpts.Scores = []int{500, 2000}, []int{1, 8}, 4000
		curveOpts.ProfileDuration = 3 * time.Second
	}
	sizes, err := parseSizes(*spanSizes)
	if err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	cfg := bench.Config{
		Workload:      loadgen.WorkloadOptions{Seed: *seed, Mix: *mix},
		Protocol:      *protocol,
		Concurrency:   *concurrency,
		StartRate:     *startRate,
		MaxRate:       *maxRate,
		StepDuration:  *step,
		Refinements:   *refinements,
		Resolution:    *resolution,
		Searches:      *searches,
		SpanSizes:     sizes,
		SizedBuilds:   strings.Split(*sizedBuilds, ","),
		Repeats:       *repeats,
		DrainTimeout:  *drain,
		FixedRate:     *fixedRate,
		FixedDuration: *fixedDuration,
		Rounds:        *rounds,
		ProfileDir:    *profile,
		NoSearch:      !*search,
		IdleWindow:    *idle,
		Pin:           pinning,
		MemoryLimit:   *memoryLimit,
		Curves:        curveOpts,
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
		case "B1":
			cfg.Builds = append(cfg.Builds, bench.ForwarderBestSpeed(*svcBin))
		case "C":
			if _, err := os.Stat(*peerBin); err != nil {
				fail(fmt.Errorf("peer binary: %w (build it: make peer)", err))
			}
			cfg.Builds = append(cfg.Builds, bench.Peer(*peerBin))
		case "C2":
			if _, err := os.Stat(*peerBin); err != nil {
				fail(fmt.Errorf("peer binary: %w (build it: make peer)", err))
			}
			cfg.Builds = append(cfg.Builds, bench.TargetedPeer(*peerBin))
		default:
			fail(fmt.Errorf("unknown build %q (A, M, B, B1, C, C2)", name))
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
		if strings.HasPrefix(q.Name, "CPU per input span A") || strings.HasPrefix(q.Name, "sustained") || strings.HasPrefix(q.Name, "highest input rate") || strings.HasPrefix(q.Name, "spans per") || strings.HasPrefix(q.Name, "peak RSS (fixed") {
			fmt.Printf("%-48s %6.2f %s\n", q.Name, q.Value, q.Target)
		}
	}
	if runErr != nil {
		fail(fmt.Errorf("the run did not finish; the report holds what was measured: %w", runErr))
	}
}

// parseSizes reads a comma-separated list of KiB per span.
func parseSizes(list string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("--span-sizes: %q is not a size in KiB", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// printStages prints one column per profile of the share of its CPU each stage took, and the
// CPU the profile's samples add up to.
func printStages(w io.Writer, files []string) error {
	if len(files) == 0 {
		return errors.New("--stages: name the CPU profiles to split")
	}
	shares := make([]map[string]float64, len(files))
	totals := make([]time.Duration, len(files))
	for i, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		p, err := profile.ParseData(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		total, split, err := bench.SplitByStage(p)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		totals[i], shares[i] = total, map[string]float64{}
		for _, st := range split {
			shares[i][st.Stage] = st.Share
		}
	}
	fmt.Fprintf(w, "| stage | %s |\n|---|%s\n", strings.Join(files, " | "), strings.Repeat("---:|", len(files)))
	for _, st := range bench.StageOrder {
		fmt.Fprintf(w, "| %s |", st)
		for i := range files {
			fmt.Fprintf(w, " %.1f%% |", 100*shares[i][st])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "| CPU sampled |")
	for _, t := range totals {
		fmt.Fprintf(w, " %.2fs |", t.Seconds())
	}
	fmt.Fprintln(w)
	return nil
}

// runOutcome runs the outcome-sampling comparison; --quick makes it short (200 sessions, 10×
// faster).
func runOutcome(svcBin, peerBin, out string, seed uint64, sessions int, compress float64, kill, quick bool, timeout time.Duration, pinning bench.Pinning) {
	if _, err := os.Stat(peerBin); err != nil {
		fail(fmt.Errorf("peer binary: %w (build it: make peer)", err))
	}
	if quick {
		sessions, compress = 200, 10
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rep, err := bench.RunOutcome(ctx, bench.OutcomeConfig{
		SVCOtelcol: svcBin, Peer: peerBin,
		Workload: workload.OutcomeOptions{Seed: seed, Sessions: sessions},
		Compress: compress, Kill: kill, Pin: pinning, Log: os.Stderr,
	})
	if len(rep.Runs) > 0 {
		if werr := rep.WriteOutcome(out); werr != nil {
			fail(werr)
		}
		fmt.Println(rep.Markdown())
		fmt.Printf("wrote %s/bench-outcome.md in %s\n", out, rep.Elapsed.Round(time.Second))
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
