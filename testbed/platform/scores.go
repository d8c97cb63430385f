package platform

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// MaxScoresPerBatch is the most scores one POST /api/public/scores may carry (docs/contract.md §11).
const MaxScoresPerBatch = 100

// Score data types.
const (
	DataTypeNumeric     = "NUMERIC"
	DataTypeCategorical = "CATEGORICAL"
	DataTypeBoolean     = "BOOLEAN"
)

// Score is one stored score. Metadata is shared with the store: read it, do not modify it.
type Score struct {
	ID string
	// IDGenerated is true when the request carried no id and the platform made one.
	IDGenerated   bool
	TraceID       string
	ObservationID string
	SessionID     string
	DatasetRunID  string
	Name          string
	Value         any    // float64 or string
	DataType      string // as sent, else NUMERIC for a number and CATEGORICAL for a string
	Comment       string
	ConfigID      string
	Environment   string
	Metadata      any       // any JSON value, decoded; nil when absent
	Timestamp     time.Time // as sent, else when it arrived
	SDKName       string    // X-Svc-Sdk-Name header of the request that delivered it
	SDKVersion    string
	ReceivedAt    time.Time // when the last delivery arrived
	Deliveries    int       // how many times this id was accepted; >1 means resent
}

// ScoreError is one rejected score of a 207 answer.
type ScoreError struct {
	Index   int    `json:"index"`        // position in the request's array
	ID      string `json:"id,omitempty"` // the score's id when it had one
	Message string `json:"message"`
}

// ScoreBatchResults is the body of a 207 answer (CreateScoreBatchResults, docs/contract.md §10).
type ScoreBatchResults struct {
	Accepted int          `json:"accepted"`
	Rejected int          `json:"rejected"`
	Errors   []ScoreError `json:"errors"`
}

// scoreBatchResponse is the body of a 200 answer: counts only, never ids (docs/contract.md §10).
type scoreBatchResponse struct {
	Accepted int `json:"accepted"`
}

// handleScores is POST /api/public/scores. The whole request is refused with 400 when the body
// is not a JSON array of 1 to 100 elements; otherwise every score is validated on its own,
// valid ones are stored by id, and the answer is 200 when all were accepted, 207 with
// ScoreBatchResults when any was rejected (also when all were).
func (p *Platform) handleScores(w http.ResponseWriter, r *http.Request, x *exchange) {
	if _, herr := mediaType(r, contentTypeJSON); herr != nil {
		drainBody(r)
		p.reject(w, x, herr)
		return
	}
	body, herr := p.readBody(r, x)
	if herr != nil {
		p.reject(w, x, herr)
		return
	}
	items, herr := scoreItems(body)
	if herr != nil {
		p.reject(w, x, herr)
		return
	}
	x.record.Scores = len(items)

	now := time.Now().UTC()
	accepted := make([]Score, 0, len(items))
	results := ScoreBatchResults{Errors: []ScoreError{}}
	for i, item := range items {
		sc, err := parseScore(item, now)
		if err != nil {
			results.Errors = append(results.Errors, ScoreError{Index: i, ID: sc.ID, Message: err.Error()})
			continue
		}
		sc.SDKName, sc.SDKVersion = x.record.SDKName, x.record.SDKVersion
		accepted = append(accepted, sc)
	}
	results.Accepted, results.Rejected = len(accepted), len(results.Errors)
	p.store.addScores(accepted, results.Rejected)

	if x.fault.DropAfterStore {
		x.record.Fault = "dropAfterStore"
		dropConnection(w, r, x)
		return
	}
	if results.Rejected > 0 {
		x.record.Error = fmt.Sprintf("%d of %d scores rejected", results.Rejected, len(items))
		p.log.Info("scores rejected", "rejected", results.Rejected, "of", len(items), "errors", results.Errors)
		writeJSON(w, http.StatusMultiStatus, results)
		return
	}
	writeJSON(w, http.StatusOK, scoreBatchResponse{Accepted: results.Accepted})
}

// scoreItems splits the body into the batch's elements, enforcing the batch rules.
func scoreItems(body []byte) ([]json.RawMessage, *httpError) {
	if !json.Valid(body) {
		return nil, errorf(http.StatusBadRequest, "malformed JSON body")
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] != '[' {
		return nil, errorf(http.StatusBadRequest, "body must be a JSON array of scores")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil {
		return nil, errorf(http.StatusBadRequest, "malformed JSON body: %v", err)
	}
	switch {
	case len(items) == 0:
		return nil, errorf(http.StatusBadRequest, "empty batch: send 1 to %d scores", MaxScoresPerBatch)
	case len(items) > MaxScoresPerBatch:
		return nil, errorf(http.StatusBadRequest, "batch of %d scores exceeds the limit of %d", len(items), MaxScoresPerBatch)
	}
	return items, nil
}

// scoreFields are the fields of CreateScoreRequest; any other field rejects the score.
var scoreFields = []string{
	"id", "traceId", "observationId", "sessionId", "datasetRunId", "name", "value", "dataType",
	"comment", "configId", "environment", "metadata", "timestamp",
}

func isScoreField(name string) bool {
	for _, f := range scoreFields {
		if f == name {
			return true
		}
	}
	return false
}

// parseScore validates one CreateScoreRequest. On error the returned score carries the id the
// request gave, if it could be read, for the error entry.
func parseScore(raw json.RawMessage, now time.Time) (Score, error) {
	var fields map[string]json.RawMessage
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return Score{}, errors.New("a score must be a JSON object")
	}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return Score{}, fmt.Errorf("malformed score: %v", err)
	}
	v := scoreValidator{fields: fields}
	sc := Score{ReceivedAt: now}
	sc.ID = v.optionalID("id")
	v.checkUnknownFields()
	sc.TraceID = v.optionalID("traceId")
	sc.ObservationID = v.optionalID("observationId")
	sc.SessionID = v.optionalID("sessionId")
	sc.DatasetRunID = v.optionalID("datasetRunId")
	name, present := v.str("name")
	if name == "" && (present || v.raw("name") == nil) {
		v.fail("name must be a non-empty string")
	}
	sc.Name = name
	sc.Value = v.value()
	sc.DataType = v.dataType(sc.Value)
	sc.Comment = v.optionalString("comment")
	sc.ConfigID = v.optionalString("configId")
	sc.Environment = v.optionalString("environment")
	sc.Metadata = v.metadata()
	sc.Timestamp = v.timestamp(now)
	switch {
	case sc.ObservationID != "" && sc.TraceID == "":
		v.fail("observationId needs the traceId of its trace")
	case sc.TraceID == "" && sc.SessionID == "" && sc.DatasetRunID == "":
		v.fail("a score must name what it scores: traceId, sessionId or datasetRunId")
	}
	if err := v.err(); err != nil {
		return Score{ID: sc.ID}, err
	}
	if sc.ID == "" {
		sc.ID, sc.IDGenerated = newScoreID(), true
	}
	return sc, nil
}

