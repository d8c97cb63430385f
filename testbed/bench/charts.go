package bench

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// buildColors are the builds' colours in every chart.
var buildColors = map[string]string{"A": "#2b6cb0", "M": "#63b3ed", "B": "#718096", "B1": "#a0aec0", "C": "#dd6b20", "C2": "#38a169", "S": "#805ad5"}

// PerCore is the build's input spans per collector CPU-second at the highest rate that held:
// what one core of the collector gets through, whatever the sender managed.
func PerCore(res Result) float64 {
	best := -1
	for i, st := range res.Steps {
		if st.Held && st.CollectorCores > 0 && (best < 0 || st.Rate > res.Steps[best].Rate) {
			best = i
		}
	}
	if best < 0 {
		return 0
	}
	return res.Steps[best].Accepted / res.Steps[best].CollectorCores
}

func heldStep(res Result) (Step, bool) {
	var out Step
	ok := false
	for _, st := range res.Steps {
		if st.Held && st.Rate >= out.Rate {
			out, ok = st, true
		}
	}
	return out, ok
}

// headlineMarkdown writes the ratios that matter most in one table, how the run was pinned and
// the per-core rates.
func (r Report) headlineMarkdown(p func(string, ...any)) {
	if a, ok := r.Result("A"); ok {
		p("**Headline ratios** (below 1: A uses less, or gets through less for the rate columns):")
		p("")
		p("| ratio | CPU per input span | peak RSS, fixed run | sustained input rate%s | highest input rate taken | spans per collector CPU-second |", map[bool]string{true: " on one core", false: ""}[r.Config.Pin.Enabled])
		p("|---|---:|---:|---:|---:|---:|")
		for _, o := range r.Results {
			if o.Build.Name == "A" {
				continue
			}
			p("| A/%s | %.2f | %.2f | %.2f | %.2f | %.2f |", o.Build.Name, ratio(a.CPUPer100k, o.CPUPer100k), ratio(float64(a.PeakRSS), float64(o.PeakRSS)),
				ratio(a.Sustained, o.Sustained), ratio(a.Peak, o.Peak), ratio(PerCore(a), PerCore(o)))
		}
		p("")
	}
	p("**Pinning:** %s.", r.Config.Pin.Describe())
	p("")
	if r.Config.MemoryLimit != "" {
		p("**Memory limit:** every collector runs with `GOMEMLIMIT=%s`, the gateway's container limit in distribution/kubernetes.", r.Config.MemoryLimit)
		p("")
	}
	p("| build | sustained input rate (spans/s)%s | spans per collector CPU-second at the highest rate held | collector / sender CPU at that step (cores) | first failed step: what ran out |", map[bool]string{true: " on one collector core", false: ""}[r.Config.Pin.Enabled])
	p("|---|---:|---:|---|---|")
	for _, res := range r.Results {
		st, _ := heldStep(res)
		failed := ""
		for _, s := range res.Steps {
			if !s.Held && !s.Repeated {
				failed = fmt.Sprintf("%.0f spans/s: %s", s.Rate, whatRanOut(s, r.Config.Pin.Enabled))
				break
			}
		}
		p("| %s | %s | %.0f | %.2f / %.2f | %s |", res.Build.Name, sustainedOf(res), PerCore(res), st.CollectorCores, st.DriverCores, failed)
	}
	p("")
}

// stepsCPUMarkdown writes the CPU of collector and sender at each step of the rate search.
func (r Report) stepsCPUMarkdown(p func(string, ...any)) {
	p("## Rate search: who had the CPU")
	p("")
	p("Collector and sender (load generator and platform, the driver process) CPU while each step sent, in cores; how busy their CPUs were with anything, other processes of the shared machine included (%s). A failed step is put down to the side that ran out: the collector when it refused, did not answer, or used its CPU (≥ %.2f cores) while the sender had room; the sender in the opposite case; the collector's CPU when other processes kept it busy while the sender needed little (its CPU for the reached rate scaled to the asked rate, under 0.25 cores); both CPUs when both were busy with other processes and neither side can be blamed.", r.Config.Pin.Describe(), saturated)
	p("")
	p("| build | asked (spans/s) | accepted | collector cores | collector's CPU busy | sender cores | sender's CPU busy | held | what ran out |")
	p("|---|---:|---:|---:|---:|---:|---:|---|---|")
	for _, res := range r.Results {
		for _, st := range res.Steps {
			ranOut := ""
			if !st.Held {
				ranOut = whatRanOut(st, r.Config.Pin.Enabled) // from the figures, so that --render applies the current rule
			}
			if st.Repeated {
				ranOut += " (crowded out: run again)"
			}
			p("| %s | %.0f | %.0f | %.2f | %.0f%% | %.2f | %.0f%% | %v | %s |", res.Build.Name, st.Rate, st.Accepted, st.CollectorCores, 100*st.CollectorCPUBusy, st.DriverCores, 100*st.DriverCPUBusy, st.Held, ranOut)
		}
	}
	p("")
}

