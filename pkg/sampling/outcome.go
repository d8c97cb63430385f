package sampling

import (
	"encoding/binary"
	"math"
	"slices"
	"sync"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/observation"
	"github.com/svc/svc-collector/pkg/scorerecord"
)

// Outcome is outcome sampling compiled from an OutcomeConfig: the rules, the sample rate for the
// traces no rule keeps, and the memory of kept sessions. It is safe for concurrent use; the
// per-trace state it reads and updates (TraceOutcome) belongs to the caller, who keeps it with
// the trace and serialises the calls for one trace.
type Outcome struct {
	cfg        OutcomeConfig
	rules      []outcomeRule
	spanRules  bool // some rule reads spans
	scoreRules bool // some rule reads scores
	ratio      Ratio
	perSession bool

	mu       sync.Mutex
	sessions recentKeys[SessionKey, string] // kept session -> the rule that kept it
}

// outcomeRule is one compiled rule: it reads either spans or scores.
type outcomeRule struct {
	name  string
	span  func(r *spanReading) bool
	score func(name, dataType string, value pcommon.Value) bool
}

// SessionKey is a session id as the decision remembers it: its 64-bit FNV-1a hash, mixed by the
// MurmurHash3 finaliser so that its high bits, which the sample rate reads, are spread evenly over
// ids that differ in a few characters. A trace's state and a remembered session so take constant
// memory whatever the id's length.
type SessionKey uint64

