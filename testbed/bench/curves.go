package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/svc/svc-collector/testbed/loadgen"
)

// CurveOptions say which cost curves to measure after the fixed runs, and how much. Zero
// values take the defaults of `make bench`.
type CurveOptions struct {
	Enabled bool
	// PromptSizes are the sizes of each LLM input and output for the CPU-per-span curve;
	// default 1, 4, 16 and 128 KiB and 1 MiB. PromptBytes bounds what one point sends (default
	// 16 MiB) and PromptSpans its spans (default 8000).
	PromptSizes              []int
	PromptBytes, PromptSpans int
	// OpenTraces are the numbers of long-running agent traces open at once for the peak RSS
	// curve; default 1000, 10000, 50000.
	OpenTraces []int
	// ScoreEvents are the evaluation events per span for the scores curve (default 1, 4, 16);
	// Scores the scores each point sends (default 60000).
	ScoreEvents []int
	Scores      int
	// ProfileDuration is how long the CPU profile of A by stage samples; default 10s. 0 with
	// NoProfile set: no profile.
	ProfileDuration time.Duration
	NoProfile       bool
	// SVCOtelcol is the svc-otelcol binary of build S (the scores path alone).
	SVCOtelcol string
}

func (o CurveOptions) withDefaults() CurveOptions {
	if len(o.PromptSizes) == 0 {
		o.PromptSizes = []int{1 << 10, 4 << 10, 16 << 10, 128 << 10, 1 << 20}
	}
	if o.PromptBytes <= 0 {
		o.PromptBytes = 16 << 20
	}
	if o.PromptSpans <= 0 {
		o.PromptSpans = 8000
	}
	if len(o.OpenTraces) == 0 {
		o.OpenTraces = []int{1000, 10000, 50000}
	}
	if len(o.ScoreEvents) == 0 {
		o.ScoreEvents = []int{1, 4, 16}
	}
	if o.Scores <= 0 {
		o.Scores = 60000
	}
	if o.ProfileDuration <= 0 {
		o.ProfileDuration = 10 * time.Second
	}
	return o
}

// Curves are the cost curves of a run.
type Curves struct {
	Options CurveOptions
	Prompt  []PromptPoint
	Open    []OpenPoint
	Scores  []ScorePoint
	Stages  *StageSplit `json:",omitempty"`
	// Errors are the curves or points that could not be measured, with why.
	Errors []string `json:",omitempty"`
}

// PromptPoint is one build's CPU per span at one prompt size.
type PromptPoint struct {
	Build string
	// IOBytes is the size of each LLM input and output.
	IOBytes int
	// InputSpans were accepted; CPU is the collector's from the first request to the last
	// delivery; MicrosPerSpan the same per accepted input span.
	InputSpans    int64
	CPU           time.Duration
	MicrosPerSpan float64
	PeakRSS       int64
	Lost          int64
}

// OpenPoint is one build's memory with that many traces open at once.
type OpenPoint struct {
	Build  string
	Traces int
	// PeakRSS is the collector's VmHWM at the end; InMemory and MemoryBytes are the span
	// filter's own gauges (traces in memory, estimated bytes) when the sending ended.
	PeakRSS, InMemory, MemoryBytes int64
	Delivered, Lost                int64
}

// ScorePoint is the scores path's throughput with EventsPerSpan evaluation events per span.
type ScorePoint struct {
	EventsPerSpan int
	// Scores were sent and Delivered reached the platform; CPU is the collector's.
	Scores, Delivered int64
	CPU               time.Duration
	PerCPUSecond      float64
	PeakRSS           int64
}

// runCurves measures every curve; a curve that fails is noted in Errors and the others go on.
func runCurves(ctx context.Context, cfg Config, rep *Report) (Curves, error) {
	o := cfg.Curves.withDefaults()
	c := Curves{Options: o}
	note := func(what string, err error) {
		if err != nil {
			c.Errors = append(c.Errors, what+": "+err.Error())
			logf(cfg.Log, "curve %s: %v", what, err)
		}
	}
	steps := []struct {
		name string
		run  func() error
	}{
		{"CPU per span by prompt size", func() error { return promptCurve(ctx, cfg, o, &c) }},
		{"peak RSS by traces open at once", func() error { return openCurve(ctx, cfg, o, &c) }},
		{"scores per CPU-second", func() error { return scoreCurve(ctx, cfg, o, &c) }},
		{"A's CPU by stage", func() error {
			if o.NoProfile {
				return nil
			}
			s, err := profileStages(ctx, cfg, o, rep)
			if err == nil {
				c.Stages = &s
			}
			return err
		}},
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		note(s.name, s.run())
	}
	return c, nil
}

