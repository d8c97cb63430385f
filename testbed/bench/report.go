package bench

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Targets of the issue, reported against (never asserted).
const (
	targetCPUvsFloor = 1.5 // A/B
	targetCPUvsPeer  = 0.5 // A/C
	targetRSSvsPeer  = 1.5 // A/C
	// targetCPUvsMemoryQueue is issue 17's bound on the cost of persistence: A (queue on disk)
	// against M (queue in memory).
	targetCPUvsMemoryQueue = 1.10
)

// Ratio is one comparison of build A with another build.
type Ratio struct {
	Name   string
	Value  float64
	Target string // empty when the issue sets none
}

// Ratios compares A with B and with C on every figure.
func (r Report) Ratios() []Ratio {
	a, okA := r.Result("A")
	if !okA {
		return nil
	}
	var out []Ratio
	for _, other := range []string{"M", "B", "B1", "C", "C2"} {
		o, ok := r.Result(other)
		if !ok {
			continue
		}
		cpuTarget, rssTarget := "", ""
		switch other {
		case "M":
			cpuTarget = fmt.Sprintf("≤ %.2f", targetCPUvsMemoryQueue)
		case "B", "B1":
			cpuTarget = fmt.Sprintf("≤ %.1f", targetCPUvsFloor)
		default:
			cpuTarget = fmt.Sprintf("≤ %.1f", targetCPUvsPeer)
			rssTarget = fmt.Sprintf("≤ %.1f", targetRSSvsPeer)
		}
		out = append(out,
			Ratio{"CPU per input span A/" + other, ratio(a.CPUPer100k, o.CPUPer100k), cpuTarget},
			Ratio{"CPU per input span, idle use taken out, A/" + other, ratio(a.CPUPer100k-a.IdlePer100k, o.CPUPer100k-o.IdlePer100k), ""},
			Ratio{"sustained input rate A/" + other, ratio(a.Sustained, o.Sustained), ""},
			Ratio{"highest input rate taken (capacity at saturation) A/" + other, ratio(a.Peak, o.Peak), ""},
			Ratio{"spans per collector CPU-second at the highest rate held A/" + other, ratio(PerCore(a), PerCore(o)), ""},
			Ratio{"peak RSS (fixed run) A/" + other, ratio(float64(a.PeakRSS), float64(o.PeakRSS)), rssTarget},
			Ratio{"peak RSS (rate search) A/" + other, ratio(float64(a.LadderPeakRSS), float64(o.LadderPeakRSS)), ""},
			Ratio{"bytes to the platform A/" + other, ratio(a.BytesPer100k, o.BytesPer100k), ""},
			Ratio{"latency p50, client to platform, A/" + other, ratio(float64(a.Latency.P50), float64(o.Latency.P50)), ""},
			Ratio{"latency p99, client to platform, A/" + other, ratio(float64(a.Latency.P99), float64(o.Latency.P99)), ""},
		)
	}
	return out
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// Markdown is the report as a Markdown document.
func (r Report) Markdown(chart string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	cfg := r.Config
	p("# Side-by-side load run: svc-otelcol against the forwarding floor and the OTTL peers")
	p("")
	p("Run %s, %s, on %s; load average %s at the start, %s at the end. "+
		"The machine is shared: absolute figures are noisy, the ratios of builds measured one after another in the same run are what to read.",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Elapsed.Round(1e9), r.Machine, r.LoadAvg[0], r.LoadAvg[1])
	p("")
	if r.Error != "" {
		p("**The run did not finish** (%s): the figures below are what was measured until then.", r.Error)
		p("")
	}
	p("| build | what | CPU s per 100k input spans: median [range] (of it idle) | sustained input rate (spans/s) | highest input rate taken (spans/s) | peak RSS, fixed run (MiB) | peak RSS, rate search (MiB) | MB to the platform per 100k input spans | delivered in the fixed run |")
	p("|---|---|---:|---:|---:|---:|---:|---:|---|")
	for _, res := range r.Results {
		delivered := fmt.Sprintf("%d spans", res.Account.Spans.Delivered)
		if res.Build.Delivers == GenAISpansAndScores {
			delivered += fmt.Sprintf(", %d scores", res.Account.Scores.Delivered)
		}
		if l := res.Lost(); l > 0 {
			delivered += fmt.Sprintf(" (%d LOST over the rounds)", l)
		}
		p("| %s | %s | %.2f [%.2f–%.2f] (%.2f) | %s | %s | %.0f | %.0f | %.2f | %s |", res.Build.Name, res.Build.Title,
			res.CPUPer100k, res.CPURange[0], res.CPURange[1], res.IdlePer100k, sustainedOf(res), peak(res), mib(res.PeakRSS), mib(res.LadderPeakRSS), res.BytesPer100k/1e6, delivered)
	}
	p("")
	if chart != "" {
		p("![chart](%s)", chart)
		p("")
	}
	p("## Latency, client to platform")
	p("")
	p("Per span, from the moment the sender started the request that carried it until the platform had read the request that delivered it (loopback; the fixed runs, median of the rounds).")
	p("")
	p("| build | what | p50 (ms) | p99 (ms) | p50 of each round | p99 of each round | spans measured per round |")
	p("|---|---|---:|---:|---|---|---:|")
	for _, res := range r.Results {
		var p50s, p99s []string
		for _, run := range res.Runs {
			p50s = append(p50s, fmt.Sprintf("%.1f", millis(run.Latency.P50)))
			p99s = append(p99s, fmt.Sprintf("%.1f", millis(run.Latency.P99)))
		}
		p("| %s | %s | %.1f | %.1f | %s | %s | %d |", res.Build.Name, res.Build.Title, millis(res.Latency.P50), millis(res.Latency.P99),
			strings.Join(p50s, ", "), strings.Join(p99s, ", "), res.Latency.Spans)
	}
	p("")
	r.headlineMarkdown(p)
	p("## Ratios")
	p("")
	p("| ratio | value | target |")
	p("|---|---:|---|")
	for _, q := range r.Ratios() {
		target := q.Target
		if target != "" {
			target += " " + verdict(q.Value, q.Target)
		}
		if math.IsNaN(q.Value) {
			continue // not measured in this run (a build without the rate search, for instance)
		}
		p("| %s | %.2f | %s |", q.Name, q.Value, target)
	}
	p("")
	if r.SameSpans != "" {
		p("**Same filter decisions (A and C, fixed run):** %s.", r.SameSpans)
		p("")
	}
	if r.SameSpansC2 != "" {
		p("**Same filter decisions (A and C2, fixed run):** %s.", r.SameSpansC2)
		p("")
	}
	r.sizedMarkdown(p)
	r.curvesMarkdown(p)
	p("## Workload")
	p("")
	o := r.Workload
	p("Agent traces of `testbed/workload` from seed %d (a pool of %d traces generated through the OpenTelemetry Go SDK, sent with fresh ids): "+
		"%.1f spans per trace of which %.0f%% ordinary HTTP/database spans, LLM input and output %d B – %d KiB each (log-uniform), %d–%d metadata keys per LLM span, "+
		"PII (e-mail, card number, API key) in %.0f%% of the traces, %.0f evaluation events per trace; %.0f KiB per trace encoded. "+
		"Sent over OTLP/%s, %d requests in flight, whole traces of about 512 spans per request.",
		o.Seed, r.Shape.Templates, r.Shape.SpansPerTrace, 100*r.Shape.PlainShare, o.IOMinBytes, o.IOMaxBytes>>10,
		o.MetadataMinKeys, o.MetadataMaxKeys, 100*o.PIIShare, r.Shape.ScoresPerTrace, r.Shape.BytesPerTrace/1024,
		strings.ToUpper(cfg.Protocol), cfg.Concurrency)
	p("")
	if o.Mix {
		p("The two LLM calls of each trace take the attribute shape of one instrumentation, the traces of the pool taking the shapes in turn (`workload.Shapes`): GenAI semantic conventions (`gen_ai.input.messages` / `gen_ai.output.messages`), the earlier conventions (`gen_ai.content.prompt` / `gen_ai.content.completion` events), OpenLLMetry (`gen_ai.prompt.N.*`, `gen_ai.completion.N.*`, `traceloop.association.properties.*`), OpenInference (`input.value`, `output.value`, `llm.input_messages.*`, `llm.output_messages.*`, a `metadata` JSON object), the Vercel AI SDK (scope `ai`, `ai.prompt.messages`, `ai.response.text`, `ai.telemetry.metadata.*`) and the svc SDK for Python v5 (`svc.observation.input` / `output`, metadata as JSON text).")
		p("")
	}
	p("## How it was measured")
	p("")
	p("- **Builds.** A: `bin/svc-otelcol` with `distribution/config.yaml` (exporter queue on disk, svc_file_storage). M: A with `--set exporters::svc::sending_queue::storage=null --set processors::svcspanfilter::storage=null` (nothing on disk): A/M is the cost of persistence. B: the same `svc-otelcol` binary (it contains the otlp receiver and the otlphttp exporter) with `testbed/peer/forward-config.yaml`: otlp → memory_limiter → otlphttp (gzip, Basic auth) to the platform's `/api/public/otel/v1/traces`. " +
		"C: an ocb build of contrib's filter, redaction and transform processors (`testbed/peer/builder-config.yaml`) with `testbed/peer/peer-config.yaml`, run with `--feature-gates=" + LambdaGate + "`; that file lists where C differs from A (no trace integrity, no scores, masks every attribute). " +
		"C2: the same binary and filter with `testbed/peer/peer-c2-config.yaml`, the strongest hand-written peer: the transform processor masks only the content attributes of each instrumentation (svcmetadata's coverage list) with the six builtin rules' patterns, where A masks every attribute. " +
		"All three have the same queue (1 GiB, `sizer: bytes`), retry and memory limiter settings.")
	p("- **Sustained input rate.** %s", searchRule(cfg))
	p("- **Highest input rate taken (capacity at saturation).** The highest input rate any step of the search took (spans accepted per second over the step), held or not, among the steps in which the collector refused and dropped no request and the platform received everything the step should deliver: at saturation the sender falls behind the asked rate, so the step fails, while what it sends still gets through. Over every step of every search; the issue's figure stays the sustained rate.")
	p("- **CPU, memory, bytes.** Fixed runs, %d rounds in which the builds take turns, each run with a fresh collector, on the same traces (same sequence numbers) at %.0f spans/s (half the lowest sustained rate, so that every build keeps up) for about %s; the table gives the median of the rounds. CPU is utime+stime from `/proc/<pid>/stat` from the first request until the platform held everything; idle is the collector's CPU use per second measured for %s before the load, times the run's duration (the ratio \"idle use taken out\" compares the rest); peak RSS is `VmHWM` from `/proc/<pid>/status` at the end; bytes are the request bodies the platform received, as sent (gzip).",
		cfg.Rounds, fixedRate(r), cfg.FixedDuration, cfg.IdleWindow)
	p("- **Latency.** The sender notes when it starts each request; the platform notes when it has read each request and keeps, per span id, the time of its first arrival (stats-only: one number per span). A span's latency is the difference; every expected span of every accepted trace is measured, p50 and p99 by nearest rank. Requests carry whole traces, so no span waits in the collector for a parent: each is delivered directly, and the figure is the receive → export path (queue, batching, the journal and the exporter) plus loopback HTTP both ways.")
	p("- **Same spans.** The platform counts deliveries per (trace id, span id); every expected span id of every accepted trace is looked up, and the platform's count of distinct spans must equal the matches (nothing unexpected).")
	if r.Config.Pin.Enabled {
		p("- **Sender and collector apart.** %s. The sender is cheap: every request is a pre-encoded OTLP body of whole traces from the pool with fresh trace and span ids and times written into its bytes, no encoding per request. The driver used %.1f s of CPU over the whole run; its CPU per step is in \"Rate search: who had the CPU\".", r.Config.Pin.Describe(), r.DriverCPU.Seconds())
	} else {
		p("- **The sender shares the machine.** The load generator and the local platform run in the driver process: it used %.1f s of CPU over the whole run. When a build's sustained rate is close to where the sender itself runs out of CPU, the rate ratio understates the difference between builds.", r.DriverCPU.Seconds())
	}
	p("")
	p("## Rate search steps")
	p("")
	p("| build | search | asked (spans/s) | offered | accepted | held | why not |")
	p("|---|---:|---:|---:|---:|---|---|")
	for _, res := range r.Results {
		for _, st := range res.Steps {
			p("| %s | %s | %.0f | %.0f | %.0f | %v | %s |", res.Build.Name, searchNumber(st), st.Rate, st.Offered, st.Accepted, st.Held, st.Why)
		}
	}
	for _, sz := range r.Sized {
		for _, st := range sz.Steps {
			p("| %s, %.0f KiB per span | | %.0f | %.0f | %.0f | %v | %s |", sz.Build, sz.KiBPerSpan, st.Rate, st.Offered, st.Accepted, st.Held, st.Why)
		}
	}
	p("")
	r.stepsCPUMarkdown(p)
	p("## Fixed-run accounts")
	p("")
	p("| build, round | CPU s per 100k | peak RSS (MiB) | spans sent | accepted | expected | delivered | lost | duplicated | unexpected | scores expected | delivered | lost | duplicated |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, res := range r.Results {
		for i, run := range res.Runs {
			s, c := run.Account.Spans, run.Account.Scores
			p("| %s %d | %.2f | %.0f | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |", res.Build.Name, i+1, run.CPUPer100k, mib(run.PeakRSS),
				s.Sent, s.Accepted, s.Expected, s.Delivered, s.Lost, s.Duplicated, s.Unexpected, c.Expected, c.Delivered, c.Lost, c.Duplicated)
		}
	}
	return b.String()
}

func millis(d time.Duration) float64 { return float64(d) / 1e6 }

func fixedRate(r Report) float64 {
	for _, res := range r.Results {
		if res.FixedRate > 0 {
			return res.FixedRate
		}
	}
	return 0
}

func sustained(res Result) string {
	if res.Sustained == 0 {
		return "below the first step"
	}
	for _, st := range res.Steps {
		if !st.Held {
			return fmt.Sprintf("%.0f", res.Sustained)
		}
	}
	return fmt.Sprintf("≥ %.0f (every step held)", res.Sustained)
}

// sustainedOf is the sustained rate with each search's when there were several.
func sustainedOf(res Result) string {
	v := sustained(res)
	if len(res.Searches) < 2 {
		return v
	}
	each := make([]string, len(res.Searches))
	for i, s := range res.Searches {
		each[i] = fmt.Sprintf("%.0f", s.Sustained)
	}
	return fmt.Sprintf("%s (%s)", v, strings.Join(each, ", "))
}

// peak is the highest input rate taken, with each search's when there were several.
func peak(res Result) string {
	if res.Peak == 0 {
		return ""
	}
	if len(res.Searches) < 2 {
		return fmt.Sprintf("%.0f", res.Peak)
	}
	each := make([]string, len(res.Searches))
	for i, s := range res.Searches {
		each[i] = fmt.Sprintf("%.0f", s.Peak)
	}
	return fmt.Sprintf("%.0f (%s)", res.Peak, strings.Join(each, ", "))
}

func searchNumber(st Step) string {
	if st.Search == 0 {
		return ""
	}
	return fmt.Sprint(st.Search)
}

// searchRule says exactly how the sustained rate was searched.
func searchRule(cfg Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Steps of %s from %.0f spans/s, doubling (up to %.0f) until a step fails (when the first fails, 0 counts as the rate that held)", cfg.StepDuration, cfg.StartRate, cfg.MaxRate)
	if cfg.Refinements > 0 && cfg.Resolution == 0 { // a report of a run before the rule below
		fmt.Fprintf(&b, ", then %d bisection steps", cfg.Refinements)
	} else if cfg.Refinements > 0 {
		fmt.Fprintf(&b, ", then bisection between the highest rate that held and the lowest that failed until that interval is at most 1/%.0f of the failed rate (at most %d bisection steps; from a doubling ladder that takes 3 or 4): the sustained rate is within about %.0f%% of the capacity the steps saw, so two builds a few percent apart no longer land a whole ladder step apart",
			cfg.Resolution, cfg.Refinements, 100/cfg.Resolution)
	} else {
		b.WriteString(", no bisection")
	}
	fmt.Fprintf(&b, ". A step holds when the collector refused no request (HTTP 429/503, gRPC RESOURCE_EXHAUSTED/UNAVAILABLE) and answered every request, the sender kept 95%% of the rate, and the platform held every span and score the step should deliver %s after its end. "+
		"A failed step restarts the collector; one that failed only because other processes took a pinned CPU (the collector refused, lost and dropped nothing and had less than %.2f cores, a pinned CPU was busy with other work) is run again, up to %d times, the same rule for every build. "+
		"The value is the highest rate that held, a lower bound within the last bisection interval.",
		cfg.DrainTimeout, saturated, cfg.Repeats)
	if cfg.Searches > 1 {
		fmt.Fprintf(&b, " The search runs %d times for each build, the builds taking turns (every build once, then again), so that a slow spell of the shared machine does not fall on one build's only search; the figure is the best of the searches, each search's value in brackets: other processes can only take CPU from the collector or the sender, never lend it, so a rate that held is one the build sustains and a lower search is one that was crowded (the median of two would be their mean, dragged down by the crowded one).", cfg.Searches)
	}
	return b.String()
}

func verdict(v float64, target string) string {
	var limit float64
	if _, err := fmt.Sscanf(strings.TrimPrefix(target, "≤ "), "%g", &limit); err != nil || math.IsNaN(v) {
		return ""
	}
	if v <= limit {
		return "(met)"
	}
	return "(missed)"
}

// SVG is a chart of the four figures, one panel each, a bar per build.
func (r Report) SVG() string {
	type panel struct {
		title string
		unit  string
		value func(Result) float64
	}
	panels := []panel{
		{"CPU per 100k input spans", "s (median of the rounds)", func(x Result) float64 { return x.CPUPer100k }},
		{"Sustained input rate", "spans/s", func(x Result) float64 { return x.Sustained }},
		{"Peak RSS, fixed run", "MiB", func(x Result) float64 { return mib(x.PeakRSS) }},
		{"To the platform per 100k spans", "MB (gzip)", func(x Result) float64 { return x.BytesPer100k / 1e6 }},
	}
	colors := buildColors
	const pw, ph, top, bottom, left = 240, 260, 50, 40, 20
	width := 2*left + len(panels)*pw
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, ph+top+bottom+30)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">svc-otelcol (A; M: nothing on disk) vs forwarding floor (B) vs contrib OTTL peers (C, C2)</text>`+"\n", left)
	for i, pn := range panels {
		x0 := left + i*pw
		maxV := 0.0
		for _, res := range r.Results {
			maxV = max(maxV, pn.value(res))
		}
		if maxV == 0 {
			maxV = 1
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0, top, html.EscapeString(pn.title))
		barW := (pw - 40) / max(1, len(r.Results))
		baseY := top + ph
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", x0, baseY, x0+pw-30, baseY)
		for j, res := range r.Results {
			v := pn.value(res)
			h := int(float64(ph-50) * v / maxV)
			x := x0 + 5 + j*barW
			color := colors[res.Build.Name]
			if color == "" {
				color = "#4a5568"
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", x, baseY-h, barW-10, h, color)
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x+(barW-10)/2, baseY-h-5, html.EscapeString(short(v)))
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x+(barW-10)/2, baseY+16, html.EscapeString(res.Build.Name))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">%s</text>`+"\n", x0, baseY+34, html.EscapeString(pn.unit))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">%s</text>`+"\n", left, ph+top+bottom+22,
		html.EscapeString(fmt.Sprintf("%s, %s; shared machine, compare ratios", r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Machine)))
	b.WriteString("</svg>\n")
	return b.String()
}

func short(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// ReadReport reads a report that Write saved as bench.json, to render it again.
func ReadReport(path string) (Report, error) {
	var r Report
	raw, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, err
	}
	for i, res := range r.Results {
		if res.Peak == 0 { // a report from before the highest rate taken was kept
			r.Results[i].Peak = peakRate(res.Steps)
		}
	}
	return r, nil
}

// Write writes bench.md, bench.svg and bench.json into dir.
func (r Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.svg"), []byte(r.SVG()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.md"), []byte(r.Markdown("bench.svg")), 0o644); err != nil {
		return err
	}
	if err := r.writeCharts(dir); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "bench.json"), raw, 0o644)
}
