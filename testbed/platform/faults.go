package platform

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Fault is a misbehaviour injected into one endpoint. The kinds combine: Delay happens first,
// then Drop or Status answers instead of the endpoint; the size limits and DropAfterStore
// change how the endpoint itself answers.
type Fault struct {
	// Status answers every affected request with this status (400–599) and a JSON error,
	// without processing it (nothing is stored).
	Status int
	// RetryAfter, with Status, sets the Retry-After header to this many seconds (for 429, 503).
	RetryAfter int
	// Delay holds every affected request this long before anything else (the wait ends early
	// when the client gives up).
	Delay time.Duration
	// Drop closes the connection without answering and without storing anything.
	Drop bool
	// DropAfterStore stores what the request carried, then closes the connection without
	// answering: the client cannot know it arrived, so its retry delivers duplicates.
	// Traces and scores only.
	DropAfterStore bool
	// MaxBodyBytes answers 413 when the body as sent (compressed when gzip) is bigger.
	// Traces and scores only.
	MaxBodyBytes int64
	// MaxDecompressedBytes answers 413 when the body after decompression is bigger.
	// Traces and scores only.
	MaxDecompressedBytes int64
	// RefuseSpansWithAttribute answers 400 to any traces request holding a span with this
	// attribute key, as the platform refuses a whole request for one malformed span; requests
	// without such a span are processed as usual. Traces only.
	RefuseSpansWithAttribute string
	// Times limits the fault to the next Times requests to the endpoint; 0 keeps it until
	// cleared. Every request counts, whatever the fault did to it.
	Times int
}

// DownMode is the platform-wide outage switch.
type DownMode string

// Outage modes. Down applies to every /api/public/ path, health and read APIs included; the
// control API keeps working.
const (
	Up         DownMode = ""
	DownRefuse DownMode = "refuse" // answer 503 to everything
	DownDrop   DownMode = "drop"   // close every connection without answering
)

// faultable are the endpoints that take faults, and whether they take body faults.
var faultable = map[Endpoint]bool{
	EndpointTraces:       true,
	EndpointScores:       true,
	EndpointHealth:       false,
	EndpointObservations: false,
	EndpointScoresRead:   false,
}

func (f Fault) validate(endpoint Endpoint) error {
	bodyFaults, ok := faultable[endpoint]
	if !ok {
		return fmt.Errorf("unknown endpoint %q (traces, scores, health, observations, scores_read)", endpoint)
	}
	var errs []error
	if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
		errs = append(errs, fmt.Errorf("status %d is not an error status (400–599)", f.Status))
	}
	if f.RetryAfter < 0 || f.Delay < 0 || f.MaxBodyBytes < 0 || f.MaxDecompressedBytes < 0 || f.Times < 0 {
		errs = append(errs, errors.New("retryAfter, delay, maxBodyBytes, maxDecompressedBytes and times must not be negative"))
	}
	if f.RetryAfter > 0 && f.Status == 0 {
		errs = append(errs, errors.New("retryAfter needs a status"))
	}
	if f.Drop && (f.Status != 0 || f.DropAfterStore) {
		errs = append(errs, errors.New("drop excludes status and dropAfterStore"))
	}
	if f.Status != 0 && f.DropAfterStore {
		errs = append(errs, errors.New("status answers before anything is stored, so it excludes dropAfterStore"))
	}
	if f.RefuseSpansWithAttribute != "" && endpoint != EndpointTraces {
		errs = append(errs, fmt.Errorf("refuseSpansWithAttribute applies to traces, not %s", endpoint))
	}
	if !bodyFaults && (f.DropAfterStore || f.MaxBodyBytes > 0 || f.MaxDecompressedBytes > 0) {
		errs = append(errs, fmt.Errorf("dropAfterStore and body size limits apply to traces and scores, not %s", endpoint))
	}
	if f == (Fault{Times: f.Times}) {
		errs = append(errs, errors.New("the fault does nothing: set status, delay, drop, dropAfterStore, a size limit or refuseSpansWithAttribute"))
	}
	return errors.Join(errs...)
}

// faults holds the injected faults, the outage switch and the reported version.
type faults struct {
	mu         sync.Mutex
	byEndpoint map[Endpoint]*activeFault
	down       DownMode
	version    string
}

type activeFault struct {
	Fault
	remaining int // requests left when Times > 0
}

func newFaults(version string) *faults {
	return &faults{byEndpoint: make(map[Endpoint]*activeFault), version: version}
}