// curveBuilds are the builds of the run the prompt curve compares (M is A's storage variant).
func curveBuilds(cfg Config) []Build {
	var out []Build
	for _, b := range cfg.Builds {
		if b.Name != "M" {
			out = append(out, b)
		}
	}
	return out
}

// promptCurve measures CPU per input span with every LLM input and output of one size, for
// each build, the builds taking turns at each size.
func promptCurve(ctx context.Context, cfg Config, o CurveOptions, c *Curves) error {
	for _, size := range o.PromptSizes {
		w, err := loadgen.NewWorkload(loadgen.WorkloadOptions{
			Seed: cfg.Workload.Seed, Templates: 6, IOMinBytes: size, IOMaxBytes: size, Mix: cfg.Workload.Mix,
		})
		if err != nil {
			return err
		}
		sh := w.Shape()
		traces := int(float64(o.PromptBytes) / sh.BytesPerTrace)
		traces = max(4, min(traces, int(float64(o.PromptSpans)/sh.SpansPerTrace)))
		for _, b := range curveBuilds(cfg) {
			p, err := promptPoint(ctx, cfg, w, b, traces)
			p.Build, p.IOBytes = b.Name, size
			if err != nil {
				return fmt.Errorf("%s at %d bytes: %w", b.Name, size, err)
			}
			c.Prompt = append(c.Prompt, p)
			logf(cfg.Log, "curve prompt %7d B: %s %8.1f µs CPU per span (%d spans), peak RSS %.0f MiB", size, b.Name, p.MicrosPerSpan, p.InputSpans, mib(p.PeakRSS))
		}
	}
	return nil
}

func promptPoint(ctx context.Context, cfg Config, w *loadgen.Workload, b Build, traces int) (PromptPoint, error) {
	var p PromptPoint
	rig, s, stop, err := startCurveRig(ctx, b)
	if err != nil {
		return p, err
	}
	defer stop()
	before, err := rig.Usage()
	if err != nil {
		return p, err
	}
	// As fast as the collector takes them, two requests in flight: a big trace is a request.
	r, err := loadgen.Run(ctx, w, s, loadgen.RunOptions{MaxTraces: traces, Duration: 2 * time.Minute, Concurrency: 2, MaxRequestBytes: 8 << 20})
	if err != nil {
		return p, err
	}
	drain, cancel := context.WithTimeout(ctx, time.Minute)
	a := Settle(drain, rig.Platform, w, b, r)
	cancel()
	after, err := rig.Usage()
	if err != nil {
		return p, err
	}
	p.InputSpans, p.CPU, p.PeakRSS = r.Accepted.Spans, after.CPU-before.CPU, after.PeakRSS
	p.Lost = a.Spans.Lost + a.Scores.Lost
	if p.InputSpans > 0 {
		p.MicrosPerSpan = float64(p.CPU.Microseconds()) / float64(p.InputSpans)
	}
	return p, nil
}

// openCurve measures peak RSS with N long-running agent traces open at once: each trace sends
// an LLM span (kept) and its HTTP call (dropped) whose agent span never arrives during the
// step, so the span filter holds the LLM span for its wait, then remembers the trace's open
// parent (trace_integrity.late_parent_window). Builds with trace memory only (A, M).
func openCurve(ctx context.Context, cfg Config, o CurveOptions, c *Curves) error {
	for _, n := range o.OpenTraces {
		for _, b := range cfg.Builds {
			if b.Name != "A" && b.Name != "M" {
				continue
			}
			p, err := openPoint(ctx, b, n)
			p.Build, p.Traces = b.Name, n
			if err != nil {
				return fmt.Errorf("%s with %d traces: %w", b.Name, n, err)
			}
			c.Open = append(c.Open, p)
			logf(cfg.Log, "curve open %6d traces: %s peak RSS %.0f MiB, %d traces in memory, %d of %d LLM spans delivered", n, b.Name, mib(p.PeakRSS), p.InMemory, p.Delivered, n)
		}
	}
	return nil
}

func openPoint(ctx context.Context, b Build, n int) (OpenPoint, error) {
	var p OpenPoint
	rig, s, stop, err := startCurveRig(ctx, b)
	if err != nil {
		return p, err
	}
	defer stop()
	const perRequest = 250
	now := uint64(time.Now().UnixNano())
	for first := 0; first < n; first += perRequest {
		body, err := proto.Marshal(openTracesRequest(first, min(perRequest, n-first), now))
		if err != nil {
			return p, err
		}
		if out := s.Send(ctx, body); out.Verdict != loadgen.Accepted {
			return p, fmt.Errorf("request of traces %d..: %s (%s)", first, out.Verdict, out.Status)
		}
	}
	if v, ok := scrapeGauges(ctx, rig.Collector.MetricsEndpoint); ok {
		p.InMemory, p.MemoryBytes = int64(v["otelcol_processor_svcspanfilter_traces_in_memory"]), int64(v["otelcol_processor_svcspanfilter_memory_bytes"])
	}
	// The LLM spans go on when their traces have been idle for wait_duration (5s).
	wait, cancel := context.WithTimeout(ctx, 45*time.Second)
	_ = rig.Platform.WaitForSpans(wait, n)
	cancel()
	p.Delivered = int64(rig.Platform.Stats().UniqueSpans)
	p.Lost = int64(n) - p.Delivered
	u, err := rig.Usage()
	if err != nil {
		return p, err
	}
	p.PeakRSS = u.PeakRSS
	return p, nil
}

