package platform

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Pagination of the read APIs.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 1000
)

// handleHealth is GET /api/public/health, the one endpoint without auth.
func (p *Platform) handleHealth(w http.ResponseWriter, _ *http.Request, _ *exchange) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "OK", "version": p.Version()})
}

// DefaultObservationFields are the field groups of GET /api/public/v2/observations when the
// request names none.
const DefaultObservationFields = "core,basic"

// observationGroups render the field groups of ObservationV2 (docs/contract.md §13); see README.md for
// the table. "otel" is the testbed's own group: what arrived on the wire.
var observationGroups = map[string]func(p *Platform, o *Observation, out map[string]any){
	"core": func(_ *Platform, o *Observation, out map[string]any) {
		out["id"] = o.ID
		out["traceId"] = o.TraceID
		out["parentObservationId"] = orNull(o.ParentObservationID)
		out["type"] = o.Type
		out["startTime"] = o.StartTime
		out["endTime"] = o.EndTime
	},
	"basic": func(_ *Platform, o *Observation, out map[string]any) {
		out["name"] = o.Name
		out["level"] = o.Level
		out["statusMessage"] = orNull(o.StatusMessage)
		out["version"] = o.Version
		out["release"] = orNull(o.Release)
		out["environment"] = o.Environment
		out["userId"] = orNull(o.UserID)
		out["sessionId"] = orNull(o.SessionID)
	},
	"time": func(_ *Platform, o *Observation, out map[string]any) {
		out["completionStartTime"] = o.CompletionStartTime
		out["createdAt"] = o.ReceivedAt
	},
	"io": func(_ *Platform, o *Observation, out map[string]any) {
		out["input"] = orNull(o.Input)
		out["output"] = orNull(o.Output)
	},
	"metadata": func(_ *Platform, o *Observation, out map[string]any) {
		out["metadata"] = orEmpty(o.Metadata)
	},
	"model": func(_ *Platform, o *Observation, out map[string]any) {
		out["model"] = orNull(o.Model)
		out["modelParameters"] = orEmpty(o.ModelParameters)
	},
	"usage": func(_ *Platform, o *Observation, out map[string]any) {
		out["usageDetails"] = orEmptyOf(o.Usage)
		out["costDetails"] = orEmptyOf(o.Cost)
		total, ok := o.Cost["total"]
		if !ok {
			for _, c := range o.Cost {
				total += c
				ok = true
			}
		}
		if ok {
			out["totalCost"] = total
		} else {
			out["totalCost"] = nil
		}
	},
	"prompt": func(_ *Platform, o *Observation, out map[string]any) {
		out["promptName"] = orNull(o.PromptName)
		out["promptVersion"] = o.PromptVersion
	},
	"metrics": func(_ *Platform, o *Observation, out map[string]any) {
		out["latency"] = o.EndTime.Sub(o.StartTime).Seconds()
		if o.CompletionStartTime != nil {
			out["timeToFirstToken"] = o.CompletionStartTime.Sub(o.StartTime).Seconds()
		} else {
			out["timeToFirstToken"] = nil
		}
	},
	"trace_context": func(p *Platform, o *Observation, out map[string]any) {
		tr, _ := p.Trace(o.TraceID)
		out["traceName"] = orNull(tr.Name)
		out["traceTags"] = orEmptyList(tr.Tags)
		out["traceMetadata"] = orEmpty(o.TraceMetadata)
	},
	"otel": func(_ *Platform, o *Observation, out map[string]any) {
		out["scope"] = map[string]string{"name": o.ScopeName, "version": o.ScopeVersion}
		out["resourceAttributes"] = orEmpty(o.ResourceAttributes)
		out["attributes"] = orEmpty(o.Attributes)
		out["sdk"] = map[string]string{"name": o.SDKName, "version": o.SDKVersion}
	},
}

var observationGroupNames = "core, basic, time, io, metadata, model, usage, prompt, metrics, trace_context, otel"

// handleObservationsRead is GET /api/public/v2/observations: filters traceId, sessionId,
// filter (a JSON array of filter objects), fields (comma-separated groups), limit and cursor.
// Observations are ordered by startTime, then id.
func (p *Platform) handleObservationsRead(w http.ResponseWriter, r *http.Request, x *exchange) {
	q := r.URL.Query()
	fields := q.Get("fields")
	if fields == "" {
		fields = DefaultObservationFields
	}
	var groups []func(*Platform, *Observation, map[string]any)
	for _, name := range strings.Split(fields, ",") {
		name = strings.TrimSpace(name)
		render, ok := observationGroups[name]
		if !ok {
			p.reject(w, x, errorf(http.StatusBadRequest, "unknown field group %q in fields; groups: %s", name, observationGroupNames))
			return
		}
		groups = append(groups, render)
	}
	filters, herr := parseObservationFilters(q.Get("filter"))
	if herr != nil {
		p.reject(w, x, herr)
		return
	}
	page, herr := parsePage(q)
	if herr != nil {
		p.reject(w, x, herr)
		return
	}

	obs := p.Observations(ObservationFilter{TraceID: q.Get("traceId"), SessionID: q.Get("sessionId")})
	now := time.Now()
	matching := obs[:0]
	for i := range obs {
		// Staged (dual-path) spans are not shown before their delay has passed.
		if obs[i].VisibleAt.After(now) {
			continue
		}
		if filters.match(&obs[i]) {
			matching = append(matching, obs[i])
		}
	}
	sort.SliceStable(matching, func(i, j int) bool {
		if !matching[i].StartTime.Equal(matching[j].StartTime) {
			return matching[i].StartTime.Before(matching[j].StartTime)
		}
		return matching[i].ID < matching[j].ID
	})
	from, to, meta := page.slice(len(matching))
	data := make([]map[string]any, 0, to-from)
	for i := from; i < to; i++ {
		out := make(map[string]any)
		for _, render := range groups {
			render(p, &matching[i], out)
		}
		data = append(data, out)
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data, "meta": meta})
}