// take returns the fault in force for one request to the endpoint and counts the request
// against its Times.
func (fs *faults) take(endpoint Endpoint) (Fault, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	af, ok := fs.byEndpoint[endpoint]
	if !ok {
		return Fault{}, false
	}
	if af.Times > 0 {
		af.remaining--
		if af.remaining <= 0 {
			delete(fs.byEndpoint, endpoint)
		}
	}
	return af.Fault, true
}

func (fs *faults) downMode() DownMode {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.down
}

func (fs *faults) reset(version string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.byEndpoint = make(map[Endpoint]*activeFault)
	fs.down = Up
	fs.version = version
}

// applyFault does what the fault does before the endpoint runs. It returns false when the
// request has been answered (or dropped) and the endpoint must not run.
func (p *Platform) applyFault(w http.ResponseWriter, r *http.Request, x *exchange) bool {
	f := x.fault
	if f.Delay > 0 {
		// Read the body before waiting: the server notices a client that gives up only once
		// the body has been read, and a delayed request must then end without being stored.
		head, _ := io.ReadAll(io.LimitReader(r.Body, p.opts.MaxBodyBytes+1))
		r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
		timer := time.NewTimer(f.Delay)
		select {
		case <-timer.C:
		case <-r.Context().Done():
			timer.Stop()
			x.record.Fault = "delay"
			return false
		}
	}
	switch {
	case f.Drop:
		x.record.Fault = "drop"
		dropConnection(w, r, x)
		return false
	case f.Status != 0:
		x.record.Fault = "status"
		drainBody(r)
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
		}
		writeError(w, f.Status, fmt.Sprintf("testbed fault: %d %s", f.Status, http.StatusText(f.Status)))
		return false
	}
	return true
}

type readCloser struct {
	io.Reader
	io.Closer
}

// SetFault puts the fault on the endpoint, replacing the one it had.
func (p *Platform) SetFault(endpoint Endpoint, f Fault) error {
	if err := f.validate(endpoint); err != nil {
		return fmt.Errorf("platform: fault on %s: %w", endpoint, err)
	}
	p.faults.mu.Lock()
	defer p.faults.mu.Unlock()
	p.faults.byEndpoint[endpoint] = &activeFault{Fault: f, remaining: f.Times}
	p.log.Info("fault set", "endpoint", endpoint, "fault", fmt.Sprintf("%+v", f))
	return nil
}

// ClearFault removes the fault of one endpoint.
func (p *Platform) ClearFault(endpoint Endpoint) {
	p.faults.mu.Lock()
	defer p.faults.mu.Unlock()
	delete(p.faults.byEndpoint, endpoint)
}

// ClearFaults removes every endpoint's fault and ends an outage.
func (p *Platform) ClearFaults() {
	p.faults.mu.Lock()
	defer p.faults.mu.Unlock()
	p.faults.byEndpoint = make(map[Endpoint]*activeFault)
	p.faults.down = Up
	p.log.Info("faults cleared")
}

// Faults returns the faults in force by endpoint; Times is what is left of them.
func (p *Platform) Faults() map[Endpoint]Fault {
	p.faults.mu.Lock()
	defer p.faults.mu.Unlock()
	out := make(map[Endpoint]Fault, len(p.faults.byEndpoint))
	for ep, af := range p.faults.byEndpoint {
		f := af.Fault
		if f.Times > 0 {
			f.Times = af.remaining
		}
		out[ep] = f
	}
	return out
}

// SetDown starts (DownRefuse, DownDrop) or ends (Up) a platform-wide outage.
func (p *Platform) SetDown(mode DownMode) error {
	switch mode {
	case Up, DownRefuse, DownDrop:
	default:
		return fmt.Errorf("platform: unknown down mode %q (refuse, drop, or empty for up)", mode)
	}
	p.faults.mu.Lock()
	defer p.faults.mu.Unlock()
	p.faults.down = mode
	p.log.Info("outage switched", "mode", mode)
	return nil
}

// Down returns the outage mode in force (Up when none).
func (p *Platform) Down() DownMode { return p.faults.downMode() }

// SetVersion changes the version GET /api/public/health reports.
func (p *Platform) SetVersion(version string) error {
	if version == "" {
		return errors.New("platform: version must not be empty")
	}
	p.faults.mu.Lock()
	defer p.faults.mu.Unlock()
	p.faults.version = version
	return nil
}

// Version is the version GET /api/public/health reports.
func (p *Platform) Version() string {
	p.faults.mu.Lock()
	defer p.faults.mu.Unlock()
	return p.faults.version
}

// holdsSpanWith reports whether any span of td has the attribute key (the fault
// RefuseSpansWithAttribute).
func holdsSpanWith(td ptrace.Traces, key string) bool {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				if _, ok := span.Attributes().Get(key); ok {
					return true
				}
			}
		}
	}
	return false
}
