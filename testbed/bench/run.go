package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/svc/svc-collector/testbed/loadgen"
	"github.com/svc/svc-collector/testbed/platform"
)

// Config of a side-by-side load run. Zero values take the defaults that fit `make bench` into
// its 15-minute budget on two cores.
type Config struct {
	// Builds are measured one after another, in this order, on the same workload.
	Builds   []Build
	Workload loadgen.WorkloadOptions
	// Protocol is loadgen.ProtocolHTTP (default) or loadgen.ProtocolGRPC.
	Protocol string
	// Concurrency is the sender's most requests in flight; default 4.
	Concurrency int

	// The sustained-rate search (search.go): steps of StepDuration from StartRate, doubling up
	// to MaxRate until a step fails, then bisection steps between the highest rate that held
	// and the lowest that failed until that interval is at most 1/Resolution of the failed
	// rate (default 16), at most Refinements of them (default 6). A step holds when the
	// collector refused nothing, answered fast enough for the sender to keep the rate, and the
	// platform received every span and score it should within DrainTimeout of the step's end.
	StartRate, MaxRate float64
	StepDuration       time.Duration
	Refinements        int
	Resolution         float64
	DrainTimeout       time.Duration
	// Searches is how many times the search runs for each build, the builds taking turns
	// (A, M, B, ... then again); the sustained rate is the best of the searches. Default 1.
	Searches int
	// SpanSizes are the average encoded sizes of an input span, in KiB, of the further
	// workloads whose sustained rate is searched by the same rule for SizedBuilds (every LLM
	// input and output of one size, chosen to give that average); none by default.
	SpanSizes   []float64 `json:",omitempty"`
	SizedBuilds []string  `json:",omitempty"`
	// Repeats is how many times a step is run again when it failed only because other processes
	// of the machine took the pinned CPUs (CrowdedOut), the same rule for every build; default 1,
	// negative: never.
	Repeats int

	// The fixed runs, the same for every build, measure CPU, memory and bytes: FixedDuration
	// at FixedRate (default: half the lowest sustained rate, so that every build keeps up),
	// Rounds times (default 3), the builds taking turns, so that a burst of other work on the
	// machine hits one round of one build rather than all of it; the report takes medians.
	// IdleWindow before each measures the collector's CPU use without load; default 5s.
	FixedRate     float64
	FixedDuration time.Duration
	Rounds        int
	IdleWindow    time.Duration

	// ProfileDir, when set, adds the pprof extension to the builds that have it and writes a CPU
	// profile of each fixed run's collector there (<build>-<round>.pprof), taken over the
	// sending. Profiling costs the collector a little CPU: compare CPU figures of runs with it
	// only with each other.
	ProfileDir string

	// NoSearch skips the sustained-rate search (FixedRate must be set): for quicker runs of the
	// fixed runs alone, while working on a build.
	NoSearch bool
	// Pin keeps the collector and the driver on CPUs of their own (pin.go); zero: not pinned.
	Pin Pinning
	// MemoryLimit, when set, is every collector's GOMEMLIMIT (as a deployment sets it from the
	// container's memory limit), the same for every build so that their GC runs by one rule.
	MemoryLimit string `json:",omitempty"`
	// Curves are the cost curves measured after the fixed runs (curves.go); zero: none.
	Curves CurveOptions

	// Log receives progress lines; default discard.
	Log io.Writer `json:"-"`
}