// openTracesRequest encodes traces first..first+count-1 of the open-trace curve: in each, an LLM
// span of a known GenAI instrumentation, child of an agent span that is never sent, with 1 KiB
// of input and output, and the plain HTTP call below it.
func openTracesRequest(first, count int, now uint64) *coltracepb.ExportTraceServiceRequest {
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	prompt := strings.Repeat("Where is my order? The carrier scans show the parcel in transit. ", 16)
	var llm, plain []*tracepb.Span
	for i := first; i < first+count; i++ {
		var tid [16]byte
		binary.BigEndian.PutUint64(tid[:8], 0x0e0e0e0e00000000|uint64(i))
		binary.BigEndian.PutUint64(tid[8:], uint64(i)*0x9e3779b97f4a7c15|1)
		id := func(k uint64) []byte {
			var s [8]byte
			binary.BigEndian.PutUint64(s[:], (uint64(i)<<8|k)*0xbf58476d1ce4e5b9|1)
			return s[:]
		}
		agent, call, http := id(1), id(2), id(3)
		llm = append(llm, &tracepb.Span{
			TraceId: tid[:], SpanId: call, ParentSpanId: agent, Name: "chat gpt-4o",
			Kind: tracepb.Span_SPAN_KIND_CLIENT, StartTimeUnixNano: now - 2e9, EndTimeUnixNano: now - 1e9,
			Attributes: []*commonpb.KeyValue{
				str("gen_ai.operation.name", "chat"), str("gen_ai.request.model", "gpt-4o"),
				str("gen_ai.input.messages", `[{"role":"user","content":"`+prompt+`"}]`),
				str("gen_ai.output.messages", `[{"role":"assistant","content":"`+prompt+`"}]`),
			},
		})
		plain = append(plain, &tracepb.Span{
			TraceId: tid[:], SpanId: http, ParentSpanId: call, Name: "POST",
			Kind: tracepb.Span_SPAN_KIND_CLIENT, StartTimeUnixNano: now - 2e9 + 1e6, EndTimeUnixNano: now - 1e9 - 1e6,
			Attributes: []*commonpb.KeyValue{str("http.request.method", "POST"), str("url.full", "https://api.openai.com/v1/chat/completions")},
		})
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "long-agent")}},
		ScopeSpans: []*tracepb.ScopeSpans{
			{Scope: &commonpb.InstrumentationScope{Name: "opentelemetry.instrumentation.openai", Version: "0.44.1"}, Spans: llm},
			{Scope: &commonpb.InstrumentationScope{Name: "go.opentelemetry.io/contrib/instrumentation/net/http/httptrace/otelhttptrace"}, Spans: plain},
		},
	}}}
}

// scrapeGauges reads the collector's own metrics (Prometheus text) and returns the value of
// each series by metric name (the last series of a name wins).
func scrapeGauges(ctx context.Context, endpoint string) (map[string]float64, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoint+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, false
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = line[:i]
			rest = line[strings.LastIndexByte(line, '}')+2:]
		}
		if v, err := strconv.ParseFloat(strings.Fields(rest + " x")[0], 64); err == nil {
			out[name] = v
		}
	}
	return out, true
}

// ScoresBuild is build S of the curves: svc-otelcol with the scores path alone
// (testbed/peer/scores-config.yaml).
func ScoresBuild(svcOtelcol string) Build {
	return Build{
		Name: "S", Title: "svc-otelcol, scores path alone: svcscore connector → svc exporter",
		Binary: svcOtelcol, Configs: []string{filepath.Join(PeerDir(), "scores-config.yaml")},
		Delivers: GenAISpansAndScores,
	}
}

// scoreCurve measures scores per collector CPU-second of the connector and the exporter, with
// 1 to 16 evaluation events per span.
func scoreCurve(ctx context.Context, cfg Config, o CurveOptions, c *Curves) error {
	if o.SVCOtelcol == "" {
		return errors.New("no svc-otelcol binary for build S")
	}
	b := cfg.Pin.apply(ScoresBuild(o.SVCOtelcol))
	for _, k := range o.ScoreEvents {
		p, err := scorePoint(ctx, b, k, o.Scores)
		p.EventsPerSpan = k
		if err != nil {
			return fmt.Errorf("%d events per span: %w", k, err)
		}
		c.Scores = append(c.Scores, p)
		logf(cfg.Log, "curve scores, %2d events per span: %d of %d delivered, %.0f scores per CPU-second", k, p.Delivered, p.Scores, p.PerCPUSecond)
	}
	return nil
}

