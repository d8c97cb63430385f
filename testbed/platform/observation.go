package platform

import (
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Observation is one stored span, as the platform shows it (docs/contract.md §14.1, §5.2, §14.3). Maps are
// shared with the store: read them, do not modify them.
type Observation struct {
	ID                  string // span id: hex of the bytes (protobuf), the string as sent (JSON)
	TraceID             string
	ParentObservationID string // empty for a root
	Name                string
	Type                string
	StartTime           time.Time
	EndTime             time.Time
	Level               string
	StatusMessage       string
	Environment         string
	Version             any // svc.version, else the resource's service.version, with its type
	Release             string
	// UserID, SessionID and Tags are the trace fields this span's own event carries (§4).
	UserID    string
	SessionID string
	Tags      []string
	// Input and Output are raw strings (ObservationV2): values sent as strings as they are,
	// structures the platform built as JSON text; empty when none.
	Input  string
	Output string
	// Metadata is the observation's metadata as the read API returns it (§3: flattened to dotted
	// keys, values that parse as JSON parsed). TraceMetadata is the trace metadata this span
	// carries (its svc.trace.metadata blob and keys, svc.metadata.*, ai.telemetry.metadata.*), read
	// the same way. Nil when empty.
	Metadata        map[string]any
	TraceMetadata   map[string]any
	Model           string
	ModelParameters map[string]any
	// Usage is the usage details (input, output, total, input_cached_tokens, ...); nil when none.
	Usage               map[string]int64
	Cost                map[string]float64
	CompletionStartTime *time.Time
	PromptName          string
	PromptVersion       any

	ScopeName          string
	ScopeVersion       string
	ResourceAttributes map[string]any // shared by the spans of one resource
	Attributes         map[string]any // every span attribute as it arrived
	SDKName            string         // X-Svc-Sdk-Name header of the request that delivered it
	SDKVersion         string         // X-Svc-Sdk-Version header

	ReceivedAt time.Time // when the last delivery arrived
	Deliveries int       // how many times this (traceId, id) arrived; >1 means duplicates

	// WritePath and WritePathRule are how the platform wrote the span (README.md, "Write
	// path") and which rule decided (1–5); VisibleAt is when the observations API first shows
	// it: its arrival when direct, arrival + the staging delay when dual. A redelivery keeps the
	// earliest VisibleAt of all deliveries and the path and rule of the delivery that gave it:
	// what a user sees.
	WritePath     WritePath
	WritePathRule int
	VisibleAt     time.Time
}

// spanKey identifies a span on the platform: a resent (traceId, spanId) replaces.
type spanKey struct {
	traceID string
	spanID  string
}

// delivery is what one request carried, ready for the store.
type delivery struct {
	keys         []spanKey
	observations []Observation // empty in StatsOnly mode
	traceEvents  []traceEvent  // by position of keys; empty in StatsOnly mode
	// dropped are spans the platform accepted (200) and then dropped alone: an empty id, or an
	// observation its schema refuses (docs/contract.md §3).
	dropped []DroppedSpan
	// arrived is when the request's body had been read: the first arrival of its new spans.
	arrived time.Time
	// ends are the spans' end times, by position of keys (also in StatsOnly mode).
	ends     []time.Time
	keysOnly bool // StatsOnly mode
	// path and rule are the request's write path and the rule that decided it; visibleAt is when
	// its spans become visible.
	path      WritePath
	rule      int
	visibleAt time.Time
}

// inEnvironment says whether a span the request stores has the environment env, as its
// observation's environment reads it: what the write path's scope rule asks of a batch. In StatsOnly mode, where no observation is kept,
// it reads the environment of every span with both ids.
func (d *delivery) inEnvironment(td ptrace.Traces, ids []spanIDs, env string) bool {
	if !d.keysOnly {
		for i := range d.observations {
			if d.observations[i].Environment == env {
				return true
			}
		}
		return false
	}
	n := 0
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				id := ids[n]
				n++
				if id.traceID == "" || id.spanID == "" {
					continue
				}
				if environment(spanView{span: span, attrs: span.Attributes(), resource: rs.Resource().Attributes()}) == env {
					return true
				}
			}
		}
	}
	return false
}

// DroppedSpan is a span the platform dropped after the 200, and why.
type DroppedSpan struct {
	TraceID, SpanID, Reason string
}