func (c Config) withDefaults() Config {
	if c.Protocol == "" {
		c.Protocol = loadgen.ProtocolHTTP
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.StartRate <= 0 {
		c.StartRate = 250
	}
	if c.MaxRate <= 0 {
		c.MaxRate = 64000
	}
	if c.StepDuration <= 0 {
		c.StepDuration = 10 * time.Second
	}
	if c.Refinements < 0 {
		c.Refinements = 0
	} else if c.Refinements == 0 {
		c.Refinements = 6
	}
	if c.Resolution <= 1 {
		c.Resolution = 16
	}
	if c.Searches <= 0 {
		c.Searches = 1
	}
	if c.Repeats < 0 {
		c.Repeats = 0
	} else if c.Repeats == 0 {
		c.Repeats = 1
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 8 * time.Second
	}
	if c.FixedDuration <= 0 {
		c.FixedDuration = 20 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	if c.IdleWindow <= 0 {
		c.IdleWindow = 5 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

// Step is one step of the sustained-rate search.
type Step struct {
	// Rate is the input rate asked for (spans/s); Offered and Accepted what the sender achieved.
	Rate, Offered, Accepted float64
	// Refused, Rejected and Failed count requests.
	Refused, Rejected, Failed int64
	// Lost counts the spans and scores not at the platform DrainTimeout after the step.
	Lost int64
	// MaxLag is how far behind schedule the sender fell.
	MaxLag time.Duration
	Held   bool
	// Why says why the step failed; RanOut which side ran out (pin.go's whatRanOut).
	Why, RanOut string `json:",omitempty"`
	// Repeated: the step failed crowded out (CrowdedOut) and was run again; the next step
	// of the result is its repetition.
	Repeated bool `json:",omitempty"`
	// Search numbers the searches of the build from 1 (Config.Searches); 0 in reports of
	// runs with one search.
	Search int `json:",omitempty"`
	// DriverCores and CollectorCores are the CPU the driver (sender and platform) and the
	// collector used while the step sent, in cores; DriverCPUBusy and CollectorCPUBusy how
	// busy their pinned CPUs were with anything (0 when not pinned).
	DriverCores, CollectorCores     float64
	DriverCPUBusy, CollectorCPUBusy float64
}

// Result is one build's figures.
type Result struct {
	Build Build
	// Steps of the sustained-rate searches, in the order run; Sustained is the highest rate
	// that held in any of them (0 when none did), Searches each one's; Peak the highest rate
	// any step took without loss (peakRate), the capacity at saturation; LadderPeakRSS the
	// highest VmHWM of their collectors.
	Steps         []Step
	Sustained     float64
	Peak          float64  `json:",omitempty"`
	Searches      []Search `json:",omitempty"`
	LadderPeakRSS int64

	// FixedRate is the rate of the fixed runs; Runs are the fixed runs, one per round. The
	// embedded FixedRun sums them up: the median of the rounds' CPU, idle, peak RSS and bytes,
	// and the first round's account and sender view (every round sends the same traces).
	FixedRate float64
	Runs      []FixedRun
	FixedRun
	// CPURange is the lowest and highest CPUPer100k of the rounds.
	CPURange [2]float64
}

// Search is what one sustained-rate search of a build found.
type Search struct {
	Sustained, Peak float64
}

// addSearch adds one search's steps and figures to the result.
func (r *Result) addSearch(s searchResult) {
	for i := range s.steps {
		s.steps[i].Search = s.number
	}
	r.Steps = append(r.Steps, s.steps...)
	r.Searches = append(r.Searches, Search{Sustained: s.sustained, Peak: peakRate(s.steps)})
	r.LadderPeakRSS = max(r.LadderPeakRSS, s.peakRSS)
	// The best of the searches: other processes of the machine can only take CPU from the
	// collector or the sender, never lend it, so a step that held (or a rate taken without
	// loss) shows what the build can do, and a lower search is one that was crowded.
	r.Sustained, r.Peak = max(r.Sustained, s.sustained), peakRate(r.Steps)
}

// SizedResult is the sustained-rate search of one build on a workload of one span size.
type SizedResult struct {
	Build string
	// KiBPerSpan is the average asked for, BytesPerSpan what the workload's encoded OTLP
	// averages per input span, IOBytes the size of each LLM input and output that gives it.
	KiBPerSpan   float64
	BytesPerSpan float64
	IOBytes      int
	Steps        []Step
	// Sustained and Peak as in Result.
	Sustained, Peak float64
	PeakRSS         int64
}

// FixedRun is what one fixed run of one build measured.
type FixedRun struct {
	InputSpans int64
	// CPU is the collector's user+system time over the fixed run (from the first request
	// to the last delivery); CPUPer100k the same per 100,000 input spans, in seconds.
	CPU        time.Duration
	CPUPer100k float64
	// IdleCPU is the collector's CPU use per second without load; IdlePer100k what that
	// rate adds up to over the fixed run, per 100,000 input spans (part of CPUPer100k).
	IdleCPU     time.Duration
	IdlePer100k float64
	// PeakRSS is the collector's VmHWM at the end of the fixed run.
	PeakRSS int64
	// TraceBytes and ScoreBytes are the request bodies the platform received (as sent:
	// compressed); BytesPer100k their sum per 100,000 input spans.
	TraceBytes, ScoreBytes int64
	BytesPer100k           float64
	Account                Account
	// Latency is from the sender to the platform, per span (the median of the rounds' in the
	// summary).
	Latency Latency
	// Sent is the sender's view of the fixed run.
	Sent loadgen.Result
}

// summarize fills the embedded FixedRun from the rounds' runs.
func (r *Result) summarize() {
	if len(r.Runs) == 0 {
		return
	}
	median := func(f func(FixedRun) float64) float64 {
		v := make([]float64, len(r.Runs))
		for i, run := range r.Runs {
			v[i] = f(run)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	first := r.Runs[0]
	r.FixedRun = FixedRun{
		InputSpans:   first.InputSpans,
		CPU:          time.Duration(median(func(x FixedRun) float64 { return float64(x.CPU) })),
		CPUPer100k:   median(func(x FixedRun) float64 { return x.CPUPer100k }),
		IdleCPU:      time.Duration(median(func(x FixedRun) float64 { return float64(x.IdleCPU) })),
		IdlePer100k:  median(func(x FixedRun) float64 { return x.IdlePer100k }),
		PeakRSS:      int64(median(func(x FixedRun) float64 { return float64(x.PeakRSS) })),
		TraceBytes:   int64(median(func(x FixedRun) float64 { return float64(x.TraceBytes) })),
		ScoreBytes:   int64(median(func(x FixedRun) float64 { return float64(x.ScoreBytes) })),
		BytesPer100k: median(func(x FixedRun) float64 { return x.BytesPer100k }),
		Account:      first.Account,
		Latency: Latency{
			Spans: first.Latency.Spans,
			P50:   time.Duration(median(func(x FixedRun) float64 { return float64(x.Latency.P50) })),
			P99:   time.Duration(median(func(x FixedRun) float64 { return float64(x.Latency.P99) })),
		},
		Sent: first.Sent,
	}
	r.CPURange = [2]float64{first.CPUPer100k, first.CPUPer100k}
	for _, run := range r.Runs {
		r.CPURange[0] = min(r.CPURange[0], run.CPUPer100k)
		r.CPURange[1] = max(r.CPURange[1], run.CPUPer100k)
	}
}

// Lost sums what the fixed runs lost, spans and scores.
func (r Result) Lost() int64 {
	var n int64
	for _, run := range r.Runs {
		n += run.Account.Spans.Lost + run.Account.Scores.Lost
	}
	return n
}

// Report is the outcome of a load run.
type Report struct {
	Started time.Time
	Elapsed time.Duration
	Config  Config
	// Workload is the workload's options with its defaults filled in; Shape what it holds.
	Workload  loadgen.WorkloadOptions
	Shape     loadgen.Shape
	Results   []Result
	Machine   string
	LoadAvg   [2]string // /proc/loadavg at the start and at the end
	DriverCPU time.Duration
	// SameSpans compares the span ids A and C delivered in the fixed run (empty when either
	// is missing); SameSpansC2 the same for A and C2.
	SameSpans   string
	SameSpansC2 string `json:",omitempty"`
	// Sized are the sustained-rate searches on workloads of other span sizes
	// (Config.SpanSizes), by size, then build.
	Sized []SizedResult `json:",omitempty"`
	// Curves are the cost curves (curves.go), when measured.
	Curves *Curves `json:",omitempty"`
	// Error says why the run stopped early, if it did.
	Error string `json:",omitempty"`
}

// Result returns the result of the build with this name.
func (r Report) Result(name string) (Result, bool) {
	for _, res := range r.Results {
		if res.Build.Name == name {
			return res, true
		}
	}
	return Result{}, false
}

// Run measures every build of cfg: first the sustained-rate search of each, then the fixed run
// of each at one common rate. On an error (ctx ending, a collector that does not start) the
// report holds what was measured so far.
func Run(ctx context.Context, cfg Config) (rep Report, err error) {
	cfg = cfg.withDefaults()
	if len(cfg.Builds) == 0 {
		return Report{}, errors.New("bench: no builds to measure")
	}
	for i := range cfg.Builds {
		cfg.Builds[i] = cfg.Pin.apply(cfg.Builds[i])
		if cfg.MemoryLimit != "" {
			cfg.Builds[i].Env = append(slices.Clone(cfg.Builds[i].Env), "GOMEMLIMIT="+cfg.MemoryLimit)
		}
	}
	rep = Report{Started: time.Now(), Config: cfg, Machine: machine(), LoadAvg: [2]string{loadAvg(), ""}}
	self0, _ := ReadUsage(os.Getpid())
	w, err := loadgen.NewWorkload(cfg.Workload)
	if err != nil {
		return rep, err
	}
	rep.Workload, rep.Shape = w.Options(), w.Shape()
	logf(cfg.Log, "workload: %d traces in the pool, %.1f spans per trace (%.0f%% plain), %.0f KiB per trace, %.0f scores per trace",
		rep.Shape.Templates, rep.Shape.SpansPerTrace, 100*rep.Shape.PlainShare, rep.Shape.BytesPerTrace/1024, rep.Shape.ScoresPerTrace)

	defer func() {
		self1, _ := ReadUsage(os.Getpid())
		rep.DriverCPU = self1.CPU - self0.CPU
		rep.Elapsed = time.Since(rep.Started)
		rep.LoadAvg[1] = loadAvg()
	}()
	if cfg.NoSearch && cfg.FixedRate <= 0 {
		return rep, errors.New("bench: without the rate search the fixed rate must be given")
	}
	for _, b := range cfg.Builds {
		rep.Results = append(rep.Results, Result{Build: b})
	}
	for search := 1; !cfg.NoSearch && search <= cfg.Searches; search++ {
		for i := range rep.Results {
			res := &rep.Results[i]
			s, err := ladder(ctx, cfg, w, res.Build)
			if cfg.Searches > 1 {
				s.number = search
			}
			res.addSearch(s)
			if err != nil {
				return rep, fmt.Errorf("build %s: %w", res.Build.Name, err)
			}
		}
	}
	if !cfg.NoSearch {
		if err := sizedSearches(ctx, cfg, &rep); err != nil {
			return rep, err
		}
	}
	fixedRate := cfg.FixedRate
	if fixedRate <= 0 {
		fixedRate = defaultFixedRate(rep.Results, cfg.StartRate)
	}
	for round := range cfg.Rounds {
		for i := range rep.Results {
			res := &rep.Results[i]
			res.FixedRate = fixedRate
			run, err := fixed(ctx, cfg, w, fixedRate, res.Build, round+1)
			if err != nil {
				rep.SameSpans, rep.SameSpansC2 = sameSpans(rep, "C"), sameSpans(rep, "C2")
				return rep, fmt.Errorf("build %s, fixed run %d: %w", res.Build.Name, round+1, err)
			}
			res.Runs = append(res.Runs, run)
			res.summarize()
		}
	}
	rep.SameSpans, rep.SameSpansC2 = sameSpans(rep, "C"), sameSpans(rep, "C2")
	if cfg.Curves.Enabled {
		curves, err := runCurves(ctx, cfg, &rep)
		rep.Curves = &curves
		if err != nil {
			return rep, fmt.Errorf("cost curves: %w", err)
		}
	}
	return rep, nil
}

// searchResult is one sustained-rate search of one build: its steps, in the order run.
type searchResult struct {
	number    int // of the build's searches, from 1; 0 when there is one
	steps     []Step
	sustained float64
	peakRSS   int64
}

// defaultFixedRate is half the lowest sustained rate, so that every build keeps up; builds that
// held no step (their searches bisect below the first step) do not count, and when none held
// one it is a quarter of the first step.
func defaultFixedRate(results []Result, startRate float64) float64 {
	lowest := 0.0
	for _, r := range results {
		if r.Sustained > 0 && (lowest == 0 || r.Sustained < lowest) {
			lowest = r.Sustained
		}
	}
	if lowest == 0 {
		return startRate / 4
	}
	return lowest / 2
}

// ladder runs one sustained-rate search of one build on workload w.
// The result is named: the deferred closeRig adds the last collector's peak RSS to it.
func ladder(ctx context.Context, cfg Config, w *loadgen.Workload, b Build) (res searchResult, err error) {
	var rig *Rig
	var results []loadgen.Result
	var seq uint64
	closeRig := func() {
		if rig == nil {
			return
		}
		if u, err := rig.Usage(); err == nil {
			res.peakRSS = max(res.peakRSS, u.PeakRSS)
		}
		// A failed step may leave a backlog that a graceful stop would drain for 30s.
		rig.Collector.Kill()
		_ = rig.Close() // the platform, and the rig's storage directory
		rig, results = nil, nil
	}
	defer closeRig()

	step := func(rate float64) (Step, error) {
		if rig == nil {
			var err error
			if rig, err = StartRig(ctx, b, RigOptions{StatsOnly: true}); err != nil {
				return Step{}, err
			}
		}
		s, err := rig.Sender(cfg.Protocol)
		if err != nil {
			return Step{}, err
		}
		defer s.Close()
		meter := startMeter(rig.Collector.PID())
		r, err := loadgen.Run(ctx, w, s, loadgen.RunOptions{
			Rate: rate, Duration: cfg.StepDuration, FirstSeq: seq, Concurrency: cfg.Concurrency,
		})
		if err != nil {
			return Step{}, err
		}
		driverCores, collectorCores := meter.cores()
		var driverBusy, collectorBusy float64
		if cfg.Pin.Enabled {
			driverBusy, collectorBusy = meter.busy(cfg.Pin.DriverCPU), meter.busy(cfg.Pin.CollectorCPU)
		}
		seq = r.NextSeq
		results = append(results, r)
		drain, cancel := context.WithTimeout(ctx, cfg.DrainTimeout)
		a := Settle(drain, rig.Platform, w, b, results...)
		cancel()
		st := Step{
			Rate: rate, Offered: r.OfferedRate(), Accepted: r.AcceptedRate(),
			Refused: r.Refused.Requests, Rejected: r.Rejected.Requests, Failed: r.Failed.Requests,
			Lost: a.Spans.Lost + a.Scores.Lost, MaxLag: r.MaxLag,
			DriverCores: driverCores, CollectorCores: collectorCores, DriverCPUBusy: driverBusy, CollectorCPUBusy: collectorBusy,
		}
		var why []string
		if st.Refused > 0 {
			why = append(why, fmt.Sprintf("%d requests refused", st.Refused))
		}
		if st.Rejected+st.Failed > 0 {
			why = append(why, fmt.Sprintf("%d requests rejected or unanswered", st.Rejected+st.Failed))
		}
		if st.Offered < 0.95*rate {
			why = append(why, fmt.Sprintf("sender reached only %.0f spans/s (answers too slow)", st.Offered))
		}
		if st.Lost > 0 {
			why = append(why, fmt.Sprintf("%d spans/scores not delivered %s after the step", st.Lost, cfg.DrainTimeout))
		}
		st.Held = len(why) == 0
		st.Why = strings.Join(why, "; ")
		if !st.Held {
			st.RanOut = whatRanOut(st, cfg.Pin.Enabled)
		}
		logf(cfg.Log, "%s: step %6.0f spans/s: offered %6.0f, accepted %6.0f, CPU collector %.2f sender %.2f, held=%v %s %s", b.Name, rate, st.Offered, st.Accepted, st.CollectorCores, st.DriverCores, st.Held, st.Why, st.RanOut)
		if !st.Held {
			closeRig() // the next step starts from a fresh collector, without this one's backlog
		}
		return st, nil
	}

	// stepRepeated runs a step, and again while it failed crowded out, up to cfg.Repeats times.
	stepRepeated := func(rate float64) (Step, error) {
		st, err := step(rate)
		for i := 0; err == nil && i < cfg.Repeats && CrowdedOut(st, cfg.Pin.Enabled); i++ {
			st.Repeated = true
			res.steps = append(res.steps, st)
			st, err = step(rate)
		}
		return st, err
	}

	search := newRateSearch(cfg)
	for {
		rate, ok := search.next()
		if !ok {
			break
		}
		st, err := stepRepeated(rate)
		if err != nil {
			return res, err
		}
		res.steps = append(res.steps, st)
		search.record(rate, st.Held)
	}
	res.sustained = search.sustained()
	return res, nil
}

// fixed runs the same load through one build at a rate every build keeps up with, and
// measures CPU, memory and bytes to the platform.
func fixed(ctx context.Context, cfg Config, w *loadgen.Workload, rate float64, b Build, round int) (FixedRun, error) {
	var run FixedRun
	opts := RigOptions{StatsOnly: true}
	var pprofEndpoint string
	if cfg.ProfileDir != "" {
		sets, endpoint, ok, err := ProfileSets(b)
		if err != nil {
			return run, err
		}
		if ok {
			opts.Sets, pprofEndpoint = sets, endpoint
		}
	}
	rig, err := StartRig(ctx, b, opts)
	if err != nil {
		return run, err
	}
	defer func() {
		rig.Collector.Kill()
		_ = rig.Close() // the platform, and the rig's storage directory
	}()
	s, err := rig.Sender(cfg.Protocol)
	if err != nil {
		return run, err
	}
	defer s.Close()

	// The same traces for every build: a fixed count, at the rate, from sequence number 0.
	traces := int(rate * cfg.FixedDuration.Seconds() / w.Shape().SpansPerTrace)
	time.Sleep(time.Second) // past the start-up work
	idle0, err := rig.Usage()
	if err != nil {
		return run, err
	}
	time.Sleep(cfg.IdleWindow)
	before, err := rig.Usage()
	if err != nil {
		return run, err
	}
	run.IdleCPU = time.Duration(float64(before.CPU-idle0.CPU) / cfg.IdleWindow.Seconds())
	started := time.Now()
	profiled := make(chan error, 1)
	if pprofEndpoint != "" {
		go func() {
			profiled <- cpuProfile(ctx, pprofEndpoint, cfg.FixedDuration-time.Second,
				filepath.Join(cfg.ProfileDir, fmt.Sprintf("%s-%d.pprof", b.Name, round)))
		}()
	} else {
		profiled <- nil
	}
	r, err := loadgen.Run(ctx, w, s, loadgen.RunOptions{
		Rate: rate, Duration: 3 * cfg.FixedDuration, MaxTraces: traces, Concurrency: cfg.Concurrency,
	})
	if err != nil {
		return run, err
	}
	if err := <-profiled; err != nil {
		logf(cfg.Log, "%s: CPU profile: %v", b.Name, err)
	}
	drain, cancel := context.WithTimeout(ctx, 30*time.Second)
	a := Settle(drain, rig.Platform, w, b, r)
	cancel()
	after, err := rig.Usage()
	if err != nil {
		return run, err
	}
	wall := time.Since(started)
	run.Sent = r
	run.Account = a
	run.Latency = MeasureLatency(rig.Platform, w, b, r)
	run.InputSpans = r.Sent.Spans
	run.CPU = after.CPU - before.CPU
	run.PeakRSS = after.PeakRSS
	for _, rec := range rig.Platform.Requests("") {
		switch rec.Endpoint {
		case platform.EndpointTraces:
			run.TraceBytes += rec.BodyBytes
		case platform.EndpointScores:
			run.ScoreBytes += rec.BodyBytes
		}
	}
	if run.InputSpans > 0 {
		run.CPUPer100k = run.CPU.Seconds() / float64(run.InputSpans) * 1e5
		run.BytesPer100k = float64(run.TraceBytes+run.ScoreBytes) / float64(run.InputSpans) * 1e5
		run.IdlePer100k = run.IdleCPU.Seconds() * wall.Seconds() / float64(run.InputSpans) * 1e5
	}
	logf(cfg.Log, "%s: fixed run at %.0f spans/s: %d input spans, CPU %.2fs (%.2fs per 100k, idle %.1f ms/s), peak RSS %.0f MiB, %.1f MB to the platform, latency p50 %s p99 %s; %s",
		b.Name, rate, run.InputSpans, run.CPU.Seconds(), run.CPUPer100k, float64(run.IdleCPU)/1e6, mib(run.PeakRSS), float64(run.TraceBytes+run.ScoreBytes)/1e6,
		ms(run.Latency.P50), ms(run.Latency.P99), a.Spans)
	return run, nil
}

// sameSpans states whether A and the peer (C or C2) delivered the same span ids in the fixed
// run. Each run's account matches every expected id at the platform; both runs sent the same
// traces, so two complete accounts with nothing unexpected mean the same set of ids.
func sameSpans(rep Report, peer string) string {
	a, okA := rep.Result("A")
	c, okC := rep.Result(peer)
	if !okA || !okC {
		return ""
	}
	// Every round of both, not only the first: each round sends the same traces.
	var lostA, addedA, lostC, addedC int64
	for _, run := range a.Runs {
		lostA, addedA = lostA+run.Account.Spans.Lost, addedA+run.Account.Spans.Unexpected
	}
	for _, run := range c.Runs {
		lostC, addedC = lostC+run.Account.Spans.Lost, addedC+run.Account.Spans.Unexpected
	}
	switch {
	case a.InputSpans == 0 || c.InputSpans == 0:
		return fmt.Sprintf("not measured: the fixed run of A or %s did not take place", peer)
	case a.Sent.Accepted.Traces != c.Sent.Accepted.Traces || a.Sent.Accepted.Traces != a.Sent.Sent.Traces:
		return fmt.Sprintf("not comparable: A accepted %d traces, %s %d, of %d sent", a.Sent.Accepted.Traces, peer, c.Sent.Accepted.Traces, a.Sent.Sent.Traces)
	case lostA == 0 && lostC == 0 && addedA == 0 && addedC == 0:
		return fmt.Sprintf("yes: in every round both delivered exactly the %d GenAI span ids of the %d input spans, nothing else", a.Account.Spans.Delivered, a.InputSpans)
	default:
		return fmt.Sprintf("NO: over the rounds A lost %d and added %d span ids, %s lost %d and added %d",
			lostA, addedA, peer, lostC, addedC)
	}
}

// cpuProfile takes a CPU profile of the collector for d from its pprof extension into file.
func cpuProfile(ctx context.Context, endpoint string, d time.Duration, file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	raw, err := fetchCPUProfile(ctx, endpoint, d)
	if err != nil {
		return err
	}
	return os.WriteFile(file, raw, 0o644)
}

// fetchCPUProfile takes a CPU profile of d (whole seconds, at least one) from the pprof
// extension at endpoint.
func fetchCPUProfile(ctx context.Context, endpoint string, d time.Duration) ([]byte, error) {
	seconds := max(1, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", endpoint, seconds), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("pprof answered %s", resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/1e6) }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				model = strings.TrimSpace(value)
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s/%s, %s", OnlineCPUs(), model, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
