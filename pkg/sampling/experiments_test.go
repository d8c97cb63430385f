package sampling

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func traceN(n byte) pcommon.TraceID { return pcommon.TraceID{0: n, 8: 0xff, 15: 0xff} }

func TestExperimentTracesRemembersMarkedTraces(t *testing.T) {
	s := NewExperimentTraces(10, time.Minute)
	assert.False(t, s.Contains(traceN(1), t0))
	s.Mark(traceN(1), t0)
	assert.True(t, s.Contains(traceN(1), t0))
	assert.True(t, s.Contains(traceN(1), t0.Add(59*time.Second)))
	assert.False(t, s.Contains(traceN(2), t0), "only the marked trace")
}

func TestExperimentTracesForgetsAfterTTL(t *testing.T) {
	tests := []struct {
		name  string
		marks []time.Duration // offsets from t0 of the marks of one trace
		at    time.Duration
		want  bool
	}{
		{"within the ttl", []time.Duration{0}, 59 * time.Second, true},
		{"at the ttl", []time.Duration{0}, time.Minute, false},
		{"long after", []time.Duration{0}, time.Hour, false},
		{"a later mark renews", []time.Duration{0, 50 * time.Second}, 100 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewExperimentTraces(10, time.Minute)
			for _, m := range tt.marks {
				s.Mark(traceN(1), t0.Add(m))
			}
			assert.Equal(t, tt.want, s.Contains(traceN(1), t0.Add(tt.at)))
		})
	}
	t.Run("no ttl keeps until pushed out", func(t *testing.T) {
		s := NewExperimentTraces(10, 0)
		s.Mark(traceN(1), t0)
		assert.True(t, s.Contains(traceN(1), t0.Add(1000*time.Hour)))
	})
	t.Run("expired ids make room", func(t *testing.T) {
		s := NewExperimentTraces(10, time.Minute)
		for i := range byte(10) {
			s.Mark(traceN(i), t0)
		}
		s.Mark(traceN(100), t0.Add(time.Hour))
		assert.Equal(t, 1, s.Len())
	})
}

func TestExperimentTracesForgetsTheLeastRecentlyMarkedFirst(t *testing.T) {
	s := NewExperimentTraces(3, time.Hour)
	s.Mark(traceN(1), t0)
	s.Mark(traceN(2), t0.Add(time.Second))
	s.Mark(traceN(3), t0.Add(2*time.Second))
	s.Mark(traceN(1), t0.Add(3*time.Second)) // 1 is marked again: 2 is now the oldest
	s.Mark(traceN(4), t0.Add(4*time.Second))

	now := t0.Add(5 * time.Second)
	assert.Equal(t, 3, s.Len())
	assert.False(t, s.Contains(traceN(2), now), "the least recently marked is forgotten")
	for _, n := range []byte{1, 3, 4} {
		assert.True(t, s.Contains(traceN(n), now), n)
	}
}

