package bench

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/svc/svc-collector/testbed/loadgen"
)

// rateSearch is the rule of the sustained-rate search, apart from running its steps (ladder
// runs them): steps from start, doubling up to max, until one fails; then bisection between the
// highest rate that held and the lowest that failed until that interval is at most 1/resolution
// of the failed rate (or maxBisections steps were run). A doubling ladder with two bisections
// left an interval of a quarter of the failed rate, so two builds whose capacities straddled a
// step came out 25% apart however close they were.
type rateSearch struct {
	start, max    float64
	resolution    float64
	maxBisections int

	held, failed float64
	bisections   int
}

func newRateSearch(cfg Config) *rateSearch {
	return &rateSearch{start: cfg.StartRate, max: cfg.MaxRate, resolution: cfg.Resolution, maxBisections: cfg.Refinements}
}

// next returns the rate of the next step; false when the search is over.
func (s *rateSearch) next() (float64, bool) {
	if s.failed == 0 {
		rate := s.start
		if s.held > 0 {
			rate = 2 * s.held
		}
		return rate, rate <= s.max
	}
	if s.bisections >= s.maxBisections || s.failed-s.held <= s.failed/s.resolution {
		return 0, false
	}
	return math.Round((s.held + s.failed) / 2), true
}

// record notes the outcome of the step at rate (after its repetitions, if it was crowded out).
func (s *rateSearch) record(rate float64, held bool) {
	if s.failed > 0 {
		s.bisections++
	}
	if held {
		s.held = rate
	} else {
		s.failed = rate
	}
}

// sustained is the highest rate that held (0 when none did).
func (s *rateSearch) sustained() float64 { return s.held }

// peakRate is the highest input rate the collector took in any step of a search in which it
// refused, dropped and lost nothing, held or not: at saturation the sender falls behind the
// asked rate (the step fails) while everything it sends still gets through, and that rate is
// the capacity. Steps that lost spans or had requests refused or unanswered do not count.
func peakRate(steps []Step) float64 {
	peak := 0.0
	for _, st := range steps {
		if st.Lost == 0 && st.Refused == 0 && st.Rejected+st.Failed == 0 {
			peak = max(peak, st.Accepted)
		}
	}
	return peak
}

// sizedWorkload is the run's workload with every LLM input and output of one size, chosen so
// that the encoded OTLP averages kib KiB per input span (plain spans included). The size per
// span grows linearly with the content size, so two probe workloads give the line.
func sizedWorkload(base loadgen.WorkloadOptions, kib float64) (*loadgen.Workload, int, error) {
	perSpan := func(io int) (*loadgen.Workload, float64, error) {
		o := base
		o.IOMinBytes, o.IOMaxBytes = io, io
		w, err := loadgen.NewWorkload(o)
		if err != nil {
			return nil, 0, err
		}
		sh := w.Shape()
		return w, sh.BytesPerTrace / sh.SpansPerTrace, nil
	}
	const lo, hi = 4 << 10, 32 << 10
	_, atLo, err := perSpan(lo)
	if err != nil {
		return nil, 0, err
	}
	_, atHi, err := perSpan(hi)
	if err != nil {
		return nil, 0, err
	}
	io := int(math.Round(lo + (kib*1024-atLo)*(hi-lo)/(atHi-atLo)))
	if io < 1 {
		return nil, 0, fmt.Errorf("%.1f KiB per span is below what the workload's plain spans and metadata take (%.1f KiB)", kib, atLo/1024)
	}
	w, _, err := perSpan(io)
	return w, io, err
}

// sizedSearches runs one sustained-rate search of each of cfg.SizedBuilds on a workload of
// each of cfg.SpanSizes, the builds taking turns at each size.
func sizedSearches(ctx context.Context, cfg Config, rep *Report) error {
	for _, kib := range cfg.SpanSizes {
		w, io, err := sizedWorkload(cfg.Workload, kib)
		if err != nil {
			return fmt.Errorf("workload of %.0f KiB per span: %w", kib, err)
		}
		sh := w.Shape()
		perSpan := sh.BytesPerTrace / sh.SpansPerTrace
		logf(cfg.Log, "workload of %.0f KiB per span: every LLM input and output %d B, %.1f KiB per span, %.0f KiB per trace", kib, io, perSpan/1024, sh.BytesPerTrace/1024)
		for _, b := range cfg.Builds {
			if !slices.Contains(cfg.SizedBuilds, b.Name) {
				continue
			}
			s, err := ladder(ctx, cfg, w, b)
			rep.Sized = append(rep.Sized, SizedResult{
				Build: b.Name, KiBPerSpan: kib, BytesPerSpan: perSpan, IOBytes: io,
				Steps: s.steps, Sustained: s.sustained, Peak: peakRate(s.steps), PeakRSS: s.peakRSS,
			})
			if err != nil {
				return fmt.Errorf("build %s at %.0f KiB per span: %w", b.Name, kib, err)
			}
		}
	}
	return nil
}

// sizedMarkdown writes the sustained rates by span size, today's mix among them.
func (r Report) sizedMarkdown(p func(string, ...any)) {
	if len(r.Sized) == 0 {
		return
	}
	type row struct {
		label             string
		build             string
		perSpan           float64
		sustained, peaked float64
	}
	var rows []row
	mix := r.Shape.BytesPerTrace / max(1, r.Shape.SpansPerTrace)
	for _, res := range r.Results {
		if slices.Contains(r.Config.SizedBuilds, res.Build.Name) {
			rows = append(rows, row{"the mix", res.Build.Name, mix, res.Sustained, res.Peak})
		}
	}
	for _, sz := range r.Sized {
		rows = append(rows, row{fmt.Sprintf("%.0f KiB (every LLM input and output %.1f KiB)", sz.KiBPerSpan, float64(sz.IOBytes)/1024), sz.Build, sz.BytesPerSpan, sz.Sustained, sz.Peak})
	}
	find := func(label, build string) (row, bool) {
		for _, x := range rows {
			if x.label == label && x.build == build {
				return x, true
			}
		}
		return row{}, false
	}
	p("## Sustained input rate by span size")
	p("")
	p("The same search, by the rule under \"How it was measured\", on the workload of the run and on workloads whose every LLM input and output is of one size, chosen so that the encoded OTLP averages the given KiB per input span (plain spans included); one search per build and size, the builds taking turns at each size. MB/s is the encoded OTLP the collector took at the highest rate.")
	p("")
	p("| workload | KiB per input span | build | sustained input rate (spans/s) | highest input rate taken (spans/s) | MB/s at the highest | A/build sustained | A/build highest |")
	p("|---|---:|---|---:|---:|---:|---:|---:|")
	for _, x := range rows {
		vs, vp := "", ""
		if a, ok := find(x.label, "A"); ok && x.build != "A" {
			vs, vp = fmt.Sprintf("%.2f", ratio(a.sustained, x.sustained)), fmt.Sprintf("%.2f", ratio(a.peaked, x.peaked))
		}
		p("| %s | %.1f | %s | %.0f | %.0f | %.1f | %s | %s |", x.label, x.perSpan/1024, x.build, x.sustained, x.peaked, x.peaked*x.perSpan/1e6, vs, vp)
	}
	p("")
}
