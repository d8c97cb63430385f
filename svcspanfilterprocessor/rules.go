package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/pkg/scopematch"
	"github.com/svc/svc-collector/pkg/svcattr"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// genAIAttributePrefix: docs/contract.md §8, the dot is part of it (`gen_ai_custom` is not GenAI).
const genAIAttributePrefix = "gen_ai."

// openInferenceSpanKind marks every span of an OpenInference instrumentation, in any language and
// scope; the default filter keeps them as gen_ai. ones (README, "Known instrumentation scopes").
const openInferenceSpanKind = "openinference.span.kind"

// decision is the outcome of the filter for one span, and the reason the metrics report.
type decision uint8

const (
	keptSvcSDKScope decision = iota
	keptKnownScope
	keptGenAIAttribute
	keptKeepRule
	droppedNotGenAI
	droppedDropRule
	droppedSampledOut

	numDecisions
)

func (d decision) kept() bool { return d < droppedNotGenAI }

// reason is the value of the `reason` attribute of the spans_kept / spans_dropped metrics.
func (d decision) reason() string {
	return [numDecisions]string{
		"svc_sdk_scope", "known_scope", "gen_ai_attribute", "keep_rule", "not_genai", "drop_rule", "sampled_out",
	}[d]
}

// spanFilter is the compiled configuration.
type spanFilter struct {
	defaultFilter     bool
	keep, drop        spanRules
	dropScopeSpanName []scopeSpanNameRule

	sampler sampling.Ratio
	// experiments is the svcsampling extension's memory of experiment traces (nil without it): it
	// outlives remember_duration, so a late span of a sampled-out experiment trace is kept.
	experiments *sampling.Decider
	// outcome: outcome sampling decides traces in the trace memory; the sampler keeps every trace
	// and the experiment mark is looked for in every span (the decision reads it).
	outcome bool
}

type spanRules struct {
	scopes       *scopematch.Matcher
	attrPrefixes []string
	spanNames    map[string]struct{}
}

type scopeSpanNameRule struct {
	scope    *scopematch.Matcher
	spanName string
}

func newSpanFilter(cfg *Config) *spanFilter {
	f := &spanFilter{
		defaultFilter: cfg.DefaultFilter,
		keep:          compileRules(cfg.Keep),
		drop:          compileRules(cfg.Drop.SpanRules),
		sampler:       sampling.NewRatio(cfg.SampleRate),
	}
	for _, p := range cfg.Drop.ScopeSpanNames {
		rule := scopeSpanNameRule{scopematch.New(scopematch.Boundary, p.InstrumentationScope), p.SpanName}
		f.dropScopeSpanName = append(f.dropScopeSpanName, rule)
	}
	return f
}

func compileRules(r SpanRules) spanRules {
	names := make(map[string]struct{}, len(r.SpanNames))
	for _, n := range r.SpanNames {
		names[n] = struct{}{}
	}
	scopes := scopematch.New(scopematch.Boundary, r.InstrumentationScopes...)
	return spanRules{scopes: scopes, attrPrefixes: r.AttributePrefixes, spanNames: names}
}

// scopeVerdict is what the filter knows from the instrumentation scope alone, once per ScopeSpans.
type scopeVerdict struct {
	dropAll       bool
	keep          decision // what the scope alone keeps by; droppedNotGenAI when it keeps nothing
	dropSpanNames []string // the span names that scope_span_names drop in this scope
}

// forScope computes the scope's verdict into v, reusing v's slice so the hot path does not allocate.
func (f *spanFilter) forScope(scope pcommon.InstrumentationScope, v *scopeVerdict) {
	name := scope.Name()
	*v = scopeVerdict{keep: droppedNotGenAI, dropSpanNames: v.dropSpanNames[:0]}
	v.dropAll = f.drop.scopes.Match(name)
	for _, r := range f.dropScopeSpanName {
		if r.scope.Match(name) {
			v.dropSpanNames = append(v.dropSpanNames, r.spanName)
		}
	}
	switch {
	case f.defaultFilter && name == svcattr.SDKScopeName:
		v.keep = keptSvcSDKScope
	case f.defaultFilter && defaultScopes.Match(name):
		v.keep = keptKnownScope
	case f.keep.scopes.Match(name):
		v.keep = keptKeepRule
	}
}

