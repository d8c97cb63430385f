package bench

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/svc/svc-collector/testbed/loadgen"
)

// runSearch plays the search against a collector that holds every rate up to capacity.
func runSearch(cfg Config, capacity float64) (rates []float64, sustained float64) {
	s := newRateSearch(cfg.withDefaults())
	for {
		rate, ok := s.next()
		if !ok {
			return rates, s.sustained()
		}
		rates = append(rates, rate)
		s.record(rate, rate <= capacity)
	}
}

func TestRateSearchSteps(t *testing.T) {
	bench := Config{StartRate: 500, MaxRate: 64000} // make bench: 1/16, at most 6 bisections
	for _, tc := range []struct {
		name      string
		cfg       Config
		capacity  float64
		rates     []float64
		sustained float64
	}{
		{name: "A of the last make bench, held 12000 failed 14000 with two bisections", cfg: bench, capacity: 14500,
			rates:     []float64{500, 1000, 2000, 4000, 8000, 16000, 12000, 14000, 15000, 14500},
			sustained: 14500},
		{name: "M of the last make bench, held 16000 failed 20000 with two bisections", cfg: bench, capacity: 16100,
			rates:     []float64{500, 1000, 2000, 4000, 8000, 16000, 32000, 24000, 20000, 18000, 17000},
			sustained: 16000},
		{name: "the old rule: two bisections", cfg: Config{StartRate: 500, MaxRate: 64000, Refinements: 2}, capacity: 14500,
			rates:     []float64{500, 1000, 2000, 4000, 8000, 16000, 12000, 14000},
			sustained: 14000},
		{name: "no bisection (--quick)", cfg: Config{StartRate: 500, MaxRate: 64000, Refinements: -1}, capacity: 14500,
			rates:     []float64{500, 1000, 2000, 4000, 8000, 16000},
			sustained: 8000},
		{name: "every step held up to the highest", cfg: Config{StartRate: 500, MaxRate: 4000}, capacity: math.Inf(1),
			rates:     []float64{500, 1000, 2000, 4000},
			sustained: 4000},
		{name: "the first step fails: bisection below it, capped", cfg: Config{StartRate: 500, MaxRate: 64000}, capacity: 100,
			rates:     []float64{500, 250, 125, 63, 94, 110, 102},
			sustained: 94},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rates, sustained := runSearch(tc.cfg, tc.capacity)
			if !slices.Equal(rates, tc.rates) || sustained != tc.sustained {
				t.Errorf("steps %v, sustained %v; want %v, %v", rates, sustained, tc.rates, tc.sustained)
			}
		})
	}
}

// Whatever the capacity, the default search ends within 1/16 of the lowest failed rate, so two
// builds within a few percent of each other are measured within a few percent; with two
// bisections they could come out 25% apart (A 14500 against M 16100: 14000 against 16000 was
// the lucky case, 12000 against 16000 the unlucky one).
func TestRateSearchResolution(t *testing.T) {
	cfg := Config{StartRate: 500, MaxRate: 64000}
	for capacity := 600.0; capacity < 60000; capacity *= 1.07 {
		rates, sustained := runSearch(cfg, capacity)
		if sustained > capacity || sustained < capacity*(1-1.0/16)-1 {
			t.Errorf("capacity %.0f: sustained %.0f after %v", capacity, sustained, rates)
		}
		if len(rates) > 18 {
			t.Errorf("capacity %.0f: %d steps", capacity, len(rates))
		}
	}
	for _, pair := range [][2]float64{{14500, 16100}, {15900, 16100}, {11900, 12100}} {
		_, a := runSearch(cfg, pair[0])
		_, m := runSearch(cfg, pair[1])
		if r, truth := a/m, pair[0]/pair[1]; math.Abs(r-truth) > 1.0/16 {
			t.Errorf("capacities %v: measured ratio %.2f, true %.2f", pair, r, truth)
		}
	}
}

func TestPeakRate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []Step
		want  float64
	}{
		{name: "none"},
		{name: "the failed step that took the most counts", steps: []Step{
			{Rate: 8000, Accepted: 8010, Held: true},
			{Rate: 16000, Accepted: 14629},
			{Rate: 12000, Accepted: 12026, Held: true},
		}, want: 14629},
		{name: "a step that lost spans does not count", steps: []Step{
			{Rate: 8000, Accepted: 8010, Held: true},
			{Rate: 16000, Accepted: 15000, Lost: 3},
		}, want: 8010},
		{name: "a step with refused or unanswered requests does not count", steps: []Step{
			{Rate: 4000, Accepted: 4050, Held: true},
			{Rate: 8000, Accepted: 7000, Refused: 2},
			{Rate: 6000, Accepted: 5900, Failed: 1},
		}, want: 4050},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := peakRate(tc.steps); got != tc.want {
				t.Errorf("peakRate = %v, want %v", got, tc.want)
			}
		})
	}
}

