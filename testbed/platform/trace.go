package platform

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Trace is a trace record as the platform shows it (docs/contract.md §14.2): the merge of the trace
// events its spans produced, by span start.
type Trace struct {
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	UserID    string         `json:"userId"`
	SessionID string         `json:"sessionId"`
	Tags      []string       `json:"tags"`
	Public    bool           `json:"public"`
	Input     string         `json:"input"`
	Output    string         `json:"output"`
	Metadata  map[string]any `json:"metadata"`
	Release   string         `json:"release"`
	Version   any            `json:"version"`
	// Environment is the environment of the root's event.
	Environment string    `json:"environment"`
	Timestamp   time.Time `json:"timestamp"`
}

// Kinds of trace event a span produces (§4, legacy path).
const (
	traceEventRoot    = "root"
	traceEventUpdate  = "update"
	traceEventShallow = "shallow"
)

// traceEvent is what one span says of its trace. Pointers are nil when the event leaves the field
// undefined (a later event's undefined does not overwrite).
type traceEvent struct {
	kind      string
	start     time.Time
	name      *string
	userID    *string
	sessionID *string
	tags      []string
	public    *bool
	input     string
	output    string
	metadata  map[string]any
	release   *string
	version   any
	env       *string
}

// updateKeys make a non-root span send a trace update.
var updateKeys = []string{"svc.trace.name", "svc.trace.input", "svc.trace.output", "svc.trace.metadata", "svc.trace.public",
	"svc.trace.tags", "user.id", "session.id", "svc.user.id", "svc.session.id",
	"svc.observation.metadata.svc_user_id", "svc.observation.metadata.svc_session_id", "svc.observation.metadata.svc_tags",
	"svc.trace.metadata.svc_user_id", "svc.trace.metadata.svc_session_id", "svc.trace.metadata.svc_tags",
	"ai.telemetry.metadata.userId", "ai.telemetry.metadata.sessionId", "ai.telemetry.metadata.tags", "tag.tags"}

// isRoot: no truthy parent, or svc.internal.as_root = "true".
func isRoot(sp spanView, parentHex string) bool {
	return parentHex == "" || attrString(sp.attrs, "svc.internal.as_root") == "true"
}

// traceEventOf is the trace event of one span; obsMD and traceMD are its observation and trace
// metadata (spanMetadata), system its system keys, obsName and obsIn/obsOut its observation's.
func traceEventOf(sp spanView, root bool, obsName string, obsMD, traceMD, system map[string]any) traceEvent {
	a := sp.attrs
	ev := traceEvent{start: sp.span.StartTimestamp().AsTime().UTC()}
	user := traceUser(a, obsMD, traceMD)
	session := traceSession(a, obsMD, traceMD)
	tags := traceTags(a, obsMD, traceMD)
	public := tracePublic(a)
	switch {
	case root:
		ev.kind = traceEventRoot
		name := obsName
		if n := attrString(a, attrTraceName); n != "" {
			name = n
		}
		ev.name = &name
		in, out := inputOutput(sp, true)
		ev.input, ev.output = rawIO(in), rawIO(out)
		ev.metadata = mergeInto(nil, spanMetadata(sp.resource, attrTraceMetadata), traceMD, obsMD, system)
		rel := release(sp)
		ev.release = &rel
		ev.version = version(sp)
		env := environment(sp)
		ev.env = &env
	case needsUpdate(a):
		ev.kind = traceEventUpdate
		if n := attrString(a, attrTraceName); n != "" {
			ev.name = &n
		}
		ev.input, ev.output = rawIO(firstRaw(a, "svc.trace.input")), rawIO(firstRaw(a, "svc.trace.output"))
		ev.metadata = traceMD
	default:
		ev.kind = traceEventShallow
		return ev
	}
	ev.userID, ev.sessionID, ev.tags, ev.public = user, session, tags, &public
	return ev
}

func needsUpdate(a pcommon.Map) bool {
	if hasAnyTruthy(a, updateKeys...) {
		return true
	}
	for name, v := range a.All() {
		if strings.HasPrefix(name, attrTraceMetadataPrefix) && truthy(v) {
			return true
		}
	}
	return false
}

// traceUser: svc.user.id → user.id → svc_user_id (observation, then trace metadata) →
// ai.telemetry.metadata.userId; non-strings JSON-encoded.
func traceUser(a pcommon.Map, obsMD, traceMD map[string]any) *string {
	return firstTraceValue(a, []string{"svc.user.id", "user.id"}, "svc_user_id", obsMD, traceMD, "ai.telemetry.metadata.userId")
}

