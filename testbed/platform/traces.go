package platform

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// handleTraces is POST /api/public/otel/v1/traces, checked in the platform's order (docs/contract.md
// §3): content type, decoding, the structure of every span (one malformed span rejects the whole
// export with 400), the ingestion version header. Then 200 with a JSON body, to protobuf clients
// too, and no partial success: a span with an empty id, or an observation the schema refuses, is
// dropped alone after the 200 (Stats.SpansDropped, p.Dropped).
func (p *Platform) handleTraces(w http.ResponseWriter, r *http.Request, x *exchange) {
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	var mt string
	switch {
	case strings.Contains(ct, contentTypeJSON):
		mt = contentTypeJSON
	case strings.Contains(ct, contentTypeProtobuf):
		mt = contentTypeProtobuf
	default:
		drainBody(r)
		p.reject(w, x, errorf(http.StatusBadRequest, "unsupported Content-Type %q; use %s or %s", ct, contentTypeProtobuf, contentTypeJSON))
		return
	}
	body, herr := p.readBody(r, x)
	if herr != nil {
		p.reject(w, x, herr)
		return
	}
	arrived := time.Now()
	req := ptraceotlp.NewExportRequest()
	var ids []spanIDs
	if mt == contentTypeProtobuf {
		err := req.UnmarshalProto(body)
		if err == nil && !p.opts.StatsOnly {
			ids, err = protoSpanIDs(body)
		}
		if err != nil {
			p.reject(w, x, errorf(http.StatusBadRequest, "malformed OTLP protobuf payload: %v", err))
			return
		}
		if p.opts.StatsOnly {
			ids = pdataSpanIDs(req)
		}
	} else {
		var empty bool
		ids, empty, herr = jsonSpanIDs(body)
		if herr != nil {
			p.reject(w, x, herr)
			return
		}
		if empty {
			// No resourceSpans (snake_case JSON, for instance): 200, nothing stored.
			p.answerTraces(w)
			return
		}
		if err := req.UnmarshalJSON(body); err != nil {
			// The platform takes any string as an id; pdata does not (see README, "Not modelled").
			p.reject(w, x, errorf(http.StatusBadRequest, "malformed OTLP JSON payload: %v", err))
			return
		}
	}
	if n := req.Traces().SpanCount(); n != len(ids) {
		p.reject(w, x, errorf(http.StatusBadRequest, "malformed OTLP payload: %d spans, %d span ids", n, len(ids)))
		return
	}
	if key := x.fault.RefuseSpansWithAttribute; key != "" && holdsSpanWith(req.Traces(), key) {
		x.record.Fault = "refuseSpansWithAttribute"
		p.reject(w, x, errorf(http.StatusBadRequest, "Invalid request data: a span has the attribute %q (testbed fault); no spans were ingested", key))
		return
	}
	h := writeHeadersOf(r.Header)
	if v := h.ingestionVersion; v != "" {
		if n, err := strconv.Atoi(v); err != nil || n > 4 {
			p.reject(w, x, errorf(http.StatusBadRequest, "%s %q is not an integer ≤ 4", HeaderIngestionVersion, v))
			return
		}
	}

	td := req.Traces()
	d := observationsFrom(td, ids, h.sdkName, h.sdkVersion, time.Now().UTC(), p.opts.StatsOnly)
	d.arrived = arrived
	x.record.Spans = len(d.keys) + len(d.dropped)
	if td.ResourceSpans().Len() > 0 {
		// The platform enqueues the batch; its worker picks the write path (README.md).
		deployment, delay := p.write.get()
		d.path, d.rule = decideWritePath(td, h, deployment, func() bool { return d.inEnvironment(td, ids, EnvironmentSDKExperiment) })
		d.visibleAt = arrived
		if d.path == WritePathDual {
			d.visibleAt = arrived.Add(delay)
		}
		x.record.WritePath, x.record.WritePathRule, x.record.VisibleAt = d.path, d.rule, d.visibleAt
	}
	p.store.addSpans(d)
	for _, s := range d.dropped {
		p.log.Info("span dropped after the 200", "traceId", s.TraceID, "spanId", s.SpanID, "reason", s.Reason)
	}
	if x.fault.DropAfterStore {
		x.record.Fault = "dropAfterStore"
		dropConnection(w, r, x)
		return
	}
	p.answerTraces(w)
}

// answerTraces is the platform's 200: a JSON body whatever the request's encoding.
func (p *Platform) answerTraces(w http.ResponseWriter) {
	w.Header().Set("Content-Type", contentTypeJSON)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("{}"))
}

// pdataSpanIDs are the ids pdata read (StatsOnly mode: an all-zero id counts as empty).
func pdataSpanIDs(req ptraceotlp.ExportRequest) []spanIDs {
	var out []spanIDs
	for _, rs := range req.Traces().ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				id := spanIDs{}
				if !s.TraceID().IsEmpty() {
					id.traceID = s.TraceID().String()
				}
				if !s.SpanID().IsEmpty() {
					id.spanID = s.SpanID().String()
				}
				out = append(out, id)
			}
		}
	}
	return out
}

// reject answers with the error and logs why, so that a failing test's log says what the
// platform did not like.
func (p *Platform) reject(w http.ResponseWriter, x *exchange, e *httpError) {
	x.record.Error = e.message
	p.log.Info("request rejected", "endpoint", x.record.Endpoint, "status", e.status, "reason", e.message)
	e.write(w)
}