// SessionKeyOf is the key of a session id.
func SessionKeyOf(sessionID string) SessionKey {
	h := uint64(14695981039346656037)
	for i := 0; i < len(sessionID); i++ {
		h ^= uint64(sessionID[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return SessionKey(h)
}

// TraceOutcome is what one trace's observations and scores told so far: the first rule (in
// configuration order) that any of them matched, and its session. Its zero value is a trace of
// which nothing was observed. It takes 16 bytes and holds no pointer, and it depends only on
// what was observed, not on the order: a restart that observes the same spans again decides the
// same.
type TraceOutcome struct {
	rule       int16 // index+1 of the first rule matched; 0: none
	hasSession bool
	session    SessionKey
}

// Matched is the name of the first rule the trace matched so far.
func (o *Outcome) Matched(st *TraceOutcome) (string, bool) {
	if st.rule == 0 {
		return "", false
	}
	return o.rules[st.rule-1].name, true
}

// Session is the trace's session key, in session mode, once a span named a session.
func (st *TraceOutcome) Session() (SessionKey, bool) { return st.session, st.hasSession }

// NewOutcome validates cfg and compiles it; ratio decides the traces no rule keeps.
func NewOutcome(cfg OutcomeConfig, ratio Ratio) (*Outcome, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := &Outcome{
		cfg:        cfg,
		ratio:      ratio,
		perSession: cfg.DecidePer == DecidePerSession,
		sessions:   newRecentKeys[SessionKey, string](cfg.MaxSessions, cfg.SessionKeepDuration),
	}
	for i := range cfg.Rules {
		r := compileRule(&cfg.Rules[i])
		o.spanRules = o.spanRules || r.span != nil
		o.scoreRules = o.scoreRules || r.score != nil
		o.rules = append(o.rules, r)
	}
	return o, nil
}

// Config is the configuration the outcome was compiled from (its waits and bounds are the
// caller's to apply).
func (o *Outcome) Config() OutcomeConfig { return o.cfg }

func compileRule(r *OutcomeRule) outcomeRule {
	c := outcomeRule{name: r.Name}
	switch r.Kind {
	case RuleError:
		c.span = func(r *spanReading) bool {
			return r.v.Span.Status().Code() == ptrace.StatusCodeError || r.v.Level() == observation.LevelError
		}
	case RuleLatency:
		over := r.LatencyOver.Seconds()
		c.span = func(r *spanReading) bool { return r.v.Latency() > over }
	case RuleTokens:
		over, usage := r.TokensOver, r.Usage
		c.span = func(r *spanReading) bool {
			in, out, total, ok := r.usage()
			switch usage {
			case UsageInput:
				return ok && in > over
			case UsageOutput:
				return ok && out > over
			}
			return ok && total > over
		}
	case RuleCost:
		over := r.CostOver
		c.span = func(r *spanReading) bool { cost, ok := r.v.Cost(); return ok && cost > over }
	case RuleFilter:
		f, _ := observation.ParseFilter(r.Filter) // validated
		c.span = func(r *spanReading) bool { return f.Match(r.v) }
	case RuleScore:
		name, dataType := r.ScoreName, r.scoreDataType()
		var match func(pcommon.Value) bool
		switch {
		case r.Boolean != nil:
			want := 0.0
			if *r.Boolean {
				want = 1
			}
			match = func(x pcommon.Value) bool { f, ok := numeric(x); return ok && f == want }
		case r.Below != nil:
			below := *r.Below
			match = func(x pcommon.Value) bool { f, ok := numeric(x); return ok && f < below }
		default:
			values := slices.Clone(r.Values)
			match = func(x pcommon.Value) bool {
				return x.Type() == pcommon.ValueTypeStr && slices.Contains(values, x.Str())
			}
		}
		c.score = func(n, dt string, x pcommon.Value) bool { return n == name && dt == dataType && match(x) }
	}
	return c
}

// spanReading is one span read by the rules: what several rules read (usage) is read once.
type spanReading struct {
	v                   *observation.View
	usageRead, hasUsage bool
	in, out, total      float64
}

func (r *spanReading) usage() (in, out, total float64, ok bool) {
	if !r.usageRead {
		r.in, r.out, r.total, r.hasUsage = r.v.Usage()
		r.usageRead = true
	}
	return r.in, r.out, r.total, r.hasUsage
}

// numeric is a score value as a finite number.
func numeric(x pcommon.Value) (float64, bool) {
	var f float64
	switch x.Type() {
	case pcommon.ValueTypeDouble:
		f = x.Double()
	case pcommon.ValueTypeInt:
		f = float64(x.Int())
	default:
		return 0, false
	}
	return f, !math.IsNaN(f) && !math.IsInf(f, 0)
}

// Observe updates the trace's state with one of its spans, read as the platform reads it. Only
// rules before the one already matched are tried: the state can only move to an earlier rule.
func (o *Outcome) Observe(st *TraceOutcome, v *observation.View) {
	if o.spanRules {
		n := len(o.rules)
		if st.rule > 0 {
			n = int(st.rule) - 1
		}
		reading := spanReading{v: v}
		for i := 0; i < n; i++ {
			if r := &o.rules[i]; r.span != nil && r.span(&reading) {
				st.rule = int16(i + 1)
				break
			}
		}
	}
	if o.perSession {
		// A trace that names several sessions takes the smallest key: the order the spans
		// arrive in does not change the decision.
		if id := v.SessionID(); id != "" {
			if k := SessionKeyOf(id); !st.hasSession || k < st.session {
				st.session, st.hasSession = k, true
			}
		}
	}
}

// ObserveSpan is Observe of a span of the given resource and scope.
func (o *Outcome) ObserveSpan(st *TraceOutcome, span ptrace.Span, resource pcommon.Resource, scope pcommon.InstrumentationScope) {
	v := observation.NewView(span, resource, scope)
	o.Observe(st, &v)
}

// ObserveScore updates the trace's state with a score record of it (the pkg/scorerecord schema:
// the gateway's evaluators' scores and the application's evaluation events, as the svcscore
// connector writes them), its data type and value as the platform takes them
// (scorerecord.Normalize: a bool value is a BOOLEAN 1 or 0; without a data type a number is
// NUMERIC and a string CATEGORICAL). A record it cannot read matches no rule.
func (o *Outcome) ObserveScore(st *TraceOutcome, lr plog.LogRecord) {
	if !o.scoreRules {
		return
	}
	attrs := lr.Attributes()
	name, ok := attrs.Get(scorerecord.AttrName)
	if !ok {
		return
	}
	value, ok := attrs.Get(scorerecord.AttrValue)
	if !ok {
		return
	}
	var dataType, target string
	if a, ok := attrs.Get(scorerecord.AttrDataType); ok {
		dataType = a.AsString()
	}
	if a, ok := attrs.Get(scorerecord.AttrTarget); ok {
		target = a.AsString()
	}
	typed, err := scorerecord.Normalize(dataType, value, target)
	if err != nil {
		return
	}
	n := len(o.rules)
	if st.rule > 0 {
		n = int(st.rule) - 1
	}
	for i := 0; i < n; i++ {
		if r := &o.rules[i]; r.score != nil && r.score(name.AsString(), typed.DataType, typed.Value) {
			st.rule = int16(i + 1)
			return
		}
	}
}

// Decide is the trace's decision at now, and its reason: the first rule it matched; else
// "experiment" when the caller knows it is one (ExperimentTraces); in session mode, "session"
// when a rule kept its session within session_keep_duration; else "sample" or "dropped" by the
// sample rate: on the trace id as the SDKs decide (Ratio), or in session mode on the session's
// key, so that every trace of a session is sampled alike. A trace kept by a rule in session mode
// keeps its session from now.
func (o *Outcome) Decide(st *TraceOutcome, traceID pcommon.TraceID, experiment bool, now time.Time) (keep bool, reason string) {
	if name, ok := o.Matched(st); ok {
		if o.perSession && st.hasSession {
			o.KeepSession(st.session, name, now)
		}
		return true, name
	}
	if experiment {
		return true, ReasonExperiment
	}
	if o.perSession && st.hasSession {
		if _, ok := o.SessionKept(st.session, now); ok {
			return true, ReasonSession
		}
		return o.sample(sessionTraceID(st.session))
	}
	return o.sample(traceID)
}

func (o *Outcome) sample(id pcommon.TraceID) (bool, string) {
	if o.ratio.Keep(id) {
		return true, ReasonSample
	}
	return false, ReasonDropped
}

// sessionTraceID puts a session key where Ratio reads a trace id (its low 64 bits).
func sessionTraceID(k SessionKey) pcommon.TraceID {
	var id pcommon.TraceID
	binary.BigEndian.PutUint64(id[8:], uint64(k))
	return id
}

// KeepSession remembers that a rule (reason) kept the session at keptAt: its traces decided
// within session_keep_duration after are kept. Decide calls it; recovery calls it with the
// remembered time.
func (o *Outcome) KeepSession(k SessionKey, reason string, keptAt time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sessions.mark(k, reason, keptAt)
}

// SessionKept reports whether a rule kept the session within session_keep_duration before now,
// and which.
func (o *Outcome) SessionKept(k SessionKey, now time.Time) (reason string, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.sessions.lookup(k, now); e != nil {
		return e.value, true
	}
	return "", false
}

// sizeofTraceOutcome is what a trace's state costs, checked by a test.
const sizeofTraceOutcome = unsafe.Sizeof(TraceOutcome{})
