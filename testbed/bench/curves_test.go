package bench

import (
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// A failed step is put down to the side that ran out of CPU, or to the collector when it refused.
func TestWhatRanOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		step   Step
		pinned bool
		want   string
	}{
		{"refused", Step{Refused: 3, CollectorCores: 0.4}, true, "collector (refused"},
		{"collector busy, sender idle", Step{CollectorCores: 0.97, DriverCores: 0.3}, true, "collector CPU"},
		{"sender busy, collector idle", Step{CollectorCores: 0.5, DriverCores: 0.95}, true, "sender CPU"},
		{"both busy", Step{CollectorCores: 0.95, DriverCores: 0.95}, true, "both CPUs"},
		{"collector's CPU taken by others", Step{CollectorCores: 0.4, DriverCores: 0.3, CollectorCPUBusy: 0.99}, true, "other processes took the rest"},
		{"collector's CPU taken by others, sender light", Step{Rate: 2000, Accepted: 1400, CollectorCores: 0.76, DriverCores: 0.03, CollectorCPUBusy: 1, DriverCPUBusy: 1}, true, "the sender needed about 0.04 cores"},
		{"both CPUs taken by others", Step{Rate: 16000, Accepted: 10000, CollectorCores: 0.4, DriverCores: 0.2, CollectorCPUBusy: 0.99, DriverCPUBusy: 0.98}, true, "both pinned CPUs busy"},
		{"sender's CPU taken by others", Step{CollectorCores: 0.4, DriverCores: 0.2, DriverCPUBusy: 0.99}, true, "the sender's CPU"},
		{"delivery behind", Step{CollectorCores: 0.5, DriverCores: 0.2, Lost: 10}, true, "delivery behind"},
		{"not pinned", Step{CollectorCores: 0.97, DriverCores: 0.3}, false, "neither saturated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := whatRanOut(tc.step, tc.pinned); !strings.Contains(got, tc.want) {
				t.Errorf("whatRanOut = %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

// A step is run again only when it failed because other processes took a pinned CPU, never when
// the build itself refused, lost data or used its core.
func TestCrowdedOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		step   Step
		pinned bool
		want   bool
	}{
		{"both CPUs taken by others", Step{Rate: 16000, Accepted: 10000, CollectorCores: 0.4, DriverCores: 0.2, CollectorCPUBusy: 0.99, DriverCPUBusy: 0.98}, true, true},
		{"collector's CPU taken by others", Step{CollectorCores: 0.5, DriverCores: 0.3, CollectorCPUBusy: 0.99}, true, true},
		{"held", Step{Held: true, CollectorCores: 0.4, CollectorCPUBusy: 0.99}, true, false},
		{"collector saturated", Step{CollectorCores: 0.9, DriverCores: 0.3, CollectorCPUBusy: 1}, true, false},
		{"refused", Step{Refused: 2, CollectorCores: 0.4, CollectorCPUBusy: 0.99}, true, false},
		{"lost", Step{Lost: 5, CollectorCores: 0.4, CollectorCPUBusy: 0.99}, true, false},
		{"CPUs not busy", Step{CollectorCores: 0.4, DriverCores: 0.3, CollectorCPUBusy: 0.5, DriverCPUBusy: 0.4}, true, false},
		{"not pinned", Step{CollectorCores: 0.4, CollectorCPUBusy: 0.99}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CrowdedOut(tc.step, tc.pinned); got != tc.want {
				t.Errorf("CrowdedOut = %v, want %v", got, tc.want)
			}
		})
	}
}

// A pinned build starts through taskset on the collector CPU with GOMAXPROCS=1, keeping its
// own arguments; pinning off leaves it as it is.
func TestPinningApply(t *testing.T) {
	b := Peer("/bin/peer")
	p := Pinning{Enabled: true, CollectorCPU: 1, Tool: "/usr/bin/taskset"}
	got := p.apply(b)
	if got.Binary != "/usr/bin/taskset" || strings.Join(got.Args, " ") != "-c 1 /bin/peer --feature-gates="+LambdaGate {
		t.Errorf("pinned: %s %v", got.Binary, got.Args)
	}
	if len(got.Env) != 1 || got.Env[0] != "GOMAXPROCS=1" {
		t.Errorf("pinned env: %v", got.Env)
	}
	if again := p.apply(got); len(again.Args) != len(got.Args) {
		t.Errorf("pinned twice: %v", again.Args)
	}
	if off := (Pinning{}).apply(b); off.Binary != b.Binary || len(off.Args) != len(b.Args) {
		t.Errorf("not pinned: %s %v", off.Binary, off.Args)
	}
}

