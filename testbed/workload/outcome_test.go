package workload

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// outcomeSeen is what the exports of one trace carry, read back from the pdata a replay sends.
type outcomeSeen struct {
	spans, errorLLM         int
	maxCost                 float64
	sessions                map[string]bool
	evaluations             []bool // gen_ai.evaluation.score.value, span events and log records
	firstExport, rootExport time.Duration
	rootSeen, errorRoot     bool
}

func readOutcomeWorkload(t *testing.T, w OutcomeWorkload) []outcomeSeen {
	seen := make([]outcomeSeen, len(w.Traces))
	for i := range seen {
		seen[i].sessions = map[string]bool{}
		seen[i].firstExport = -1
	}
	var last time.Duration
	for _, e := range w.Exports {
		if e.At < last {
			t.Fatalf("exports out of time order: %v after %v", e.At, last)
		}
		last = e.At
		s := &seen[e.Trace]
		if s.firstExport < 0 {
			s.firstExport = e.At
		}
		for _, rs := range e.Spans.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, span := range ss.Spans().All() {
					if span.TraceID() != w.Traces[e.Trace].TraceID {
						t.Fatalf("export of trace %d carries a span of another trace", e.Trace)
					}
					s.spans++
					attrs := span.Attributes()
					if span.ParentSpanID().IsEmpty() {
						s.rootSeen, s.rootExport = true, e.At
						s.errorRoot = span.Status().Code() == ptrace.StatusCodeError
					}
					if span.Name() == "chat gpt-4o" && span.Status().Code() == ptrace.StatusCodeError {
						s.errorLLM++
					}
					if v, ok := attrs.Get("session.id"); ok {
						s.sessions[v.Str()] = true
					}
					s.maxCost = math.Max(s.maxCost, spanCost(attrs))
					for _, ev := range span.Events().All() {
						if ev.Name() == "gen_ai.evaluation.result" {
							v, _ := ev.Attributes().Get("gen_ai.evaluation.score.value")
							s.evaluations = append(s.evaluations, v.Bool())
						}
					}
				}
			}
		}
		for _, rl := range e.Logs.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					if lr.EventName() != "gen_ai.evaluation.result" || lr.TraceID() != w.Traces[e.Trace].TraceID {
						t.Fatalf("unexpected log record %q of trace %d", lr.EventName(), e.Trace)
					}
					v, _ := lr.Attributes().Get("gen_ai.evaluation.score.value")
					s.evaluations = append(s.evaluations, v.Bool())
				}
			}
		}
	}
	return seen
}

// spanCost is the cost a span reports in any of the three places the workload writes it.
func spanCost(attrs pcommon.Map) float64 {
	for _, k := range []string{"gen_ai.usage.cost", "llm.cost.total"} {
		if v, ok := attrs.Get(k); ok {
			return v.Double()
		}
	}
	if v, ok := attrs.Get("svc.observation.cost_details"); ok {
		var details struct{ Total float64 }
		if err := json.Unmarshal([]byte(v.Str()), &details); err == nil {
			return details.Total
		}
	}
	return 0
}