func TestExperimentTracesConcurrentUse(t *testing.T) {
	// Room for every mark: a mark is then contained right after it, whatever the other goroutines
	// do. (With less room, another goroutine's marks may legitimately push it out in between.)
	roomy := NewExperimentTraces(16*100, time.Hour)
	// Less room than marks: the bound holds under concurrent use.
	bounded := NewExperimentTraces(1000, time.Hour)
	var wg sync.WaitGroup
	for g := range byte(16) {
		wg.Go(func() {
			for i := range byte(100) {
				id := pcommon.TraceID{0: g, 1: i}
				roomy.Mark(id, t0)
				bounded.Mark(id, t0)
				if !roomy.Contains(id, t0) {
					t.Errorf("trace %d/%d marked but not contained", g, i)
				}
				bounded.Contains(id, t0)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1600, roomy.Len())
	assert.Equal(t, 1000, bounded.Len(), "1600 marks, bounded to 1000")
}

func TestDecider(t *testing.T) {
	kept := pcommon.TraceID{15: 1}                           // low bits 0: kept at any rate
	dropped := pcommon.TraceID{8: 0xff, 15: 0xff}            // low bits at the top: sampled out below 1
	otherDropped := pcommon.TraceID{0: 1, 8: 0xff, 15: 0xff} // another sampled-out trace
	type call struct {
		trace      pcommon.TraceID
		experiment bool
		after      time.Duration
		want       bool
	}
	tests := []struct {
		name  string
		rate  float64
		calls []call
	}{
		{"rate 1 keeps everything", 1, []call{{dropped, false, 0, true}}},
		{"the ratio keeps", 0.5, []call{{kept, false, 0, true}}},
		{"the ratio drops", 0.5, []call{{dropped, false, 0, false}}},
		{"a run-level score is kept", 0.01, []call{{pcommon.TraceID{}, false, 0, true}}},
		{"a marking span is kept", 0.5, []call{{dropped, true, 0, true}}},
		{"the rest of a marked trace is kept", 0.5, []call{
			{dropped, false, 0, false}, // before the marking: gone
			{dropped, true, time.Second, true},
			{dropped, false, 2 * time.Second, true},
			{otherDropped, false, 2 * time.Second, false},
		}},
		{"a marked trace is forgotten after the ttl", 0.5, []call{
			{dropped, true, 0, true},
			{dropped, false, time.Minute, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecider(NewRatio(tt.rate), NewExperimentTraces(10, time.Minute))
			for i, c := range tt.calls {
				assert.Equal(t, c.want, d.Keep(c.trace, c.experiment, t0.Add(c.after)), "call %d", i)
			}
		})
	}
}

func TestDeciderMarkBeforeDeciding(t *testing.T) {
	dropped := pcommon.TraceID{8: 0xff, 15: 0xff}
	experiments := NewExperimentTraces(10, time.Minute)
	d := NewDecider(NewRatio(0.5), experiments)
	d.Mark(dropped, t0)
	assert.True(t, d.Keep(dropped, false, t0))

	// A trace the ratio keeps is not remembered: it needs no memory.
	d.Mark(pcommon.TraceID{15: 1}, t0)
	assert.Equal(t, 1, experiments.Len())
}

// TestDeciderLifetimeRunsFromTheLastSpanOrScore: a kept span or score of an experiment trace
// extends its lifetime, so a trace in use for longer than the ttl is not forgotten midway.
func TestDeciderLifetimeRunsFromTheLastSpanOrScore(t *testing.T) {
	d := NewDecider(NewRatio(1e-9), NewExperimentTraces(10, time.Minute))
	id := traceN(1)
	assert.True(t, d.Keep(id, true, t0))
	assert.True(t, d.Keep(id, false, t0.Add(50*time.Second)))
	assert.True(t, d.Keep(id, false, t0.Add(100*time.Second)), "50 s after the last span, though 100 s after the mark")
	assert.False(t, d.Keep(id, false, t0.Add(161*time.Second)), "forgotten a ttl after its last span")
}

// TestMarkExperimentsMarksSampledOutExperimentTraces: only traces the ratio samples out and a
// span marks are remembered.
func TestMarkExperimentsMarksSampledOutExperimentTraces(t *testing.T) {
	d := NewDecider(NewRatio(1e-9), NewExperimentTraces(10, time.Hour))
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	marked := spans.AppendEmpty()
	marked.SetTraceID(traceN(1))
	marked.Attributes().PutStr("svc.experiment.id", "exp-1")
	plain := spans.AppendEmpty()
	plain.SetTraceID(traceN(2))
	d.MarkExperiments(td, t0)
	assert.True(t, d.Keep(traceN(1), false, t0))
	assert.False(t, d.Keep(traceN(2), false, t0))

	keepAll := NewDecider(NewRatio(1), NewExperimentTraces(10, time.Hour))
	keepAll.MarkExperiments(td, t0)
	assert.Equal(t, 0, keepAll.experiments.Len(), "a rate that keeps everything needs no memory")
}