// judge is the per-span decision (its reason, and the memory's input); on the path of every span, it
// does not allocate. The experiment mark (docs/contract.md §9: an experiment's sampled-out spans are
// kept) is looked for only in traces the sampler takes out (elsewhere it changes nothing).
func (f *spanFilter) judge(v *scopeVerdict, span ptrace.Span, now time.Time,
) (decision, tracememory.Decision) {
	name := span.Name()
	_, dropName := f.drop.spanNames[name]
	if v.dropAll || dropName || slices.Contains(v.dropSpanNames, name) {
		return droppedDropRule, tracememory.Decision{}
	}
	sampledIn := f.sampler.Keep(span.TraceID())
	wantExperiment := !sampledIn || f.outcome
	// The reason follows the default filter's order: svc-sdk scope, known scope, gen_ai. attribute,
	// keep rules (the scope alone may settle it).
	keep := v.keep
	wantGenAI := f.defaultFilter && keep >= keptGenAIAttribute
	wantKeepPrefix := !keep.kept() && len(f.keep.attrPrefixes) > 0
	// The attributes are read only when they can change the outcome.
	var scan attrScan
	if wantGenAI || wantKeepPrefix || len(f.drop.attrPrefixes) > 0 || wantExperiment {
		scan = f.scanAttributes(span.Attributes(), wantGenAI, wantKeepPrefix, wantExperiment)
		switch {
		case scan.drop:
			return droppedDropRule, tracememory.Decision{}
		case scan.genAI:
			keep = keptGenAIAttribute
		case scan.keepPrefix:
			keep = keptKeepRule
		}
	}
	if _, ok := f.keep.spanNames[name]; ok && !keep.kept() {
		keep = keptKeepRule
	}
	e := f.experiments // the shared memory, as long-lived as the score connectors'
	if e != nil && scan.experiment {
		e.Mark(span.TraceID(), now) // a dropped marking span marks its trace too
	}
	switch {
	case !keep.kept():
		return keep, tracememory.Decision{MarksExperiment: scan.experiment}
	case sampledIn:
		return keep, tracememory.Decision{Verdict: tracememory.Keep, MarksExperiment: scan.experiment}
	}
	marks := e != nil && e.Keep(span.TraceID(), scan.experiment, now) || scan.experiment
	return keep, tracememory.Decision{Verdict: tracememory.KeepIfExperiment, MarksExperiment: marks}
}

type attrScan struct {
	drop       bool // an attribute matches a drop prefix
	genAI      bool // an attribute name starts with gen_ai., or is openinference.span.kind
	keepPrefix bool // an attribute matches a keep prefix
	experiment bool // the span belongs to an experiment
}

// scanAttributes reads the attributes once for all the decision needs, and stops when it has it.
func (f *spanFilter) scanAttributes(attrs pcommon.Map, wantGenAI, wantKeepPrefix, wantExperiment bool) attrScan {
	var s attrScan
	for k, val := range attrs.All() {
		if hasAnyPrefix(k, f.drop.attrPrefixes) {
			return attrScan{drop: true}
		}
		if wantGenAI && !s.genAI {
			s.genAI = strings.HasPrefix(k, genAIAttributePrefix) || k == openInferenceSpanKind
		}
		if wantKeepPrefix && !s.keepPrefix {
			s.keepPrefix = hasAnyPrefix(k, f.keep.attrPrefixes)
		}
		if wantExperiment && !s.experiment {
			s.experiment = svcattr.IsExperimentAttribute(k, val)
		}
		// gen_ai. outranks a keep prefix, so a keep prefix alone does not end the scan.
		keepSettled := s.genAI || (!wantGenAI && (!wantKeepPrefix || s.keepPrefix))
		if len(f.drop.attrPrefixes) == 0 && keepSettled && (!wantExperiment || s.experiment) {
			break
		}
	}
	return s
}

func hasAnyPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}
