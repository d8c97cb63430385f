// Package scorerecord is the one definition of a score record: the log record that carries an
// evaluation score from the svcscore connector (or straight from an application) to the svc
// exporter, and its mapping onto the platform's CreateScoreRequest (docs/contract.md §10, §11).
//
// A score record is a plog.LogRecord whose event name is EventName and whose attributes are the
// Attr* names below. Its TraceID is the score's traceId; its SpanID, when set, the observationId
// (an observation-level score); an empty SpanID makes a trace-level score, and an empty TraceID a
// score of what AttrDatasetRunID (a run-level score) or AttrSessionID names. Its Timestamp is the
// score's timestamp.
//
// The connector writes records with Write; the exporter reads them with Read and validates them
// with Request.Validate. Nothing else defines these names.
package scorerecord

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// EventName is the event name of a score record, and of the span or log event an application
// emits to create a score with full fidelity.
const EventName = "svc.score"

// Attribute names of a score record and of a `svc.score` event.
const (
	AttrID          = "svc.score.id"
	AttrName        = "svc.score.name"
	AttrValue       = "svc.score.value" // a number (int or double) or a string
	AttrDataType    = "svc.score.data_type"
	AttrComment     = "svc.score.comment"
	AttrConfigID    = "svc.score.config_id"
	AttrEnvironment = "svc.score.environment"
	// AttrSessionID and AttrDatasetRunID name what a score without a trace is about: a session,
	// or an experiment run (a run-level score, docs/contract.md §9). The platform refuses a score
	// that names none of trace, session and dataset run.
	AttrSessionID    = "svc.score.session_id"
	AttrDatasetRunID = "svc.score.dataset_run_id"
	// AttrMetadataPrefix starts one attribute per metadata key: svc.score.metadata.<key>.
	AttrMetadataPrefix = "svc.score.metadata."
	// AttrMetadata is the bare form of score metadata on a scoring event: one map attribute
	// instead of AttrMetadataPrefix+<key> attributes (the connector reads both).
	AttrMetadata = "svc.score.metadata"
	// AttrTarget on a `svc.score` span event says what the score is about: TargetObservation
	// (the span, the default) or TargetTrace (the whole trace, like span.score_trace()).
	AttrTarget = "svc.score.target"
)

// Values of AttrTarget.
const (
	TargetObservation = "observation"
	TargetTrace       = "trace"
)

// Score data types of the platform.
const (
	DataTypeNumeric     = "NUMERIC"
	DataTypeCategorical = "CATEGORICAL"
	DataTypeBoolean     = "BOOLEAN"
)

// MaxBatchSize is the most scores one POST /api/public/scores request may carry (docs/contract.md §11).
const MaxBatchSize = 100

// Score is what a producer knows of one score. Value must be a number or a string value; the
// producer does not validate it: the exporter does (docs/contract.md §10), so that a bad score is logged
// and dropped at one place.
type Score struct {
	ID            string
	TraceID       pcommon.TraceID
	ObservationID pcommon.SpanID // empty for a trace-level or run-level score
	Name          string
	Value         pcommon.Value
	DataType      string // empty: inferred from the value when the request is built
	Comment       string
	ConfigID      string
	Environment   string
	SessionID     string
	DatasetRunID  string
	Metadata      pcommon.Map // may be the zero Map
	Timestamp     pcommon.Timestamp
}

// Write fills lr (a fresh record) with the score record for s.
func Write(lr plog.LogRecord, s Score) {
	lr.SetEventName(EventName)
	lr.SetTraceID(s.TraceID)
	lr.SetSpanID(s.ObservationID)
	lr.SetTimestamp(s.Timestamp)
	attrs := lr.Attributes()
	attrs.EnsureCapacity(8)
	attrs.PutStr(AttrID, s.ID)
	attrs.PutStr(AttrName, s.Name)
	// A score without a value (the zero Value) is still written, without the value attribute,
	// so that Validate reports it as missing where the exporter validates.
	if s.Value != (pcommon.Value{}) {
		s.Value.CopyTo(attrs.PutEmpty(AttrValue))
	}
	putIfSet(attrs, AttrDataType, s.DataType)
	putIfSet(attrs, AttrComment, s.Comment)
	putIfSet(attrs, AttrConfigID, s.ConfigID)
	putIfSet(attrs, AttrEnvironment, s.Environment)
	putIfSet(attrs, AttrSessionID, s.SessionID)
	putIfSet(attrs, AttrDatasetRunID, s.DatasetRunID)
	if s.Metadata != (pcommon.Map{}) {
		s.Metadata.Range(func(k string, v pcommon.Value) bool {
			v.CopyTo(attrs.PutEmpty(AttrMetadataPrefix + k))
			return true
		})
	}
}