// Chart files beside bench.md.
const (
	chartPrompt = "bench-prompt.svg"
	chartOpen   = "bench-open.svg"
	chartScores = "bench-scores.svg"
	chartStages = "bench-stages.svg"
	profileFile = "bench-a-cpu.pprof"
)

// curvesMarkdown writes the cost curves' section.
func (r Report) curvesMarkdown(p func(string, ...any)) {
	c := r.Curves
	if c == nil {
		return
	}
	p("## Cost curves")
	p("")
	p("Each point is a fresh collector%s on its own workload; the charts are readable alone, the tables give the figures.", map[bool]string{true: ", pinned like the rate search,", false: ""}[r.Config.Pin.Enabled])
	p("")
	for _, e := range c.Errors {
		p("- **Not measured:** %s", e)
	}
	if len(c.Errors) > 0 {
		p("")
	}
	if len(c.Prompt) > 0 {
		p("### CPU per span against prompt size")
		p("")
		p("![CPU per span against prompt size](%s)", chartPrompt)
		p("")
		p("Every LLM input and output of the workload of one size (6 traces in the pool, one per instrumentation shape when the workload mixes them, up to %d MiB or %d spans per point), sent as fast as the collector takes it, two requests in flight. CPU from the first request to the last delivery, per accepted input span (GenAI and plain spans alike).", c.Options.PromptBytes>>20, c.Options.PromptSpans)
		p("")
		p("| prompt size | build | µs CPU per input span | input spans | peak RSS (MiB) | lost |")
		p("|---:|---|---:|---:|---:|---:|")
		for _, pt := range c.Prompt {
			p("| %s | %s | %.1f | %d | %.0f | %d |", bytesLabel(pt.IOBytes), pt.Build, pt.MicrosPerSpan, pt.InputSpans, mib(pt.PeakRSS), pt.Lost)
		}
		p("")
	}
	if len(c.Open) > 0 {
		p("### Peak RSS against traces open at once")
		p("")
		p("![Peak RSS against traces open at once](%s)", chartOpen)
		p("")
		p("Long-running agent traces: each sends an LLM span (1 KiB input and output, kept) and its HTTP call (dropped) whose agent span never arrives during the step. The span filter holds each LLM span for `wait_duration`, then sends it on and remembers the trace's open parent for `late_parent_window` (15 min): every trace stays in memory. Peak RSS is VmHWM once every LLM span was delivered; traces in memory and the filter's memory estimate are its own gauges when the sending ended.")
		p("")
		p("| traces open | build | peak RSS (MiB) | traces in memory | filter memory estimate (MiB) | LLM spans delivered |")
		p("|---:|---|---:|---:|---:|---:|")
		for _, pt := range c.Open {
			p("| %d | %s | %.0f | %d | %.1f | %d |", pt.Traces, pt.Build, mib(pt.PeakRSS), pt.InMemory, mib(pt.MemoryBytes), pt.Delivered)
		}
		p("")
	}
	if len(c.Scores) > 0 {
		p("### Scores per CPU-second of the connector and the exporter")
		p("")
		p("![Scores per CPU-second](%s)", chartScores)
		p("")
		p("Build S: `bin/svc-otelcol` with `testbed/peer/scores-config.yaml`, the svcscore connector (masking with the six builtin rules) and the svc exporter (queue on disk) alone. Spans with k `gen_ai.evaluation.result` events each (a numeric score with an explanation), %d scores per point, two requests in flight; CPU from the first request until the platform held every score.", c.Options.Scores)
		p("")
		p("| evaluation events per span | scores sent | delivered | collector CPU (s) | scores per CPU-second | peak RSS (MiB) |")
		p("|---:|---:|---:|---:|---:|---:|")
		for _, pt := range c.Scores {
			p("| %d | %d | %d | %.2f | %.0f | %.0f |", pt.EventsPerSpan, pt.Scores, pt.Delivered, pt.CPU.Seconds(), pt.PerCPUSecond, mib(pt.PeakRSS))
		}
		p("")
	}
	if s := c.Stages; s != nil {
		p("### A's CPU by stage")
		p("")
		p("![A's CPU by stage](%s)", chartStages)
		p("")
		p("A CPU profile of build A (the pprof extension on a free port, `/debug/pprof/profile?seconds=%d`) at %.0f spans/s; %.1f s of CPU sampled. Each sample goes to the stage of its innermost frame that belongs to one: masking (`pkg/masking`, also when the metadata processor or the score connector calls it), metadata (`svcmetadataprocessor`), filter (`svcspanfilterprocessor`, its journal on disk included), scores (`svcscoreconnector`), export (`svcexporter`, `exporterhelper`: the queue on disk, gzip, HTTP), receive (`otlpreceiver`, decoding, the HTTP and gRPC servers), GC (the runtime's background workers; allocation and assist count to the stage that allocates), other.", int(s.Duration.Seconds()), s.Rate, s.CPU.Seconds())
		p("")
		p("| stage | CPU (s) | share |")
		p("|---|---:|---:|")
		for _, st := range s.Stages {
			p("| %s | %.2f | %.1f%% |", st.Stage, st.CPU.Seconds(), 100*st.Share)
		}
		p("")
		p("The functions with the most CPU of their own (flat), to check the attribution (the raw profile: `%s`, `go tool pprof -top %s`):", profileFile, profileFile)
		p("")
		p("| function | its CPU by stage | CPU (s) |")
		p("|---|---|---:|")
		for _, f := range s.Top {
			p("| `%s` | %s | %.2f |", f.Function, f.Stage, f.CPU.Seconds())
		}
		p("")
	}
}

func bytesLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d B", n)
	}
}

// writeCharts writes the curves' charts beside bench.md.
func (r Report) writeCharts(dir string) error {
	c := r.Curves
	if c == nil {
		return nil
	}
	stamp := fmt.Sprintf("%s, %s", r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Machine)
	charts := map[string]string{}
	if len(c.Prompt) > 0 {
		var series []chartSeries
		for _, pt := range c.Prompt {
			series = addPoint(series, pt.Build, float64(pt.IOBytes), pt.MicrosPerSpan)
		}
		charts[chartPrompt] = lineChart("CPU per input span against prompt size", "size of each LLM input and output (log scale)", "µs of collector CPU per input span (log scale)", true, true, series, stamp)
	}
	if len(c.Open) > 0 {
		var series []chartSeries
		for _, pt := range c.Open {
			series = addPoint(series, pt.Build, float64(pt.Traces), mib(pt.PeakRSS))
		}
		charts[chartOpen] = lineChart("Peak RSS against agent traces open at once", "traces open at once (log scale)", "peak RSS (MiB)", true, false, series, stamp)
	}
	if len(c.Scores) > 0 {
		var series []chartSeries
		for _, pt := range c.Scores {
			series = addPoint(series, "S", float64(pt.EventsPerSpan), pt.PerCPUSecond)
		}
		charts[chartScores] = lineChart("Scores per CPU-second: svcscore connector + svc exporter", "evaluation events per span (log scale)", "scores delivered per collector CPU-second", true, false, series, stamp)
	}
	if c.Stages != nil {
		charts[chartStages] = stageChart(*c.Stages, stamp)
		if len(c.Stages.Raw) > 0 {
			charts[profileFile] = string(c.Stages.Raw)
		}
	}
	for name, svg := range charts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return nil
}

type chartSeries struct {
	name string
	x, y []float64
}

func addPoint(series []chartSeries, name string, x, y float64) []chartSeries {
	i := slices.IndexFunc(series, func(s chartSeries) bool { return s.name == name })
	if i < 0 {
		series = append(series, chartSeries{name: name})
		i = len(series) - 1
	}
	series[i].x = append(series[i].x, x)
	series[i].y = append(series[i].y, y)
	return series
}