// traceSession: svc.session.id → session.id → gen_ai.conversation.id → svc_session_id →
// ai.telemetry.metadata.sessionId.
func traceSession(a pcommon.Map, obsMD, traceMD map[string]any) *string {
	return firstTraceValue(a, []string{"svc.session.id", "session.id", "gen_ai.conversation.id"}, "svc_session_id", obsMD, traceMD,
		"ai.telemetry.metadata.sessionId")
}

func firstTraceValue(a pcommon.Map, keys []string, mdKey string, obsMD, traceMD map[string]any, vercelKey string) *string {
	if v, ok := firstTruthy(a, keys...); ok {
		s := stringOrJSON(plainValue(v))
		return &s
	}
	for _, md := range []map[string]any{obsMD, traceMD} {
		if v, ok := md[mdKey]; ok && v != nil && v != "" {
			s := stringOrJSON(v)
			return &s
		}
	}
	if v, ok := truthyAttr(a, vercelKey); ok {
		s := stringOrJSON(plainValue(v))
		return &s
	}
	return nil
}

// traceTags: svc.trace.tags → svc.tags → svc_tags → ai.telemetry.metadata.tags → tag.tags; a list,
// or a string: `[…]` parsed as JSON, else split at commas.
func traceTags(a pcommon.Map, obsMD, traceMD map[string]any) []string {
	var raw any
	if v, ok := firstTruthy(a, "svc.trace.tags", "svc.tags"); ok {
		raw = plainValue(v)
	} else if v, ok := obsMD["svc_tags"]; ok {
		raw = v
	} else if v, ok := traceMD["svc_tags"]; ok {
		raw = v
	} else if v, ok := firstTruthy(a, "ai.telemetry.metadata.tags", "tag.tags"); ok {
		raw = plainValue(v)
	}
	return tagList(raw)
}

func tagList(raw any) []string {
	switch v := raw.(type) {
	case nil:
		return nil
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			out = append(out, stringOrJSON(e))
		}
		return out
	case string:
		s := strings.TrimSpace(v)
		if strings.HasPrefix(s, "[") {
			var list []any
			if err := json.Unmarshal([]byte(s), &list); err == nil {
				return tagList(list)
			}
		}
		var out []string
		for _, t := range strings.Split(s, ",") {
			if t = strings.TrimSpace(t); t != "" {
				out = append(out, t)
			}
		}
		return out
	}
	return []string{stringOrJSON(raw)}
}

// tracePublic: svc.trace.public → svc.public, true or "true".
func tracePublic(a pcommon.Map) bool {
	for _, key := range []string{"svc.trace.public", "svc.public"} {
		if v, ok := a.Get(key); ok {
			return (v.Type() == pcommon.ValueTypeBool && v.Bool()) || (v.Type() == pcommon.ValueTypeStr && v.Str() == "true")
		}
	}
	return false
}

// mergeTrace is the storage merge: events by span start, later values overwrite (undefined does
// not), metadata deep-merged, tags unioned, input and output the latest non-empty.
func mergeTrace(id string, events []traceEvent) Trace {
	sorted := append([]traceEvent(nil), events...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].start.Before(sorted[j].start) })
	t := Trace{ID: id}
	metadata := map[string]any{}
	seen := map[string]bool{}
	for i, ev := range sorted {
		if i == 0 || ev.start.Before(t.Timestamp) {
			t.Timestamp = ev.start
		}
		if ev.kind == traceEventShallow {
			continue
		}
		set := func(dst *string, src *string) {
			if src != nil {
				*dst = *src
			}
		}
		set(&t.Name, ev.name)
		set(&t.UserID, ev.userID)
		set(&t.SessionID, ev.sessionID)
		set(&t.Release, ev.release)
		set(&t.Environment, ev.env)
		if ev.version != nil {
			t.Version = ev.version
		}
		if ev.public != nil {
			t.Public = *ev.public
		}
		for _, tag := range ev.tags {
			if !seen[tag] {
				seen[tag] = true
				t.Tags = append(t.Tags, tag)
			}
		}
		if ev.input != "" {
			t.Input = ev.input
		}
		if ev.output != "" {
			t.Output = ev.output
		}
		deepMerge(metadata, ev.metadata)
	}
	t.Metadata = storedMetadata(metadata)
	sort.Strings(t.Tags)
	return t
}

func deepMerge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				deepMerge(dm, sm)
				continue
			}
			cp := map[string]any{}
			deepMerge(cp, sm)
			dst[k] = cp
			continue
		}
		dst[k] = v
	}
}
