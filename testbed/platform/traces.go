package platform

import (
	"net/http"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// handleTraces is POST /api/public/otel/v1/traces: an OTLP ExportTraceServiceRequest as
// protobuf or JSON, optionally gzip-compressed. It answers with an ExportTraceServiceResponse in
// the request's encoding; spans without valid ids are reported as a partial success.
func (p *Platform) handleTraces(w http.ResponseWriter, r *http.Request, x *exchange) {
	mt, herr := mediaType(r, contentTypeProtobuf, contentTypeJSON)
	if herr != nil {
		drainBody(r)
		p.reject(w, x, herr)
		return
	}
	body, herr := p.readBody(r, x)
	if herr != nil {
		p.reject(w, x, herr)
		return
	}
	arrived := time.Now()
	req := ptraceotlp.NewExportRequest()
	var err error
	if mt == contentTypeProtobuf {
		err = req.UnmarshalProto(body)
	} else {
		err = req.UnmarshalJSON(body)
	}
	if err != nil {
		p.reject(w, x, errorf(http.StatusBadRequest, "malformed OTLP %s payload: %v", mt, err))
		return
	}
	if key := x.fault.RefuseSpansWithAttribute; key != "" && holdsSpanWith(req.Traces(), key) {
		x.record.Fault = "refuseSpansWithAttribute"
		p.reject(w, x, errorf(http.StatusBadRequest, "Invalid request data: a span has the attribute %q (testbed fault); no spans were ingested", key))
		return
	}

	d := observationsFrom(req.Traces(), x.record.SDKName, x.record.SDKVersion, time.Now().UTC(), p.opts.StatsOnly)
	d.arrived = arrived
	x.record.Spans = len(d.keys) + d.rejected
	p.store.addSpans(d)
	if x.fault.DropAfterStore {
		x.record.Fault = "dropAfterStore"
		dropConnection(w, r, x)
		return
	}

	resp := ptraceotlp.NewExportResponse()
	if d.rejected > 0 {
		resp.PartialSuccess().SetRejectedSpans(int64(d.rejected))
		resp.PartialSuccess().SetErrorMessage(d.rejectReason)
	}
	var out []byte
	if mt == contentTypeProtobuf {
		out, err = resp.MarshalProto()
	} else {
		out, err = resp.MarshalJSON()
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "cannot encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", mt)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// reject answers with the error and logs why, so that a failing test's log says what the
// platform did not like.
func (p *Platform) reject(w http.ResponseWriter, x *exchange, e *httpError) {
	x.record.Error = e.message
	p.log.Info("request rejected", "endpoint", x.record.Endpoint, "status", e.status, "reason", e.message)
	e.write(w)
}