// lineChart draws series as lines with marked points, on linear or log axes, with a legend.
func lineChart(title, xLabel, yLabel string, logX, logY bool, series []chartSeries, stamp string) string {
	const w, h, left, right, top, bottom = 720, 420, 80, 110, 40, 70
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	tr := func(v float64, log bool) float64 {
		if log {
			return math.Log10(math.Max(v, 1e-9))
		}
		return v
	}
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for i := range s.x {
			x0, x1 = math.Min(x0, tr(s.x[i], logX)), math.Max(x1, tr(s.x[i], logX))
			y0, y1 = math.Min(y0, tr(s.y[i], logY)), math.Max(y1, tr(s.y[i], logY))
		}
	}
	if !logY {
		y0 = 0
	} else {
		y0 = math.Floor(y0) // down to a power of ten, which gets a tick
	}
	if x1 <= x0 {
		x1 = x0 + 1
	}
	if y1 <= y0 {
		y1 = y0 + 1
	}
	y1 += (y1 - y0) * 0.08
	px := func(v float64) float64 { return float64(left) + (tr(v, logX)-x0)/(x1-x0)*pw }
	py := func(v float64) float64 { return float64(top) + ph - (tr(v, logY)-y0)/(y1-y0)*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	// Axes and grid: ticks at the points' x values, five y ticks.
	fmt.Fprintf(&b, `<line x1="%d" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#333"/>`+"\n", left, float64(top)+ph, float64(left)+pw, float64(top)+ph)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%.0f" stroke="#333"/>`+"\n", left, top, left, float64(top)+ph)
	var xs []float64
	for _, s := range series {
		for _, x := range s.x {
			if !slices.Contains(xs, x) {
				xs = append(xs, x)
			}
		}
	}
	for _, x := range xs {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.0f" stroke="#e2e8f0"/>`+"\n", px(x), top, px(x), float64(top)+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", px(x), float64(top)+ph+16, html.EscapeString(axisLabel(x, strings.Contains(xLabel, "size"))))
	}
	for _, v := range yTicks(y0, y1, logY) {
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#e2e8f0"/>`+"\n", left, y, float64(left)+pw, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, html.EscapeString(axisLabel(v, false)))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle" fill="#333">%s</text>`+"\n", float64(left)+pw/2, h-bottom+36, html.EscapeString(xLabel))
	fmt.Fprintf(&b, `<text transform="translate(18,%.0f) rotate(-90)" text-anchor="middle" fill="#333">%s</text>`+"\n", float64(top)+ph/2, html.EscapeString(yLabel))
	for i, s := range series {
		color := buildColors[s.name]
		if color == "" {
			color = "#4a5568"
		}
		var pts []string
		for j := range s.x {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.x[j]), py(s.y[j])))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), color)
		for j := range s.x {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s</title></circle>`+"\n", px(s.x[j]), py(s.y[j]), color, html.EscapeString(s.name), html.EscapeString(short(s.y[j])))
		}
		// The legend names each line and gives its last value.
		ly := top + 10 + 20*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", w-right+12, ly, w-right+32, ly, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", w-right+36, ly+4, html.EscapeString(s.name))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#777" font-size="10">%s</text>`+"\n", left, h-8, html.EscapeString(stamp+"; shared machine"))
	b.WriteString("</svg>\n")
	return b.String()
}

// yTicks are round values in the axis' range: powers of ten (and 2×, 5× when few) on a log axis,
// multiples of 1, 2 or 5 × a power of ten on a linear one.
func yTicks(lo, hi float64, log bool) []float64 {
	var out []float64
	if log {
		for _, m := range [][]float64{{1}, {1, 2, 5}} {
			out = out[:0]
			for k := math.Floor(lo); k <= math.Ceil(hi); k++ {
				for _, f := range m {
					if v := f * math.Pow(10, k); math.Log10(v) >= lo-1e-9 && math.Log10(v) <= hi+1e-9 {
						out = append(out, v)
					}
				}
			}
			if len(out) >= 3 {
				break
			}
		}
		return out
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, f := range []float64{1, 2, 5, 10} {
		if f*mag >= raw {
			step = f * mag
			break
		}
	}
	for v := math.Ceil(lo/step) * step; v <= hi+1e-9; v += step {
		out = append(out, v)
	}
	return out
}

func axisLabel(x float64, isBytes bool) string {
	if isBytes && x == math.Trunc(x) {
		return bytesLabel(int(x))
	}
	if x >= 1000 && math.Mod(x, 1000) == 0 {
		return fmt.Sprintf("%.0fk", x/1000)
	}
	if x == math.Trunc(x) {
		return fmt.Sprintf("%.0f", x)
	}
	return short(x)
}

// stageChart draws the stage split as horizontal bars, largest share first kept in pipeline
// order so that stages read left to right as data flows.
func stageChart(s StageSplit, stamp string) string {
	const w, left, top, barH, gap = 720, 150, 50, 26, 10
	h := top + len(s.Stages)*(barH+gap) + 40
	maxShare := 0.0
	for _, st := range s.Stages {
		maxShare = math.Max(maxShare, st.Share)
	}
	if maxShare == 0 {
		maxShare = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="20" y="24" font-size="15" font-weight="bold">%s</text>`+"\n",
		html.EscapeString(fmt.Sprintf("Build A's CPU by stage (profile at %.0f spans/s, %.1f s CPU sampled)", s.Rate, s.CPU.Seconds())))
	for i, st := range s.Stages {
		y := top + i*(barH+gap)
		bw := (float64(w-left-120) * st.Share / maxShare)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+barH/2+4, html.EscapeString(st.Stage))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y, bw, barH, buildColors["A"])
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", float64(left)+bw+6, y+barH/2+4, html.EscapeString(fmt.Sprintf("%.1f%% (%.2f s)", 100*st.Share, st.CPU.Seconds())))
	}
	fmt.Fprintf(&b, `<text x="20" y="%d" fill="#777" font-size="10">%s</text>`+"\n", h-10, html.EscapeString(stamp+"; shared machine"))
	b.WriteString("</svg>\n")
	return b.String()
}