// handleScoresRead is GET /api/public/v3/scores: filters id (repeated or comma-separated),
// traceId, observationId, name; limit and cursor. fields is accepted and ignored: every field
// is returned. Scores are in order of first arrival.
func (p *Platform) handleScoresRead(w http.ResponseWriter, r *http.Request, x *exchange) {
	q := r.URL.Query()
	page, herr := parsePage(q)
	if herr != nil {
		p.reject(w, x, herr)
		return
	}
	var ids map[string]bool
	for _, v := range q["id"] {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				if ids == nil {
					ids = make(map[string]bool)
				}
				ids[id] = true
			}
		}
	}
	scores := p.Scores(ScoreFilter{TraceID: q.Get("traceId"), ObservationID: q.Get("observationId"), Name: q.Get("name")})
	matching := scores[:0]
	for _, sc := range scores {
		if ids == nil || ids[sc.ID] {
			matching = append(matching, sc)
		}
	}
	from, to, meta := page.slice(len(matching))
	data := make([]map[string]any, 0, to-from)
	for i := from; i < to; i++ {
		data = append(data, scoreView(&matching[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data, "meta": meta})
}

func scoreView(sc *Score) map[string]any {
	out := map[string]any{
		"id":            sc.ID,
		"traceId":       orNull(sc.TraceID),
		"observationId": orNull(sc.ObservationID),
		"sessionId":     orNull(sc.SessionID),
		"datasetRunId":  orNull(sc.DatasetRunID),
		"name":          sc.Name,
		"value":         sc.Value,
		"dataType":      sc.DataType,
		"comment":       orNull(sc.Comment),
		"configId":      orNull(sc.ConfigID),
		"environment":   orNull(sc.Environment),
		"metadata":      sc.Metadata,
		"timestamp":     sc.Timestamp,
		"createdAt":     sc.ReceivedAt,
	}
	if s, ok := sc.Value.(string); ok {
		out["stringValue"] = s
	}
	return out
}

// page is a validated limit and cursor. The cursor is opaque to clients: the offset of the
// next page.
type page struct {
	limit  int
	offset int
}

func parsePage(q url.Values) (page, *httpError) {
	pg := page{limit: DefaultPageLimit}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageLimit {
			return pg, errorf(http.StatusBadRequest, "limit %q must be a whole number from 1 to %d", s, MaxPageLimit)
		}
		pg.limit = n
	}
	if c := q.Get("cursor"); c != "" {
		raw, err := base64.RawURLEncoding.DecodeString(c)
		n, convErr := strconv.Atoi(string(raw))
		if err != nil || convErr != nil || n < 0 {
			return pg, errorf(http.StatusBadRequest, "invalid cursor %q", c)
		}
		pg.offset = n
	}
	return pg, nil
}

// slice is the range of the page among total items and the meta object of the answer.
func (pg page) slice(total int) (from, to int, meta map[string]any) {
	from = min(pg.offset, total)
	to = min(from+pg.limit, total)
	meta = map[string]any{"limit": pg.limit, "cursor": nil}
	if to < total {
		meta["cursor"] = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(to)))
	}
	return from, to, meta
}

func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func orEmptyOf[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}

func orEmptyList(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// handleTraceRead is GET /api/public/traces/{traceId}: the trace record (docs/contract.md §14.2), 404
// when no span of the trace is stored.
func (p *Platform) handleTraceRead(w http.ResponseWriter, r *http.Request, x *exchange) {
	id := strings.TrimPrefix(r.URL.Path, PathTraceRead)
	tr, ok := p.Trace(id)
	if !ok {
		p.reject(w, x, errorf(http.StatusNotFound, "trace %q not found", id))
		return
	}
	out := map[string]any{
		"id": tr.ID, "name": orNull(tr.Name), "userId": orNull(tr.UserID), "sessionId": orNull(tr.SessionID),
		"tags": orEmptyList(tr.Tags), "public": tr.Public, "input": orNull(tr.Input), "output": orNull(tr.Output),
		"metadata": orEmpty(tr.Metadata), "release": orNull(tr.Release), "version": tr.Version,
		"environment": orNull(tr.Environment), "timestamp": tr.Timestamp,
	}
	writeJSON(w, http.StatusOK, out)
}