func putIfSet(attrs pcommon.Map, key, value string) {
	if value != "" {
		attrs.PutStr(key, value)
	}
}

// Request is the platform's CreateScoreRequest, as sent in the JSON array of
// POST /api/public/scores (camelCase names, docs/contract.md §10).
type Request struct {
	ID            string         `json:"id,omitempty"`
	TraceID       string         `json:"traceId,omitempty"`
	ObservationID string         `json:"observationId,omitempty"`
	SessionID     string         `json:"sessionId,omitempty"`
	DatasetRunID  string         `json:"datasetRunId,omitempty"`
	Name          string         `json:"name"`
	Value         any            `json:"value"` // float64 or string once validated
	DataType      string         `json:"dataType,omitempty"`
	Comment       string         `json:"comment,omitempty"`
	ConfigID      string         `json:"configId,omitempty"`
	Environment   string         `json:"environment,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	Timestamp     string         `json:"timestamp,omitempty"`
}

// Read maps a score record onto the request the exporter sends. It never fails: whatever it
// cannot map shows in Validate.
func Read(lr plog.LogRecord) Request {
	attrs := lr.Attributes()
	req := Request{}
	if tid := lr.TraceID(); !tid.IsEmpty() {
		req.TraceID = hex.EncodeToString(tid[:])
	}
	if sid := lr.SpanID(); !sid.IsEmpty() {
		req.ObservationID = hex.EncodeToString(sid[:])
	}
	ts := lr.Timestamp()
	if ts == 0 {
		ts = lr.ObservedTimestamp()
	}
	if ts != 0 {
		req.Timestamp = ts.AsTime().UTC().Format(time.RFC3339Nano)
	}
	traceLevel := false
	attrs.Range(func(k string, v pcommon.Value) bool {
		switch k {
		case AttrID:
			req.ID = v.AsString()
		case AttrName:
			req.Name = v.AsString()
		case AttrValue:
			req.Value = scoreValue(v)
		case AttrDataType:
			req.DataType = v.AsString()
		case AttrComment:
			req.Comment = v.AsString()
		case AttrConfigID:
			req.ConfigID = v.AsString()
		case AttrEnvironment:
			req.Environment = v.AsString()
		case AttrTarget:
			// A record an application sent straight to the exporter may still say what it
			// scores; a trace-level score names no observation.
			traceLevel = v.AsString() == TargetTrace
		case AttrSessionID:
			req.SessionID = v.AsString()
		case AttrDatasetRunID:
			req.DatasetRunID = v.AsString()
		default:
			if key, ok := strings.CutPrefix(k, AttrMetadataPrefix); ok && key != "" {
				if req.Metadata == nil {
					req.Metadata = make(map[string]any)
				}
				req.Metadata[key] = v.AsRaw()
			}
		}
		return true
	})
	if traceLevel {
		req.ObservationID = ""
	}
	if req.DataType == "" {
		switch req.Value.(type) {
		case float64:
			req.DataType = DataTypeNumeric
		case string:
			req.DataType = DataTypeCategorical
		}
	}
	return req
}

// invalidValue marks a value of a type the platform does not take; Validate rejects it.
type invalidValue struct{ typ pcommon.ValueType }

func scoreValue(v pcommon.Value) any {
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		return v.Double()
	case pcommon.ValueTypeInt:
		return float64(v.Int())
	case pcommon.ValueTypeStr:
		return v.Str()
	default:
		return invalidValue{typ: v.Type()}
	}
}

// Errors of Validate, for callers that count drops by reason.
var (
	ErrEmptyName      = errors.New("score name is empty")
	ErrNonFiniteValue = errors.New("score value is not a finite number")
	ErrInvalidValue   = errors.New("score value is neither a number nor a string")
)

// Validate applies the client-side validation of docs/contract.md §10: a score with an empty name, or a
// value that is a non-finite number or neither number nor string, must be dropped.
func (r Request) Validate() error {
	if r.Name == "" {
		return ErrEmptyName
	}
	switch v := r.Value.(type) {
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return ErrNonFiniteValue
		}
	case string:
	case invalidValue:
		return fmt.Errorf("%w (got %s)", ErrInvalidValue, v.typ)
	default:
		return fmt.Errorf("%w (missing)", ErrInvalidValue)
	}
	return nil
}

// DeterministicID derives a stable score id from what identifies the scoring event, so that a
// resent batch replaces its scores at the platform instead of duplicating them (the batch
// response carries no ids, docs/contract.md §10). The id has the 8-4-4-4-12 UUID layout (version 8): the
// first 16 bytes of the SHA-256 of the parts, each followed by a zero byte.
func DeterministicID(parts ...string) string {
	// The parts are hashed from one buffer, on the stack for ids of ordinary size, because the
	// connector derives an id for most scores it emits.
	var stack [256]byte
	buf := stack[:0]
	for _, p := range parts {
		buf = appendPart(buf, p)
	}
	return idOf(buf)
}

func appendPart(buf []byte, p string) []byte {
	buf = append(buf, p...)
	return append(buf, 0)
}

// idOf formats the SHA-256 of the encoded parts as a version 8 UUID.
func idOf(encodedParts []byte) string {
	sum := sha256.Sum256(encodedParts)
	sum[6] = (sum[6] & 0x0f) | 0x80 // version 8: custom
	sum[8] = (sum[8] & 0x3f) | 0x80 // RFC 4122 variant
	var out [36]byte
	hex.Encode(out[0:8], sum[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], sum[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], sum[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], sum[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], sum[10:16])
	return string(out[:])
}

// ContentID is the id of a score record that carries none (one an application sent straight to
// the exporter): derived from everything the record says, so that a resent record replaces
// itself at the platform. Two records that say exactly the same get the same id: they are the
// same score.
func (r Request) ContentID() string {
	return DeterministicID(r.TraceID, r.ObservationID, r.SessionID, r.DatasetRunID, r.Name, r.Timestamp, fmt.Sprint(r.Value))
}

// EventID is the id of a score made from a span event that carries no id of its own: the
// DeterministicID of the trace id and span id (lower-case hex, "" when empty), the event name,
// the event's own time (decimal Unix nanoseconds, 0 when it has none), the event's index in its
// span and the score name. The same span resent yields the same ids; two scores of one span
// differ by index or name. A span's events are the span's own, in its order, whatever the
// batching; a log record's place in its batch is not, so a log record's id is RecordID.
func EventID(traceID pcommon.TraceID, spanID pcommon.SpanID, eventName string, eventTime pcommon.Timestamp, index int, name string) string {
	var stack [256]byte
	buf := appendEventKey(stack[:0], traceID, spanID, eventName, eventTime)
	buf = append(strconv.AppendInt(buf, int64(index), 10), 0)
	buf = appendPart(buf, name)
	return idOf(buf)
}

// appendSpanKey writes the trace id and span id (lower-case hex, nothing when empty), each ended
// by a zero byte: the start of every derived score id.
func appendSpanKey(buf []byte, traceID pcommon.TraceID, spanID pcommon.SpanID) []byte {
	if !traceID.IsEmpty() {
		buf = hex.AppendEncode(buf, traceID[:])
	}
	buf = append(buf, 0)
	if !spanID.IsEmpty() {
		buf = hex.AppendEncode(buf, spanID[:])
	}
	return append(buf, 0)
}

// appendEventKey writes what both score-id derivations start from: the trace id and span id
// (lower-case hex, nothing when empty), the event name and the event's time (decimal Unix
// nanoseconds), each ended by a zero byte.
func appendEventKey(buf []byte, traceID pcommon.TraceID, spanID pcommon.SpanID, eventName string, eventTime pcommon.Timestamp) []byte {
	buf = appendSpanKey(buf, traceID, spanID)
	buf = appendPart(buf, eventName)
	return append(strconv.AppendUint(buf, uint64(eventTime), 10), 0)
}