// observationsFrom maps the spans of one request onto observations and trace events. ids are the
// spans' ids as the platform reads them, in the order of td's spans.
func observationsFrom(td ptrace.Traces, ids []spanIDs, sdkName, sdkVersion string, now time.Time, keysOnly bool) delivery {
	d := delivery{keysOnly: keysOnly}
	n := 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var resourceAttrs map[string]any
		if !keysOnly {
			resourceAttrs = rs.Resource().Attributes().AsRaw()
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				id := ids[n]
				n++
				if id.traceID == "" || id.spanID == "" {
					d.dropped = append(d.dropped, DroppedSpan{id.traceID, id.spanID, "empty id"})
					continue
				}
				if keysOnly {
					d.keys = append(d.keys, spanKey{id.traceID, id.spanID})
					_, end := spanTimes(span)
					d.ends = append(d.ends, end)
					continue
				}
				sp := spanView{span: span, attrs: span.Attributes(), resource: rs.Resource().Attributes(),
					scopeName: ss.Scope().Name(), scopeVersion: ss.Scope().Version(), scopeAttrs: ss.Scope().Attributes()}
				o, ev, reason := records(sp, id)
				if reason != "" {
					d.dropped = append(d.dropped, DroppedSpan{id.traceID, id.spanID, reason})
					continue
				}
				o.ResourceAttributes = resourceAttrs
				o.SDKName, o.SDKVersion, o.ReceivedAt = sdkName, sdkVersion, now
				d.keys = append(d.keys, spanKey{id.traceID, id.spanID})
				d.observations = append(d.observations, o)
				d.traceEvents = append(d.traceEvents, ev)
				d.ends = append(d.ends, o.EndTime)
			}
		}
	}
	return d
}

// records builds one span's observation and trace event, field by field (docs/contract.md §14), and
// says why the legacy path's schema would drop the observation after the 200 ("" when it passes).
func records(sp spanView, id spanIDs) (Observation, traceEvent, string) {
	span := sp.span
	o := Observation{
		ID:                  id.spanID,
		TraceID:             id.traceID,
		ParentObservationID: id.parentID,
		Name:                observationName(sp),
		Type:                observationType(sp),
		Level:               level(sp),
		Environment:         environment(sp),
		Version:             version(sp),
		Release:             release(sp),
		ScopeName:           sp.scopeName,
		ScopeVersion:        sp.scopeVersion,
		Attributes:          sp.attrs.AsRaw(),
	}
	o.StartTime, o.EndTime = spanTimes(span)
	problem := ""
	if s, ok := statusMessage(sp).(string); ok {
		o.StatusMessage = s
	} else {
		problem = "status message is not a string"
	}
	in, out := inputOutput(sp, false)
	o.Input, o.Output = rawIO(in), rawIO(out)

	obsMD := spanMetadata(sp.attrs, attrObservationMetadata)
	traceMD := spanMetadata(sp.attrs, attrTraceMetadata)
	system := systemMetadata(sp)
	o.Metadata = storedMetadata(mergeInto(nil, spanMetadata(sp.resource, attrTraceMetadata), obsMD, system))
	o.TraceMetadata = storedMetadata(traceMD)

	if !agentOperation(sp) {
		o.Model = model(sp)
		o.Usage = usage(sp)
		o.Cost = cost(sp)
	}
	o.ModelParameters = modelParameters(sp)
	o.CompletionStartTime = completionStart(sp)
	if o.Type == TypeGeneration {
		o.PromptName, o.PromptVersion = prompt(sp)
	}
	if o.Type == TypeSpan || o.Type == TypeEvent {
		// The legacy path's SPAN and EVENT bodies have none of these.
		o.Model, o.Usage, o.Cost, o.ModelParameters, o.CompletionStartTime = "", nil, nil, nil, nil
		o.PromptName, o.PromptVersion = "", nil
	}

	ev := traceEventOf(sp, isRoot(sp, id.parentID), o.Name, obsMD, traceMD, system)
	if ev.userID != nil {
		o.UserID = *ev.userID
	}
	if ev.sessionID != nil {
		o.SessionID = *ev.sessionID
	}
	o.Tags = ev.tags
	if problem == "" {
		problem = schemaProblem(&o)
	}
	return o, ev, problem
}

// spanTimes: a missing edge copies the other; both missing → now.
func spanTimes(span ptrace.Span) (start, end time.Time) {
	s, e := span.StartTimestamp(), span.EndTimestamp()
	switch {
	case s == 0 && e == 0:
		now := time.Now().UTC()
		return now, now
	case s == 0:
		s = e
	case e == 0:
		e = s
	}
	return s.AsTime().UTC(), e.AsTime().UTC()
}

// schemaProblem is why the legacy path's schema drops the observation after the 200, or "": a
// prompt version that is not a whole number, a prompt name without version, a version that is
// not a string. (A status message that is not a string is checked in records.)
func schemaProblem(o *Observation) string {
	if o.Version != nil {
		if _, ok := o.Version.(string); !ok {
			return "version is not a string"
		}
	}
	if o.PromptName != "" {
		switch v := o.PromptVersion.(type) {
		case nil:
			return "prompt name without version"
		case int64:
		case float64:
			if v != float64(int64(v)) {
				return "prompt version is not an integer"
			}
		default:
			return "prompt version is not an integer"
		}
	}
	return ""
}
