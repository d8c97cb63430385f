package outcome // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/jsontext"
	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/pkg/svcattr"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/gate"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
)

// ReasonAttribute is the root span attribute of a kept trace that names why it was kept: a per-key
// trace metadata attribute, shown in the trace's metadata (docs/outcome-sampling.md).
const ReasonAttribute = "svc.trace.metadata.sampling_reason"

const stateCost = 96 // what a trace's state counts in the budget

// traceState is a trace's outcome state (doc.go), behind the trace memory's gate slot.
type traceState struct {
	obs     sampling.TraceOutcome
	firstAt time.Time // its first kept span or score record: decision_wait runs from it
	root    bool      // its root span arrived
	decided bool
	keep    bool
	reason  string
	scores  []*heldScore // waiting for the decision (scores.go)
}

// Decided is one trace decision, in Stats.
type Decided struct {
	Trace  pcommon.TraceID
	Keep   bool
	Reason string
	Wait   time.Duration // from the trace's first kept span or score record
	Early  bool          // forced by max_held_mib
}

// Stats are the events of one operation.
type Stats struct {
	Decided       []Decided
	ScoresDropped int64 // score records of traces decided dropped
}

// Settings of a Sampler.
type Settings struct {
	Outcome   *sampling.Outcome
	Memory    gate.Memory
	Journal   journal.Journal // journal.Nop: none
	Now       func() time.Time
	Logger    *zap.Logger
	Telemetry *metadata.TelemetryBuilder // nil: no metrics
	Observe   func(*Stats)               // nil: none
}

// Sampler is outcome sampling: the gate of the span filter's trace memory (gate.Gate).
type Sampler struct {
	Settings
	journaled bool
	sessions  keptSessions
	readyMu   sync.Mutex
	ready     []*ScoreDelivery
	wake      chan struct{}
}

// New returns the gate; the caller sets it on the memory (tracememory.Memory.SetGate).
func New(set Settings) *Sampler {
	if set.Observe == nil {
		set.Observe = func(*Stats) {}
	}
	if set.Logger == nil {
		set.Logger = zap.NewNop()
	}
	return &Sampler{Settings: set, journaled: set.Journal != journal.Nop, wake: make(chan struct{}, 1)}
}

var _ gate.Gate = (*Sampler)(nil)

func (s *Sampler) RecordKind() journal.Kind { return KindDecided }

// state is tr's state, made on first use (counted in the budget).
func (s *Sampler) state(tr gate.Trace) *traceState {
	if st, ok := tr.State().(*traceState); ok {
		return st
	}
	st := &traceState{}
	tr.SetState(st, stateCost)
	return st
}

func stateOf(tr gate.Trace) *traceState { st, _ := tr.State().(*traceState); return st }

// Kept observes a kept span of an undecided trace; it waits for the decision unless a rule matches
// now or it was not written ahead (its trace was forgotten since the plan): then the trace is decided
// at once. In session mode, a trace a rule kept before any of its spans named its session (a failing
// call ends, and is exported, before the agent span that carries the session) keeps the session once
// a later span names it.
func (s *Sampler) Kept(tr gate.Trace, span ptrace.Span, res pcommon.Resource, scope pcommon.InstrumentationScope,
	held bool, now time.Time) bool {
	st := s.state(tr)
	if st.decided { // (kept by a rule: read from its reason, which a restart keeps, unlike what it observed)
		_, known := st.obs.Session()
		if known || !st.keep || !sampling.IsRuleReason(st.reason) || s.Outcome.Config().DecidePer != sampling.DecidePerSession {
			return false
		}
		s.Outcome.ObserveSpan(&st.obs, span, res, scope)
		if k, ok := st.obs.Session(); ok {
			s.Outcome.KeepSession(k, st.reason, now)
			if s.journaled {
				tr.After(&keptSession{key: k, reason: st.reason, at: now})
			}
		}
		return false
	}
	s.Outcome.ObserveSpan(&st.obs, span, res, scope)
	st.started(now)
	if _, matched := s.Outcome.Matched(&st.obs); matched || !held {
		s.decide(tr, st, now, false)
		return false
	}
	return true
}

func (st *traceState) started(now time.Time) {
	if st.firstAt.IsZero() || now.Before(st.firstAt) {
		st.firstAt = now
	}
}