// scoreValidator reads the fields of one score and collects every problem.
type scoreValidator struct {
	fields   map[string]json.RawMessage
	problems []string
}

func (v *scoreValidator) fail(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

func (v *scoreValidator) err() error {
	if len(v.problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(v.problems, "; "))
}

func (v *scoreValidator) checkUnknownFields() {
	var unknown []string
	for name := range v.fields {
		if !isScoreField(name) {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		if camel := camelCase(name); camel != name && isScoreField(camel) {
			v.fail("unknown field %q (fields are camelCase: %q)", name, camel)
		} else {
			v.fail("unknown field %q", name)
		}
	}
}

// raw is the field's JSON, or nil when it is absent or null (null counts as absent, as for the
// platform's optional fields).
func (v *scoreValidator) raw(name string) json.RawMessage {
	r, ok := v.fields[name]
	if !ok || string(bytes.TrimSpace(r)) == "null" {
		return nil
	}
	return r
}

// str reads an optional string field: present is false when it is absent or null, and after
// a failure (the field is not a string).
func (v *scoreValidator) str(name string) (value string, present bool) {
	r := v.raw(name)
	if r == nil {
		return "", false
	}
	if err := json.Unmarshal(r, &value); err != nil {
		v.fail("%s must be a string", name)
		return "", false
	}
	return value, true
}

func (v *scoreValidator) optionalString(name string) string {
	s, _ := v.str(name)
	return s
}

// optionalID is an optional string field that, when given, must not be empty.
func (v *scoreValidator) optionalID(name string) string {
	s, present := v.str(name)
	if present && s == "" {
		v.fail("%s must not be empty when given", name)
	}
	return s
}

// value is a finite number (float64) or a string; nil after a failure.
func (v *scoreValidator) value() any {
	r := v.raw("value")
	if r == nil {
		v.fail("value is required: a number or a string")
		return nil
	}
	var decoded any
	dec := json.NewDecoder(bytes.NewReader(r))
	dec.UseNumber()
	if err := dec.Decode(&decoded); err != nil {
		v.fail("value: %v", err)
		return nil
	}
	switch val := decoded.(type) {
	case string:
		return val
	case json.Number:
		f, err := val.Float64()
		if err != nil {
			v.fail("value %s is not a finite number", val)
			return nil
		}
		return f
	default:
		v.fail("value must be a number or a string, not %s", jsonKind(decoded))
		return nil
	}
}

// dataType checks the declared type against the value, or infers it from the value.
func (v *scoreValidator) dataType(value any) string {
	dt := v.optionalString("dataType")
	_, isNumber := value.(float64)
	_, isString := value.(string)
	switch dt {
	case "":
		if isNumber {
			return DataTypeNumeric
		}
		if isString {
			return DataTypeCategorical
		}
		return ""
	case DataTypeNumeric:
		if value != nil && !isNumber {
			v.fail("dataType NUMERIC needs a numeric value")
		}
	case DataTypeBoolean:
		if f, ok := value.(float64); value != nil && (!ok || (f != 0 && f != 1)) {
			v.fail("dataType BOOLEAN needs the value 0 or 1")
		}
	case DataTypeCategorical:
		if value != nil && !isString {
			v.fail("dataType CATEGORICAL needs a string value")
		}
	default:
		v.fail("dataType %q is not one of NUMERIC, CATEGORICAL, BOOLEAN", dt)
	}
	return dt
}

func (v *scoreValidator) metadata() any {
	r := v.raw("metadata")
	if r == nil {
		return nil
	}
	var md any
	if err := json.Unmarshal(r, &md); err != nil {
		v.fail("metadata: %v", err)
	}
	return md
}

// timestamp is the RFC 3339 timestamp when given, else now.
func (v *scoreValidator) timestamp(now time.Time) time.Time {
	s, present := v.str("timestamp")
	if !present {
		return now
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		v.fail("timestamp %q is not RFC 3339", s)
		return now
	}
	return t.UTC()
}

func jsonKind(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// camelCase turns trace_id into traceId, to point snake_case senders at the right name.
func camelCase(name string) string {
	parts := strings.Split(name, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// newScoreID is a random UUID (version 4) for a score sent without an id.
func newScoreID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
