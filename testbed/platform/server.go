package platform

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"time"
)

// Endpoint names an endpoint of the platform in statistics, the request log and faults.
type Endpoint string

// Endpoints of the platform.
const (
	EndpointTraces       Endpoint = "traces"       // POST /api/public/otel/v1/traces
	EndpointScores       Endpoint = "scores"       // POST /api/public/scores
	EndpointHealth       Endpoint = "health"       // GET /api/public/health
	EndpointObservations Endpoint = "observations" // GET /api/public/v2/observations
	EndpointScoresRead   Endpoint = "scores_read"  // GET /api/public/v3/scores
	EndpointTraceRead    Endpoint = "trace_read"   // GET /api/public/traces/{traceId}
)

// Paths of the platform's public API.
const (
	PathTraces       = "/api/public/otel/v1/traces"
	PathScores       = "/api/public/scores"
	PathHealth       = "/api/public/health"
	PathObservations = "/api/public/v2/observations"
	PathScoresRead   = "/api/public/v3/scores"
	// PathTraceRead is the prefix of GET /api/public/traces/{traceId}: the trace record.
	PathTraceRead = "/api/public/traces/"
)

// route is one endpoint of the public API.
type route struct {
	endpoint Endpoint
	method   string
	auth     bool
	handle   func(w http.ResponseWriter, r *http.Request, x *exchange)
}

func (p *Platform) newRoutes() map[string]route {
	return map[string]route{
		PathTraces:       {EndpointTraces, http.MethodPost, true, p.handleTraces},
		PathScores:       {EndpointScores, http.MethodPost, true, p.handleScores},
		PathHealth:       {EndpointHealth, http.MethodGet, false, p.handleHealth},
		PathObservations: {EndpointObservations, http.MethodGet, true, p.handleObservationsRead},
		PathScoresRead:   {EndpointScoresRead, http.MethodGet, true, p.handleScoresRead},
		PathTraceRead:    {EndpointTraceRead, http.MethodGet, true, p.handleTraceRead},
	}
}

// exchange is what a handler needs beside the request: the fault in force for this request
// and the request log entry it fills in.
type exchange struct {
	fault  Fault
	record *RequestRecord
	// dropped is the hijacked connection of a dropped request; it is closed only after the
	// request is recorded, so that a client seeing the drop also sees it in the statistics.
	dropped net.Conn
}

// ServeHTTP answers the public API, in this order: down mode, method, injected fault (delay,
// then drop or status), auth, then the endpoint itself. The control API under /_testbed/ is
// never subject to faults.
func (p *Platform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, controlPrefix) {
		p.serveControl(w, r)
		return
	}
	path := r.URL.Path
	if strings.HasPrefix(path, PathTraceRead) {
		path = PathTraceRead
	}
	rt, ok := p.routes[path]
	if !ok {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
		p.log.Info("request to unknown path", "method", r.Method, "path", r.URL.Path)
		return
	}
	rec := &statusRecorder{ResponseWriter: w}
	x := &exchange{record: &RequestRecord{
		Endpoint:        rt.endpoint,
		Method:          r.Method,
		ContentType:     r.Header.Get("Content-Type"),
		ContentEncoding: r.Header.Get("Content-Encoding"),
		SDKName:         headerValue(r.Header, HeaderSDKName),
		SDKVersion:      headerValue(r.Header, HeaderSDKVersion),
		Time:            time.Now(),
	}}
	defer func() {
		x.record.Status = rec.status
		x.record.Duration = time.Since(x.record.Time)
		p.store.addRequest(*x.record)
		if x.dropped != nil {
			_ = x.dropped.Close()
		}
		p.log.Debug("request", "endpoint", rt.endpoint, "status", rec.status, "dropped", x.record.Dropped,
			"fault", x.record.Fault, "spans", x.record.Spans, "scores", x.record.Scores, "duration", x.record.Duration)
	}()

	switch p.faults.downMode() {
	case DownRefuse:
		x.record.Fault = "down"
		writeError(rec, http.StatusServiceUnavailable, "platform is down (testbed outage)")
		return
	case DownDrop:
		x.record.Fault = "down"
		dropConnection(rec, r, x)
		return
	}
	if r.Method != rt.method {
		rec.Header().Set("Allow", rt.method)
		writeError(rec, http.StatusMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path+"; use "+rt.method)
		return
	}
	if f, ok := p.faults.take(rt.endpoint); ok {
		x.fault = f
		if !p.applyFault(rec, r, x) {
			return
		}
	}
	if rt.auth {
		if err := p.authorize(r); err != nil {
			p.reject(rec, x, &httpError{status: http.StatusUnauthorized, message: err.Error()})
			return
		}
	}
	rt.handle(rec, r, x)
}

// statusRecorder remembers the status a handler answered with (0 when it wrote nothing,
// e.g. when the connection was dropped).
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (to drop it).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// errorBody is the JSON body of every error answer.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, errorBody{Error: http.StatusText(status), Message: message})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	data, err := json.Marshal(body)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":"Internal Server Error","message":"cannot encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// dropConnection takes the connection away from the server so that it is closed without an
// answer, as a crashed server or a broken proxy would. The client sees EOF or a reset, never a
// status.
func dropConnection(w http.ResponseWriter, r *http.Request, x *exchange) {
	x.record.Dropped = true
	// Read what the client sends first, so that it sees the connection close while waiting
	// for the answer rather than a reset while still writing.
	drainBody(r)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Only HTTP/1 connections can be hijacked; abort the stream otherwise.
		panic(http.ErrAbortHandler)
	}
	x.dropped = conn
}
