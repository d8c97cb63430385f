package platform

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// controlPrefix starts the testbed's control API. It needs no auth (the server listens on
// loopback only), is never subject to faults, and does not exist on the real platform.
const controlPrefix = "/_testbed/"

// Paths of the control API.
const (
	PathControlFaults  = "/_testbed/faults"
	PathControlDown    = "/_testbed/down"
	PathControlVersion = "/_testbed/version"
	PathControlStats   = "/_testbed/stats"
	PathControlReset   = "/_testbed/reset"
	// PathControlWritePath sets the deployment and the staging delay (README.md, "Write path").
	PathControlWritePath = "/_testbed/write-path"
)

// WritePathRequest is the JSON body of POST /_testbed/write-path; an omitted field keeps its
// setting. StagedDelay is a Go duration string: "0s" is the default, a negative one ("-1s")
// none.
type WritePathRequest struct {
	Deployment  *Deployment `json:"deployment,omitempty"`
	StagedDelay *string     `json:"stagedDelay,omitempty"`
}

// FaultRequest is the JSON body of POST /_testbed/faults: the fault for one endpoint.
// Delay is a Go duration string ("250ms", "2s").
type FaultRequest struct {
	Endpoint             Endpoint `json:"endpoint"`
	Status               int      `json:"status,omitempty"`
	RetryAfter           int      `json:"retryAfter,omitempty"`
	Delay                string   `json:"delay,omitempty"`
	Drop                 bool     `json:"drop,omitempty"`
	DropAfterStore       bool     `json:"dropAfterStore,omitempty"`
	MaxBodyBytes         int64    `json:"maxBodyBytes,omitempty"`
	MaxDecompressedBytes int64    `json:"maxDecompressedBytes,omitempty"`
	Times                int      `json:"times,omitempty"`
	// RefuseSpansWithAttribute: 400 to any traces request holding a span with this attribute.
	RefuseSpansWithAttribute string `json:"refuseSpansWithAttribute,omitempty"`
}

func (fr FaultRequest) fault() (Fault, error) {
	f := Fault{
		Status:               fr.Status,
		RetryAfter:           fr.RetryAfter,
		Drop:                 fr.Drop,
		DropAfterStore:       fr.DropAfterStore,
		MaxBodyBytes:         fr.MaxBodyBytes,
		MaxDecompressedBytes: fr.MaxDecompressedBytes,
		Times:                fr.Times,

		RefuseSpansWithAttribute: fr.RefuseSpansWithAttribute,
	}
	if fr.Delay != "" {
		d, err := time.ParseDuration(fr.Delay)
		if err != nil {
			return f, fmt.Errorf("delay %q is not a duration like 250ms or 2s", fr.Delay)
		}
		f.Delay = d
	}
	return f, nil
}

func faultRequestOf(ep Endpoint, f Fault) FaultRequest {
	fr := FaultRequest{
		Endpoint:             ep,
		Status:               f.Status,
		RetryAfter:           f.RetryAfter,
		Drop:                 f.Drop,
		DropAfterStore:       f.DropAfterStore,
		MaxBodyBytes:         f.MaxBodyBytes,
		MaxDecompressedBytes: f.MaxDecompressedBytes,
		Times:                f.Times,

		RefuseSpansWithAttribute: f.RefuseSpansWithAttribute,
	}
	if f.Delay > 0 {
		fr.Delay = f.Delay.String()
	}
	return fr
}

// controlState is the answer of every faults, down and version call: what is in force now.
type controlState struct {
	Faults      []FaultRequest `json:"faults"`
	Down        DownMode       `json:"down"`
	Version     string         `json:"version"`
	Deployment  Deployment     `json:"deployment"`
	StagedDelay string         `json:"stagedDelay"` // in force: "0s" when staged data is visible at once
}

func (p *Platform) controlState() controlState {
	deployment, delay := p.write.get()
	st := controlState{Faults: []FaultRequest{}, Down: p.Down(), Version: p.Version(),
		Deployment: deployment, StagedDelay: delay.String()}
	faults := p.Faults()
	for _, ep := range []Endpoint{EndpointTraces, EndpointScores, EndpointHealth, EndpointObservations, EndpointScoresRead} {
		if f, ok := faults[ep]; ok {
			st.Faults = append(st.Faults, faultRequestOf(ep, f))
		}
	}
	return st
}

