package bench

import (
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleReport() Report {
	return Report{
		Started: time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC),
		Config:  Config{Protocol: "http", Concurrency: 4, StepDuration: 10 * time.Second},
		Results: []Result{
			{Build: Build{Name: "A", Delivers: GenAISpansAndScores}, Sustained: 4000, LadderPeakRSS: 120 << 20,
				FixedRun: FixedRun{CPUPer100k: 3, PeakRSS: 90 << 20, BytesPer100k: 20e6},
				Steps:    []Step{{Rate: 4000, Held: true}, {Rate: 8000, Why: "sender reached only 5000 spans/s"}}},
			{Build: Build{Name: "B", Delivers: AllSpans}, Sustained: 8000, LadderPeakRSS: 200 << 20,
				FixedRun: FixedRun{CPUPer100k: 2, PeakRSS: 60 << 20, BytesPer100k: 25e6}},
			{Build: Build{Name: "C", Delivers: GenAISpans}, Sustained: 1000, LadderPeakRSS: 110 << 20,
				FixedRun: FixedRun{CPUPer100k: 12, PeakRSS: 100 << 20, BytesPer100k: 18e6}},
		},
	}
}

// The ratios divide A's figures by B's and C's, and say whether the targets are met.
func TestRatios(t *testing.T) {
	got := map[string]Ratio{}
	for _, q := range sampleReport().Ratios() {
		got[q.Name] = q
	}
	for name, want := range map[string]float64{
		"CPU per input span A/B":     1.5,
		"CPU per input span A/C":     0.25,
		"sustained input rate A/B":   0.5,
		"peak RSS (fixed run) A/C":   0.9,
		"bytes to the platform A/B":  0.8,
		"peak RSS (rate search) A/B": 0.6,
	} {
		if q, ok := got[name]; !ok || math.Abs(q.Value-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, q.Value, want)
		}
	}
	if v := verdict(1.5, got["CPU per input span A/B"].Target); v != "(met)" {
		t.Errorf("1.5 against %q: %s", got["CPU per input span A/B"].Target, v)
	}
	if v := verdict(0.6, got["CPU per input span A/C"].Target); v != "(missed)" {
		t.Errorf("0.6 against %q: %s", got["CPU per input span A/C"].Target, v)
	}
}

// Latency percentiles are by nearest rank: p50 of 1..100 ms is 50 ms, p99 is 99 ms.
func TestLatencyPercentiles(t *testing.T) {
	for _, tc := range []struct {
		name     string
		samples  []time.Duration
		p50, p99 time.Duration
	}{
		{name: "none"},
		{name: "one", samples: []time.Duration{7 * time.Millisecond}, p50: 7 * time.Millisecond, p99: 7 * time.Millisecond},
		{name: "1..100 shuffled", samples: func() []time.Duration {
			var s []time.Duration
			for i := 100; i >= 1; i-- {
				s = append(s, time.Duration(i)*time.Millisecond)
			}
			return s
		}(), p50: 50 * time.Millisecond, p99: 99 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := latencyOf(tc.samples)
			if l.Spans != int64(len(tc.samples)) || l.P50 != tc.p50 || l.P99 != tc.p99 {
				t.Errorf("latencyOf = %+v, want %d spans, p50 %v, p99 %v", l, len(tc.samples), tc.p50, tc.p99)
			}
		})
	}
}

// Write leaves a Markdown table with a row per build, a chart that is well-formed SVG with a
// bar per build and figure, and the raw figures.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	if err := sampleReport().Write(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"| A |", "| B |", "| C |", "![chart](bench.svg)", "| CPU per input span A/C | 0.25 | ≤ 0.5 (met) |"} {
		if !strings.Contains(string(md), row) {
			t.Errorf("bench.md lacks %q", row)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "bench.svg"))
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(string(svg)))
	bars := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("bench.svg is not well-formed: %v", err)
		}
		if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "rect" {
			bars++
		}
	}
	if want := 1 + 4*3; bars != want { // the background, then 4 panels of 3 bars
		t.Errorf("bench.svg has %d rects, want %d", bars, want)
	}
	back, err := ReadReport(filepath.Join(dir, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	if back.Markdown("bench.svg") != string(md) {
		t.Error("the report read back from bench.json renders differently")
	}
}

// ReadUsage reads this process's own CPU time and memory.
func TestReadUsage(t *testing.T) {
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) { // burn some CPU so that there is some to read
	}
	u, err := ReadUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.CPU <= 0 || u.RSS <= 0 || u.PeakRSS < u.RSS {
		t.Errorf("usage %+v", u)
	}
}

// The summary of the rounds takes medians, and the range of the CPU figures.
func TestSummarizeTakesMedians(t *testing.T) {
	r := Result{Runs: []FixedRun{
		{CPUPer100k: 5, PeakRSS: 70, BytesPer100k: 1, InputSpans: 9},
		{CPUPer100k: 3, PeakRSS: 90, BytesPer100k: 2, InputSpans: 9},
		{CPUPer100k: 4, PeakRSS: 80, BytesPer100k: 9, InputSpans: 9},
	}}
	r.summarize()
	if r.CPUPer100k != 4 || r.PeakRSS != 80 || r.BytesPer100k != 2 || r.CPURange != [2]float64{3, 5} || r.InputSpans != 9 {
		t.Errorf("summary %+v, range %v", r.FixedRun, r.CPURange)
	}
}
