// Package readapi is a client of the svc platform's read APIs that docs/contract.md names (v2
// observations, v3 scores), as an application of the platform would call them. The demo and the
// end-to-end tests read back through it what the gateway delivered, instead of peeking into the
// local platform's memory.
package readapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// Client reads from a platform at BaseURL with a project's key pair.
type Client struct {
	BaseURL   string
	PublicKey string
	SecretKey string
	HTTP      *http.Client // default http.DefaultClient
}

// Observation is one observation of GET /api/public/v2/observations (docs/contract.md §13).
type Observation struct {
	ID                  string         `json:"id"`
	TraceID             string         `json:"traceId"`
	ParentObservationID *string        `json:"parentObservationId"`
	Type                string         `json:"type"`
	Name                string         `json:"name"`
	StartTime           string         `json:"startTime"`
	EndTime             string         `json:"endTime"`
	Input               *string        `json:"input"`
	Output              *string        `json:"output"`
	Metadata            map[string]any `json:"metadata"`
	Model               *string        `json:"model"`
	// TraceMetadata is the propagated metadata (field group trace_context).
	TraceMetadata map[string]any `json:"traceMetadata"`
}

// Parent is the parent observation id, empty for a root.
func (o Observation) Parent() string { return deref(o.ParentObservationID) }

// Score is one score of GET /api/public/v3/scores.
type Score struct {
	ID            string  `json:"id"`
	TraceID       *string `json:"traceId"`
	ObservationID *string `json:"observationId"`
	Name          string  `json:"name"`
	Value         any     `json:"value"`
	DataType      string  `json:"dataType"`
	Comment       *string `json:"comment"`
	Environment   *string `json:"environment"`
	DatasetRunID  *string `json:"datasetRunId"`
	Metadata      any     `json:"metadata"`
	Timestamp     string  `json:"timestamp"`
}

// DefaultObservationFields are the field groups Observations asks for.
const DefaultObservationFields = "core,basic,io,metadata,model"

// Observations returns the observations of a trace with the given field groups
// (DefaultObservationFields when empty).
func (c Client) Observations(ctx context.Context, traceID, fields string) ([]Observation, error) {
	if fields == "" {
		fields = DefaultObservationFields
	}
	var out []Observation
	err := c.get(ctx, "/api/public/v2/observations", url.Values{
		"traceId": {traceID}, "fields": {fields}, "limit": {"1000"},
	}, &out)
	return out, err
}

// Scores returns the scores that match query (traceId, id, name, ...).
func (c Client) Scores(ctx context.Context, query url.Values) ([]Score, error) {
	q := url.Values{"limit": {"100"}}
	for k, v := range query {
		q[k] = v
	}
	var out []Score
	err := c.get(ctx, "/api/public/v3/scores", q, &out)
	return out, err
}

// get GETs path with the project's Basic credentials and decodes the answer's `data` into out.
func (c Client) get(ctx context.Context, path string, query url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path+"?"+query.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(c.PublicKey+":"+c.SecretKey)))
	httpClient := c.HTTP
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
	}
	page := struct {
		Data any `json:"data"`
	}{Data: out}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