// Samples go to the stage of their innermost frame that marks one: masking under the metadata
// processor is masking, the exporter queue under the pipeline is export, decoding under the
// receiver is receive.
func TestSplitByStage(t *testing.T) {
	fn := map[string]*profile.Function{}
	loc := func(names ...string) []*profile.Location { // leaf first
		var out []*profile.Location
		for _, n := range names {
			if fn[n] == nil {
				fn[n] = &profile.Function{ID: uint64(len(fn) + 1), Name: n}
			}
			out = append(out, &profile.Location{ID: uint64(len(out) + 1), Line: []profile.Line{{Function: fn[n]}}})
		}
		return out
	}
	receiver := "go.opentelemetry.io/collector/receiver/otlpreceiver.handleTraces"
	filter := "github.com/svc/svc-collector/svcspanfilterprocessor.(*spanFilter).ConsumeTraces"
	metadata := "github.com/svc/svc-collector/svcmetadataprocessor.(*metadataProcessor).processTraces"
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			{Value: []int64{1, 40e6}, Location: loc("runtime.memmove", "github.com/svc/svc-collector/pkg/masking.(*Engine).Span", metadata, filter, receiver)},
			{Value: []int64{1, 20e6}, Location: loc("github.com/svc/svc-collector/pkg/jsontext.Rewrite", metadata, filter, receiver)},
			{Value: []int64{1, 10e6}, Location: loc("go.etcd.io/bbolt.(*Tx).Commit", "go.opentelemetry.io/collector/exporter/exporterhelper/internal/queue.(*persistentQueue).Offer", metadata, filter, receiver)},
			{Value: []int64{1, 10e6}, Location: loc("google.golang.org/protobuf/proto.Unmarshal", receiver, "net/http.(*conn).serve")},
			{Value: []int64{1, 10e6}, Location: loc("runtime.scanobject", "runtime.gcBgMarkWorker")},
			{Value: []int64{1, 10e6}, Location: loc("runtime.futex", "runtime.mstart")},
		},
	}
	total, stages, err := SplitByStage(p)
	if err != nil {
		t.Fatal(err)
	}
	if total != 100*time.Millisecond {
		t.Errorf("total %v, want 100ms", total)
	}
	got := map[string]time.Duration{}
	for _, s := range stages {
		got[s.Stage] = s.CPU
	}
	want := map[string]time.Duration{"masking": 40e6, "metadata": 20e6, "export": 10e6, "receive": 10e6, "GC (background)": 10e6, "other": 10e6, "filter": 0}
	for stage, d := range want {
		if got[stage] != d {
			t.Errorf("%s: %v, want %v", stage, got[stage], d)
		}
	}
	if _, _, err := SplitByStage(&profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}}); err == nil {
		t.Error("a heap profile was taken for a CPU profile")
	}
}

