package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/svc/svc-collector/testbed/loadgen"
)

// StageSplit is build A's CPU by pipeline stage, from a CPU profile taken under load.
type StageSplit struct {
	Build string
	// Rate is the input rate during the profile (spans/s); Duration the profile's length;
	// CPU the CPU time its samples add up to.
	Rate     float64
	Duration time.Duration
	CPU      time.Duration
	Stages   []StageShare
	// Top are the functions with the most CPU of their own (flat), with their stage, so that
	// the attribution can be checked; Raw is the profile as fetched (written beside the report).
	Top []TopFunction
	Raw []byte `json:"-"`
}

// TopFunction is one function's own CPU in the profile.
type TopFunction struct {
	Function, Stage string
	CPU             time.Duration
}

// StageShare is one stage's part of the profile.
type StageShare struct {
	Stage string
	CPU   time.Duration
	Share float64
}

// Stages of the split, in pipeline order, and the frames that mark them. A sample belongs to
// the stage of its innermost frame that matches (walking from the leaf up): masking called by
// the metadata processor is masking, the exporter queue's disk write called from the pipeline
// is export, protobuf decoding under the receiver is receive.
var stageFrames = []struct{ stage, frame string }{
	{"masking", "/pkg/masking."},
	{"metadata", "/svcmetadataprocessor."},
	{"filter", "/svcspanfilterprocessor."},
	{"scores (connector)", "/svcscoreconnector."},
	{"scores (connector)", "/pkg/scorerecord."},
	{"export", "/svcexporter."},
	{"export", "exporterhelper"},
	{"export", "net/http.(*persistConn)"},
	{"export", "net/http.(*Transport)"},
	{"receive", "otlpreceiver"},
	{"receive", "google.golang.org/grpc"},
	{"receive", "net/http.(*conn)"},
	{"GC (background)", "runtime.gcBgMarkWorker"},
	{"GC (background)", "runtime.bgsweep"},
	{"GC (background)", "runtime.bgscavenge"},
}

// StageOrder is the order of the stages in reports.
var StageOrder = []string{"receive", "filter", "metadata", "masking", "export", "scores (connector)", "GC (background)", "other"}

// stageOf returns the stage of one sample's stack (locations leaf first).
func stageOf(locs []*profile.Location) string {
	for _, loc := range locs {
		for _, line := range loc.Line { // inlined calls first
			if line.Function == nil {
				continue
			}
			for _, sf := range stageFrames {
				if strings.Contains(line.Function.Name, sf.frame) {
					return sf.stage
				}
			}
		}
	}
	return "other"
}

// SplitByStage adds up a CPU profile's samples by stage.
func SplitByStage(p *profile.Profile) (total time.Duration, stages []StageShare, err error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return 0, nil, errors.New("not a CPU profile (no cpu/nanoseconds sample type)")
	}
	by := map[string]int64{}
	var sum int64
	for _, s := range p.Sample {
		v := s.Value[idx]
		by[stageOf(s.Location)] += v
		sum += v
	}
	for _, name := range StageOrder {
		if v := by[name]; v > 0 || name != "scores (connector)" {
			share := 0.0
			if sum > 0 {
				share = float64(v) / float64(sum)
			}
			stages = append(stages, StageShare{Stage: name, CPU: time.Duration(v), Share: share})
		}
	}
	return time.Duration(sum), stages, nil
}

// topFunctions returns the n functions with the most CPU of their own, each with the stages its
// samples went to, largest first (a runtime function such as memmove serves every stage).
func topFunctions(p *profile.Profile, n int) []TopFunction {
	idx := len(p.SampleType) - 1
	flat := map[string]int64{}
	stages := map[string]map[string]int64{}
	for _, s := range p.Sample {
		if len(s.Location) == 0 || len(s.Location[0].Line) == 0 || s.Location[0].Line[0].Function == nil {
			continue
		}
		name := s.Location[0].Line[0].Function.Name
		flat[name] += s.Value[idx]
		if stages[name] == nil {
			stages[name] = map[string]int64{}
		}
		stages[name][stageOf(s.Location)] += s.Value[idx]
	}
	var out []TopFunction
	for name, v := range flat {
		var parts []string
		for _, st := range StageOrder {
			if c := stages[name][st]; c > 0 {
				parts = append(parts, fmt.Sprintf("%s %.0f%%", st, 100*float64(c)/float64(v)))
			}
		}
		slices.SortStableFunc(parts, func(a, b string) int { return share(b) - share(a) })
		out = append(out, TopFunction{Function: name, Stage: strings.Join(parts, ", "), CPU: time.Duration(v)})
	}
	slices.SortFunc(out, func(a, b TopFunction) int { return int(b.CPU - a.CPU) })
	return out[:min(n, len(out))]
}

// share reads the percentage at the end of "stage NN%".
func share(part string) int {
	var n int
	_, _ = fmt.Sscanf(part[strings.LastIndexByte(part, ' ')+1:], "%d%%", &n)
	return n
}

// profileStages runs build A with the pprof extension on a free port under load (60% of its
// sustained rate, or the fixed rate) and splits the CPU profile it takes by stage.
func profileStages(ctx context.Context, cfg Config, o CurveOptions, rep *Report) (StageSplit, error) {
	var out StageSplit
	i := slices.IndexFunc(cfg.Builds, func(b Build) bool { return b.Name == "A" })
	if i < 0 {
		return out, errors.New("build A is not part of the run")
	}
	b := cfg.Builds[i]
	res, _ := rep.Result("A")
	rate := 0.6 * res.Sustained
	if rate <= 0 {
		rate = max(res.FixedRate, cfg.StartRate)
	}
	sets, pprofAddr, ok, err := ProfileSets(b)
	if err != nil {
		return out, err
	}
	if !ok {
		return out, fmt.Errorf("build %s has no pprof extension", b.Name)
	}
	rig, err := StartRig(ctx, b, RigOptions{StatsOnly: true, Sets: sets})
	if err != nil {
		return out, err
	}
	defer func() {
		rig.Collector.Kill()
		_ = rig.Close()
	}()
	w, err := loadgen.NewWorkload(cfg.Workload)
	if err != nil {
		return out, err
	}
	s, err := rig.Sender(cfg.Protocol)
	if err != nil {
		return out, err
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		_, err := loadgen.Run(ctx, w, s, loadgen.RunOptions{Rate: rate, Duration: o.ProfileDuration + 3*time.Second, Concurrency: cfg.Concurrency})
		done <- err
	}()
	time.Sleep(time.Second) // past the first requests
	secs := max(1, int(o.ProfileDuration.Round(time.Second)/time.Second))
	raw, err := fetchCPUProfile(ctx, pprofAddr, time.Duration(secs)*time.Second)
	if err != nil {
		<-done
		return out, fmt.Errorf("fetch the profile: %w", err)
	}
	if err := <-done; err != nil {
		return out, err
	}
	p, err := profile.ParseData(raw)
	if err != nil {
		return out, fmt.Errorf("the profile: %w", err)
	}
	out.Build, out.Rate, out.Duration, out.Raw = "A", rate, time.Duration(secs)*time.Second, raw
	out.Top = topFunctions(p, 15)
	out.CPU, out.Stages, err = SplitByStage(p)
	logf(cfg.Log, "curve stages: A at %.0f spans/s, %.1fs CPU sampled in %ds: %v", rate, out.CPU.Seconds(), secs, out.Stages)
	return out, err
}