// Settled notes the trace's root; the root of a kept trace gets the reason as the platform reads its
// metadata: JSON text on a span of the new svc SDKs (it decodes their values), else the string.
func (s *Sampler) Settled(tr gate.Trace, span ptrace.Span, res pcommon.Resource, scope pcommon.InstrumentationScope) {
	st := stateOf(tr)
	if st == nil || !span.ParentSpanID().IsEmpty() {
		return
	}
	st.root = true
	if reason := st.reason; st.decided && st.keep {
		if svcattr.IsNewSDKEncoding(res, scope) {
			reason = string(jsontext.AppendString(nil, reason))
		}
		span.Attributes().PutStr(ReasonAttribute, reason)
	}
}

// Tick decides tr when its decision wait is over, or its root arrived and it settled.
func (s *Sampler) Tick(tr gate.Trace, now time.Time) {
	st := stateOf(tr)
	if st == nil || st.decided || st.firstAt.IsZero() {
		return
	}
	cfg := s.Outcome.Config()
	if now.Sub(st.firstAt) >= cfg.DecisionWait || (st.root && now.Sub(tr.LastActivity()) >= cfg.SettleDuration) {
		s.decide(tr, st, now, false)
	}
}

// Force decides tr on what it observed: never dropped undecided.
func (s *Sampler) Force(tr gate.Trace, now time.Time, why gate.ForceReason) {
	if st := stateOf(tr); st != nil {
		s.decide(tr, st, now, why == gate.ForceBudget)
	}
}

// decide decides tr (every path: doc.go, "decision"), journals it and opens or shuts its gate: kept,
// its held spans and score records go on; dropped, both are discarded.
func (s *Sampler) decide(tr gate.Trace, st *traceState, now time.Time, early bool) {
	if st.decided {
		return
	}
	st.keep, st.reason = s.Outcome.Decide(&st.obs, tr.ID(), tr.Experiment(), now)
	st.decided = true
	tr.Touch(now)    // the decision lives remember_duration from now
	if s.journaled { // after a restart its later spans, alone, could be decided otherwise: torn
		reason := st.reason[:min(len(st.reason), 255)]
		if !st.keep {
			reason = "" // dropped
		}
		tr.Record([]byte{byte(len(reason))}, []byte(reason))
		k, ok := st.obs.Session()
		if _, rule := s.Outcome.Matched(&st.obs); ok && rule && s.Outcome.Config().DecidePer == sampling.DecidePerSession {
			tr.After(&keptSession{key: k, reason: reason, at: now})
		}
	}
	dc := Decided{Trace: tr.ID(), Keep: st.keep, Reason: st.reason, Wait: now.Sub(st.firstAt), Early: early}
	tr.After(dc)
	for _, hs := range st.scores {
		tr.Hold(-hs.bytes)
		if st.keep {
			tr.After(hs)
		} else {
			tr.Done(hs.ref)
			tr.After(scoreDropped{})
		}
	}
	st.scores = nil
	if st.keep {
		tr.Open()
	} else {
		tr.Shut()
	}
}

type scoreDropped struct{}

// Finished journals the sessions an operation kept, queues the score records it released and
// observes its decisions.
func (s *Sampler) Finished(after []any) {
	var scores []*heldScore
	var stats Stats
	for _, x := range after {
		switch x := x.(type) {
		case *keptSession:
			s.journalSession(x)
		case *heldScore:
			scores = append(scores, x)
		case Decided:
			stats.Decided = append(stats.Decided, x)
		case scoreDropped:
			stats.ScoresDropped++
		}
	}
	s.queue(s.groupScores(scores))
	s.observe(&stats)
}

// Expire forgets the kept sessions whose session_keep_duration is over.
func (s *Sampler) Expire(now time.Time) { s.expireSessions(now) }

func (s *Sampler) observe(stats *Stats) {
	if tb := s.Telemetry; tb != nil {
		ctx := context.Background()
		for _, d := range stats.Decided { // a rule's name is the reason: few values
			decision := "dropped"
			if d.Keep {
				decision = "kept"
			}
			set := attribute.NewSet(attribute.String("decision", decision), attribute.String("reason", d.Reason))
			tb.ProcessorSvcspanfilterTracesDecided.Add(ctx, 1, metric.WithAttributeSet(set))
			tb.ProcessorSvcspanfilterDecisionWait.Record(ctx, d.Wait.Seconds())
		}
	}
	s.Observe(stats)
}