// The curves' charts are well-formed SVG with a line per build, and the report links them.
func TestWriteCurves(t *testing.T) {
	r := sampleReport()
	r.Curves = &Curves{
		Options: CurveOptions{PromptBytes: 16 << 20, PromptSpans: 4000, Scores: 20000},
		Prompt: []PromptPoint{
			{Build: "A", IOBytes: 1 << 10, MicrosPerSpan: 30}, {Build: "C2", IOBytes: 1 << 10, MicrosPerSpan: 40},
			{Build: "A", IOBytes: 1 << 20, MicrosPerSpan: 2400}, {Build: "C2", IOBytes: 1 << 20, MicrosPerSpan: 28000},
		},
		Open:   []OpenPoint{{Build: "A", Traces: 1000, PeakRSS: 50 << 20}, {Build: "A", Traces: 50000, PeakRSS: 400 << 20}},
		Scores: []ScorePoint{{EventsPerSpan: 1, PerCPUSecond: 50000}, {EventsPerSpan: 16, PerCPUSecond: 90000}},
		Stages: &StageSplit{Build: "A", Rate: 4000, CPU: time.Second, Stages: []StageShare{{Stage: "receive", CPU: 3e8, Share: 0.3}, {Stage: "masking", CPU: 7e8, Share: 0.7}}},
	}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"](" + chartPrompt + ")", "](" + chartOpen + ")", "](" + chartScores + ")", "](" + chartStages + ")", "| 1 MiB | C2 | 28000.0 |", "| masking | 0.70 | 70.0% |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("bench.md lacks %q", want)
		}
	}
	for file, lines := range map[string]int{chartPrompt: 2, chartOpen: 1, chartScores: 1} {
		raw, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(strings.NewReader(string(raw)))
		n := 0
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s is not well-formed: %v", file, err)
			}
			if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "polyline" {
				n++
			}
		}
		if n != lines {
			t.Errorf("%s has %d lines, want %d", file, n, lines)
		}
	}
}

// The open-trace curve's requests hold, per trace, a kept LLM span whose parent is not in the
// request and a dropped HTTP call below it; distinct ids across requests.
func TestOpenTracesRequest(t *testing.T) {
	seen := map[string]bool{}
	for _, first := range []int{0, 250} {
		req := openTracesRequest(first, 250, 1e18)
		scopes := req.ResourceSpans[0].ScopeSpans
		if len(scopes) != 2 || len(scopes[0].Spans) != 250 || len(scopes[1].Spans) != 250 {
			t.Fatalf("scopes %d, spans %d/%d", len(scopes), len(scopes[0].Spans), len(scopes[1].Spans))
		}
		ids := map[string]bool{}
		for _, ss := range scopes {
			for _, s := range ss.Spans {
				ids[string(s.SpanId)] = true
				if seen[string(s.TraceId)+string(s.SpanId)] {
					t.Fatalf("span id repeated across requests")
				}
				seen[string(s.TraceId)+string(s.SpanId)] = true
			}
		}
		for i, llm := range scopes[0].Spans {
			if ids[string(llm.ParentSpanId)] || len(llm.ParentSpanId) != 8 {
				t.Fatalf("LLM span %d: its parent must be missing from the request", i)
			}
			if http := scopes[1].Spans[i]; string(http.ParentSpanId) != string(llm.SpanId) || string(http.TraceId) != string(llm.TraceId) {
				t.Fatalf("HTTP span %d is not the LLM span's child", i)
			}
		}
	}
}

// The scores curve's requests carry k evaluation events per span, each with its own name.
func TestScoreRequest(t *testing.T) {
	for _, k := range []int{1, 4, 16} {
		req := scoreRequest(10, 5, k, 1e18)
		spans := req.ResourceSpans[0].ScopeSpans[0].Spans
		if len(spans) != 5 {
			t.Fatalf("k=%d: %d spans", k, len(spans))
		}
		for _, s := range spans {
			names := map[string]bool{}
			for _, e := range s.Events {
				if e.Name != "gen_ai.evaluation.result" {
					t.Fatalf("event %q", e.Name)
				}
				names[e.Attributes[0].Value.GetStringValue()] = true
			}
			if len(names) != k {
				t.Errorf("k=%d: %d distinct evaluation names", k, len(names))
			}
		}
	}
}

// The collector's own gauges are read from its Prometheus text, with or without labels.
func TestScrapeGauges(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "# HELP x\n# TYPE otelcol_processor_svcspanfilter_traces_in_memory gauge\n"+
			"otelcol_processor_svcspanfilter_traces_in_memory{otel_scope_name=\"svcspanfilter\",processor=\"svcspanfilter\"} 50000\n"+
			"otelcol_processor_svcspanfilter_memory_bytes 1.5e+08\n")
	}))
	defer srv.Close()
	got, ok := scrapeGauges(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
	if !ok || got["otelcol_processor_svcspanfilter_traces_in_memory"] != 50000 || got["otelcol_processor_svcspanfilter_memory_bytes"] != 1.5e8 {
		t.Errorf("scrapeGauges = %v, %v", got, ok)
	}
}