// Two searches of a build: the sustained rate is the best of them and the highest rate taken
// the highest of every step, the steps say which search they belong to, and the report shows
// each search's value.
func TestTwoSearches(t *testing.T) {
	res := Result{Build: Build{Name: "A"}}
	res.addSearch(searchResult{number: 1, sustained: 15000, peakRSS: 100,
		steps: []Step{{Rate: 15000, Accepted: 15000, Held: true}, {Rate: 16000, Accepted: 15200}}})
	res.addSearch(searchResult{number: 2, sustained: 6750, peakRSS: 200, // crowded out
		steps: []Step{{Rate: 6750, Accepted: 6788, Held: true}, {Rate: 7000, Accepted: 6605}}})
	if res.Sustained != 15000 || res.Peak != 15200 || res.LadderPeakRSS != 200 {
		t.Errorf("sustained %v, peak %v, peak RSS %v; want 15000, 15200, 200", res.Sustained, res.Peak, res.LadderPeakRSS)
	}
	if res.Steps[0].Search != 1 || res.Steps[3].Search != 2 {
		t.Errorf("steps not numbered by search: %+v", res.Steps)
	}
	if got := sustainedOf(res); got != "15000 (15000, 6750)" {
		t.Errorf("sustainedOf = %q", got)
	}
	if got := peak(res); got != "15200 (15200, 6788)" {
		t.Errorf("peak = %q", got)
	}
}

// The workload of a span size averages that size per input span.
func TestSizedWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("generates workloads through the SDK")
	}
	for _, kib := range []float64{4, 16} {
		w, io, err := sizedWorkload(loadgen.WorkloadOptions{Seed: 1, Templates: 16, Mix: true}, kib)
		if err != nil {
			t.Fatal(err)
		}
		sh := w.Shape()
		if got := sh.BytesPerTrace / sh.SpansPerTrace / 1024; math.Abs(got-kib)/kib > 0.05 {
			t.Errorf("%.0f KiB per span: LLM input and output %d B gives %.2f KiB per span", kib, io, got)
		}
	}
}

// The report has a section of the rates by span size, with A's ratios at each size.
func TestSizedMarkdown(t *testing.T) {
	rep := sampleReport()
	rep.Config.SizedBuilds = []string{"A", "B"}
	rep.Results[0].Peak, rep.Results[1].Peak = 4500, 9000
	rep.Sized = []SizedResult{
		{Build: "A", KiBPerSpan: 16, BytesPerSpan: 16 << 10, IOBytes: 56 << 10, Sustained: 3000, Peak: 3300},
		{Build: "B", KiBPerSpan: 16, BytesPerSpan: 16 << 10, IOBytes: 56 << 10, Sustained: 2000, Peak: 2200},
	}
	md := rep.Markdown("")
	for _, want := range []string{
		"## Sustained input rate by span size",
		"| 16 KiB (every LLM input and output 56.0 KiB) | 16.0 | B | 2000 | 2200 | 36.0 | 1.50 | 1.50 |",
		"| the mix | 0.0 | B | 8000 | 9000 | 0.0 | 0.50 | 0.50 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// A report written before the highest rate taken was kept gets it from its steps on --render.
func TestReadReportFillsPeak(t *testing.T) {
	rep := sampleReport()
	rep.Results[0].Steps = []Step{{Rate: 4000, Accepted: 4010, Held: true}, {Rate: 8000, Accepted: 5000, Why: "sender reached only 5000 spans/s"}}
	path := filepath.Join(t.TempDir(), "bench.json")
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := got.Result("A"); a.Peak != 5000 {
		t.Errorf("A's highest rate taken = %v, want 5000 (the failed step that lost nothing)", a.Peak)
	}
}

// The fixed runs go at half the lowest sustained rate, however high the search started.
func TestDefaultFixedRate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sustained []float64
		want      float64
	}{
		{name: "the slowest peer sets it, below the first step", sustained: []float64{13500, 16000, 1000, 750}, want: 375},
		{name: "a build that held nothing does not count", sustained: []float64{13500, 0, 6000}, want: 3000},
		{name: "none held a step", sustained: []float64{0, 0}, want: 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var results []Result
			for _, s := range tc.sustained {
				results = append(results, Result{Sustained: s})
			}
			if got := defaultFixedRate(results, 2000); got != tc.want {
				t.Errorf("defaultFixedRate = %v, want %v", got, tc.want)
			}
		})
	}
}