func TestOutcomeWorkloadShares(t *testing.T) {
	w := NewOutcomeWorkload(OutcomeOptions{Seed: 42, Sessions: 2500})
	seen := readOutcomeWorkload(t, w)
	n := len(w.Traces)
	if n < 2500*2 || n > 2500*6 {
		t.Fatalf("%d traces for 2500 sessions of 2 to 6 turns", n)
	}
	var failing, flagged, costly, agentRuns, evaluated, asLogs int
	sessions := map[string][]int{}
	for i, tr := range w.Traces {
		s := seen[i]
		if s.spans != tr.Spans || !s.rootSeen {
			t.Fatalf("trace %d: exports carry %d spans (root %v), the trace says %d", i, s.spans, s.rootSeen, tr.Spans)
		}
		// The labels are what the spans say.
		if tr.Failing != (s.errorLLM == 1 && s.errorRoot) || (!tr.Failing && (s.errorLLM > 0 || s.errorRoot)) {
			t.Fatalf("trace %d: failing %v, error LLM spans %d, error root %v", i, tr.Failing, s.errorLLM, s.errorRoot)
		}
		if tr.Costly != (s.maxCost > 0.5) {
			t.Fatalf("trace %d: costly %v, highest call cost %v", i, tr.Costly, s.maxCost)
		}
		if want := map[bool][]bool{true: {!tr.Flagged}, false: nil}[tr.Evaluated]; !reflect.DeepEqual(s.evaluations, want) {
			t.Fatalf("trace %d: evaluations %v, want %v (flagged %v)", i, s.evaluations, want, tr.Flagged)
		}
		if len(s.sessions) != 1 || !s.sessions[tr.SessionID] {
			t.Fatalf("trace %d: sessions %v, want %s", i, s.sessions, tr.SessionID)
		}
		sessions[tr.SessionID] = append(sessions[tr.SessionID], i)
		if tr.Failing && tr.Flagged {
			t.Fatalf("trace %d is failing and flagged: the shares are disjoint", i)
		}
		for _, b := range []struct {
			label bool
			count *int
		}{{tr.Failing, &failing}, {tr.Flagged, &flagged}, {tr.Costly, &costly}, {tr.AgentRun, &agentRuns}, {tr.Evaluated, &evaluated}, {tr.EvaluationLog, &asLogs}} {
			if b.label {
				*b.count++
			}
		}
		if tr.AgentRun {
			if d := tr.End - tr.Start; d < time.Minute || d > 5*time.Minute {
				t.Fatalf("agent run %d lasts %v", i, d)
			}
			// Its children went out long before its root.
			if s.rootExport-s.firstExport < 50*time.Second {
				t.Fatalf("agent run %d: first export %v, root %v", i, s.firstExport, s.rootExport)
			}
		} else if d := tr.End - tr.Start; d > 10*time.Second {
			t.Fatalf("trace %d (not an agent run) lasts %v", i, d)
		}
	}
	if want := int(math.Round(0.02 * float64(n))); failing != want {
		t.Errorf("%d failing traces of %d, want exactly %d (2%%)", failing, n, want)
	}
	if want := int(math.Round(0.01 * float64(n))); flagged != want {
		t.Errorf("%d flagged traces of %d, want exactly %d (1%%)", flagged, n, want)
	}
	share := func(k int) float64 { return float64(k) / float64(n) }
	// P(a call over 0.5) = (0.003/0.5)^1.1 = 0.36%; 2.5 calls a trace, 20 in the 5% of runs.
	if s := share(costly); s < 0.006 || s > 0.025 {
		t.Errorf("costly share %.4f, want about 1.2%%", s)
	}
	if s := share(agentRuns); math.Abs(s-0.05) > 0.01 {
		t.Errorf("agent run share %.4f, want 5%%", s)
	}
	if s := share(evaluated); math.Abs(s-(0.01+0.99*0.2)) > 0.02 {
		t.Errorf("evaluated share %.4f, want about 21%%", s)
	}
	if s := float64(asLogs) / float64(evaluated); math.Abs(s-0.5) > 0.05 {
		t.Errorf("%.2f of the evaluations are log records, want half", s)
	}
	for id, traces := range sessions {
		if len(traces) < 2 || len(traces) > 6 {
			t.Fatalf("session %s has %d traces", id, len(traces))
		}
		for k := 1; k < len(traces); k++ {
			if w.Traces[traces[k]].Start-w.Traces[traces[k-1]].Start != 20*time.Second {
				t.Fatalf("session %s: turns not 20s apart", id)
			}
		}
	}
}

func TestOutcomeWorkloadIsDeterministic(t *testing.T) {
	a := NewOutcomeWorkload(OutcomeOptions{Seed: 7, Sessions: 50})
	b := NewOutcomeWorkload(OutcomeOptions{Seed: 7, Sessions: 50})
	c := NewOutcomeWorkload(OutcomeOptions{Seed: 8, Sessions: 50})
	if !reflect.DeepEqual(a.Traces, b.Traces) || len(a.Exports) != len(b.Exports) {
		t.Fatal("the same seed gave other traces")
	}
	var tm ptrace.ProtoMarshaler
	var lm plog.ProtoMarshaler
	for i := range a.Exports {
		ta, _ := tm.MarshalTraces(a.Exports[i].Spans)
		tb, _ := tm.MarshalTraces(b.Exports[i].Spans)
		la, _ := lm.MarshalLogs(a.Exports[i].Logs)
		lb, _ := lm.MarshalLogs(b.Exports[i].Logs)
		if a.Exports[i].At != b.Exports[i].At || string(ta) != string(tb) || string(la) != string(lb) {
			t.Fatalf("export %d differs for the same seed", i)
		}
	}
	if reflect.DeepEqual(a.Traces, c.Traces) {
		t.Fatal("another seed gave the same traces")
	}
}