// serveControl answers the control API:
//
//	GET    /_testbed/faults                 faults, outage mode and version in force
//	POST   /_testbed/faults                 set one endpoint's fault (FaultRequest)
//	DELETE /_testbed/faults[?endpoint=E]    clear one endpoint's fault, or all faults and the outage
//	POST   /_testbed/down  {"mode":"refuse"|"drop"}   start an outage
//	DELETE /_testbed/down                   end it
//	POST   /_testbed/version {"version":"4.58.0"}    set the version health reports
//	GET    /_testbed/write-path             settings in force (the faults answer)
//	POST   /_testbed/write-path {"deployment":"hosted-new-org","stagedDelay":"5s"}   set them
//	GET    /_testbed/stats                  Stats
//	POST   /_testbed/reset                  Reset
func (p *Platform) serveControl(w http.ResponseWriter, r *http.Request) {
	type handler func(w http.ResponseWriter, r *http.Request)
	routes := map[string]map[string]handler{
		PathControlFaults: {
			http.MethodGet:    func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, p.controlState()) },
			http.MethodPost:   p.controlSetFault,
			http.MethodDelete: p.controlClearFaults,
		},
		PathControlDown: {
			http.MethodPost: p.controlSetDown,
			http.MethodDelete: func(w http.ResponseWriter, _ *http.Request) {
				_ = p.SetDown(Up)
				writeJSON(w, http.StatusOK, p.controlState())
			},
		},
		PathControlVersion: {
			http.MethodPost: p.controlSetVersion,
		},
		PathControlWritePath: {
			http.MethodGet:  func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, p.controlState()) },
			http.MethodPost: p.controlSetWritePath,
		},
		PathControlStats: {
			http.MethodGet: func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, p.Stats()) },
		},
		PathControlReset: {
			http.MethodPost: func(w http.ResponseWriter, _ *http.Request) { p.Reset(); writeJSON(w, http.StatusOK, p.controlState()) },
		},
	}
	byMethod, ok := routes[r.URL.Path]
	if !ok {
		writeError(w, http.StatusNotFound, "no such control endpoint: "+r.URL.Path)
		return
	}
	h, ok := byMethod[r.Method]
	if !ok {
		writeError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path)
		return
	}
	h(w, r)
}

func (p *Platform) controlSetFault(w http.ResponseWriter, r *http.Request) {
	var fr FaultRequest
	if err := decodeControlBody(r, &fr); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f, err := fr.fault()
	if err == nil {
		err = p.SetFault(fr.Endpoint, f)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, p.controlState())
}

func (p *Platform) controlClearFaults(w http.ResponseWriter, r *http.Request) {
	if ep := Endpoint(r.URL.Query().Get("endpoint")); ep != "" {
		if _, ok := faultable[ep]; !ok {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown endpoint %q", ep))
			return
		}
		p.ClearFault(ep)
	} else {
		p.ClearFaults()
	}
	writeJSON(w, http.StatusOK, p.controlState())
}

func (p *Platform) controlSetDown(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Mode DownMode `json:"mode"`
	}
	err := decodeControlBody(r, &body)
	if err == nil && body.Mode == Up {
		err = fmt.Errorf(`mode is required: "refuse" or "drop" (DELETE %s ends the outage)`, PathControlDown)
	}
	if err == nil {
		err = p.SetDown(body.Mode)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, p.controlState())
}

func (p *Platform) controlSetVersion(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Version string `json:"version"`
	}
	err := decodeControlBody(r, &body)
	if err == nil {
		err = p.SetVersion(body.Version)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, p.controlState())
}

func (p *Platform) controlSetWritePath(w http.ResponseWriter, r *http.Request) {
	var body WritePathRequest
	err := decodeControlBody(r, &body)
	var delay time.Duration
	if err == nil && body.StagedDelay != nil {
		delay, err = time.ParseDuration(*body.StagedDelay)
		if err != nil {
			err = fmt.Errorf("stagedDelay %q is not a duration like 500ms or 2s", *body.StagedDelay)
		}
	}
	if err == nil && body.Deployment == nil && body.StagedDelay == nil {
		err = errors.New(`set "deployment" (self-hosted, hosted-new-org, hosted-old-org) and/or "stagedDelay"`)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if body.Deployment != nil {
		_ = p.SetDeployment(*body.Deployment) // valid: UnmarshalText checked it
	}
	if body.StagedDelay != nil {
		p.SetStagedDelay(delay)
	}
	writeJSON(w, http.StatusOK, p.controlState())
}

// decodeControlBody reads a JSON object and refuses unknown fields, so a typo in a test's
// fault does not silently set nothing.
func decodeControlBody(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON body: %v", err)
	}
	return nil
}