func scorePoint(ctx context.Context, b Build, k, scores int) (ScorePoint, error) {
	var p ScorePoint
	rig, s, stop, err := startCurveRig(ctx, b)
	if err != nil {
		return p, err
	}
	defer stop()
	before, err := rig.Usage()
	if err != nil {
		return p, err
	}
	spans := scores / k
	const perRequest = 500 // scores per request
	now := uint64(time.Now().UnixNano())
	jobs := make(chan []byte)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			var err error
			for body := range jobs {
				if out := s.Send(ctx, body); out.Verdict != loadgen.Accepted && err == nil {
					err = fmt.Errorf("%s (%s)", out.Verdict, out.Status)
				}
			}
			errs <- err
		}()
	}
	perSpans := max(1, perRequest/k)
	for first := 0; first < spans; first += perSpans {
		body, err := proto.Marshal(scoreRequest(first, min(perSpans, spans-first), k, now))
		if err != nil {
			close(jobs)
			return p, err
		}
		jobs <- body
	}
	close(jobs)
	err = errors.Join(<-errs, <-errs)
	if err != nil {
		return p, err
	}
	p.Scores = int64(spans * k)
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	_ = rig.Platform.WaitForScores(wait, int(p.Scores))
	cancel()
	after, err := rig.Usage()
	if err != nil {
		return p, err
	}
	p.Delivered = int64(rig.Platform.Stats().UniqueScores)
	p.CPU, p.PeakRSS = after.CPU-before.CPU, after.PeakRSS
	if p.CPU > 0 {
		p.PerCPUSecond = float64(p.Delivered) / p.CPU.Seconds()
	}
	return p, nil
}

// scoreRequest encodes spans first..first+count-1 of the scores curve, each with k
// gen_ai.evaluation.result events (a numeric score with an explanation, as online evaluators
// send them).
func scoreRequest(first, count, k int, now uint64) *coltracepb.ExportTraceServiceRequest {
	str := func(key, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: key, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	dbl := func(key string, v float64) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: key, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}}
	}
	var spans []*tracepb.Span
	for i := first; i < first+count; i++ {
		var tid [16]byte
		binary.BigEndian.PutUint64(tid[:8], 0x5c05e5c000000000|uint64(i))
		binary.BigEndian.PutUint64(tid[8:], uint64(i)*0x9e3779b97f4a7c15|1)
		var sid [8]byte
		binary.BigEndian.PutUint64(sid[:], uint64(i)*0xbf58476d1ce4e5b9|1)
		span := &tracepb.Span{
			TraceId: tid[:], SpanId: sid[:], Name: "chat gpt-4o", Kind: tracepb.Span_SPAN_KIND_CLIENT,
			StartTimeUnixNano: now - 2e9, EndTimeUnixNano: now - 1e9,
			Attributes: []*commonpb.KeyValue{str("gen_ai.operation.name", "chat"), str("gen_ai.request.model", "gpt-4o")},
		}
		for j := range k {
			span.Events = append(span.Events, &tracepb.Span_Event{
				Name: "gen_ai.evaluation.result", TimeUnixNano: now - 1e9,
				Attributes: []*commonpb.KeyValue{
					str("gen_ai.evaluation.name", "criterion_"+strconv.Itoa(j)),
					dbl("gen_ai.evaluation.score.value", float64(i%100)/100),
					str("gen_ai.evaluation.explanation", "The answer addresses the order status question and cites the carrier's last scan."),
				},
			})
		}
		spans = append(spans, span)
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "support-agent")}},
		ScopeSpans: []*tracepb.ScopeSpans{{
			Scope: &commonpb.InstrumentationScope{Name: "opentelemetry.instrumentation.openai", Version: "0.44.1"}, Spans: spans,
		}},
	}}}
}

// startCurveRig starts build b for one curve point (stats only) with an OTLP/HTTP sender; stop
// closes the sender and kills the collector (the point's figures are already read).
func startCurveRig(ctx context.Context, b Build) (*Rig, loadgen.Sender, func(), error) {
	rig, err := StartRig(ctx, b, RigOptions{StatsOnly: true})
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := rig.Sender(loadgen.ProtocolHTTP)
	if err != nil {
		rig.Collector.Kill()
		_ = rig.Close()
		return nil, nil, nil, err
	}
	return rig, s, func() {
		s.Close()
		rig.Collector.Kill()
		_ = rig.Close()
	}, nil
}
