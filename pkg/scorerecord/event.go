package scorerecord

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// Event and attribute names of the OpenTelemetry GenAI semantic conventions' evaluation event.
const (
	GenAIEvaluationEvent       = "gen_ai.evaluation.result"
	GenAIEvaluationName        = "gen_ai.evaluation.name"
	GenAIEvaluationScoreValue  = "gen_ai.evaluation.score.value"
	GenAIEvaluationScoreLabel  = "gen_ai.evaluation.score.label"
	GenAIEvaluationExplanation = "gen_ai.evaluation.explanation"
	// Carried into the score's metadata under their own names: which response was evaluated, and
	// why the evaluation failed.
	GenAIResponseID = "gen_ai.response.id"
	ErrorType       = "error.type"
)

// EventNameAttr carries the event name of log records from SDKs older than LogRecord.EventName.
const EventNameAttr = "event.name"

// metadataLabelKey is the metadata key of a gen_ai.evaluation.result label when the event also
// has a numeric value (the value wins: it is the score; the label is kept beside it).
const metadataLabelKey = "label"

// EventKind is the kind of a scoring event: the event names that make a score.
type EventKind int

const (
	KindSvcScore EventKind = iota
	KindGenAIEvaluation
	// NumEventKinds is the number of kinds, for arrays indexed by kind.
	NumEventKinds
)

// String is the event name of the kind.
func (k EventKind) String() string {
	if k == KindGenAIEvaluation {
		return GenAIEvaluationEvent
	}
	return EventName
}

// KindOf tells whether an event of this name makes a score, and of which kind.
func KindOf(name string) (EventKind, bool) {
	switch name {
	case EventName:
		return KindSvcScore, true
	case GenAIEvaluationEvent:
		return KindGenAIEvaluation, true
	}
	return 0, false
}

// LogRecordEventName is the event name of a log record: LogRecord.EventName, else the
// `event.name` attribute of older SDKs, else "".
func LogRecordEventName(lr plog.LogRecord) string {
	if name := lr.EventName(); name != "" {
		return name
	}
	if v, ok := lr.Attributes().Get(EventNameAttr); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

// Event is one event that makes a score (a span event or a log record), with what it is
// attached to.
type Event struct {
	Kind    EventKind
	Attrs   pcommon.Map
	TraceID pcommon.TraceID
	SpanID  pcommon.SpanID
	// Time is the event's own time; 0 when it has none.
	Time pcommon.Timestamp
	// LogRecord tells that the event is a log record. Its id is then derived from its content
	// (RecordID), since its position in a batch is up to the client; a span event's id uses
	// SpanIndex (EventID).
	LogRecord bool
	// SpanIndex is a span event's position among its span's events, part of its id.
	SpanIndex int
	// Environment is the svc.environment of the span or resource, used when the event has none.
	Environment string
}

// ErrInvalidTarget reports a svc.score.target that is neither observation nor trace.
var ErrInvalidTarget = fmt.Errorf("%s must be %q or %q", AttrTarget, TargetObservation, TargetTrace)

// Score maps a scoring event onto a score. queuedAt is the timestamp of a score whose event has
// no time. The score's name and value are not validated here: the svc exporter validates every
// score at one place (docs/contract.md §10), so a score without a name or value goes on and is logged and
// dropped there. Only what the event alone can tell fails here: the target (ErrInvalidTarget).
func (ev Event) Score(queuedAt pcommon.Timestamp) (Score, error) {
	s := Score{
		TraceID:       ev.TraceID,
		ObservationID: ev.SpanID,
		Timestamp:     ev.Time,
	}
	if s.Timestamp == 0 {
		s.Timestamp = queuedAt
	}
	var target, label string
	var hasLabel bool
	ev.Attrs.Range(func(k string, v pcommon.Value) bool {
		switch k {
		case AttrID:
			s.ID = v.AsString()
		case AttrDataType:
			s.DataType = strings.ToUpper(v.AsString())
		case AttrConfigID:
			s.ConfigID = v.AsString()
		case AttrEnvironment:
			s.Environment = v.AsString()
		case AttrSessionID:
			s.SessionID = v.AsString()
		case AttrDatasetRunID:
			s.DatasetRunID = v.AsString()
		case AttrTarget:
			target = v.AsString()
		case AttrMetadata:
			if v.Type() == pcommon.ValueTypeMap {
				v.Map().Range(func(mk string, mv pcommon.Value) bool {
					mv.CopyTo(scoreMetadata(&s).PutEmpty(mk))
					return true
				})
			}
		default:
			if key, ok := strings.CutPrefix(k, AttrMetadataPrefix); ok && key != "" {
				v.CopyTo(scoreMetadata(&s).PutEmpty(key))
				return true
			}
			if ev.Kind == KindSvcScore {
				switch k {
				case AttrName:
					s.Name = v.AsString()
				case AttrValue:
					s.Value = v
				case AttrComment:
					s.Comment = v.AsString()
				}
				return true
			}
			switch k {
			case GenAIEvaluationName:
				s.Name = v.AsString()
			case GenAIEvaluationScoreValue:
				s.Value = v
			case GenAIEvaluationScoreLabel:
				label, hasLabel = v.AsString(), true
			case GenAIEvaluationExplanation:
				s.Comment = v.AsString()
			case GenAIResponseID, ErrorType:
				v.CopyTo(scoreMetadata(&s).PutEmpty(k))
			}
		}
		return true
	})

	switch target {
	case "", TargetObservation:
	case TargetTrace:
		s.ObservationID = pcommon.SpanID{}
	default:
		return s, fmt.Errorf("score %q: %w, got %q", s.Name, ErrInvalidTarget, target)
	}

	hasValue := s.Value != (pcommon.Value{}) && s.Value.Type() != pcommon.ValueTypeEmpty
	if hasValue && s.Value.Type() == pcommon.ValueTypeBool {
		// An OpenTelemetry bool attribute is the platform's BOOLEAN score, valued 1 or 0.
		b := s.Value.Bool()
		s.Value = pcommon.NewValueDouble(0)
		if b {
			s.Value.SetDouble(1)
		}
		if s.DataType == "" {
			s.DataType = DataTypeBoolean
		}
	}
	switch {
	case hasLabel && hasValue:
		// gen_ai.evaluation.result with both: the number is the score, the label rides along.
		scoreMetadata(&s).PutStr(metadataLabelKey, label)
	case hasLabel:
		// A label without a value is a categorical score (docs/contract.md §10).
		s.Value = pcommon.NewValueStr(label)
		if s.DataType == "" {
			s.DataType = DataTypeCategorical
		}
	}

	if s.Environment == "" {
		s.Environment = ev.Environment
	}
	if s.ID == "" {
		if ev.LogRecord {
			s.ID = RecordID(ev.TraceID, ev.SpanID, ev.Kind.String(), ev.Time, ev.Attrs)
		} else {
			s.ID = EventID(ev.TraceID, ev.SpanID, ev.Kind.String(), ev.Time, ev.SpanIndex, s.Name)
		}
	}
	return s, nil
}

// scoreMetadata returns the score's metadata map, creating it on first use.
func scoreMetadata(s *Score) pcommon.Map {
	if s.Metadata == (pcommon.Map{}) {
		s.Metadata = pcommon.NewMap()
	}
	return s.Metadata
}

// RecordID is the id of a score made from a scoring log record that carries no id of its own:
// a UUID-shaped SHA-256 (as DeterministicID) of the trace id and span id (lower-case hex), the
// event name, the record's time (decimal Unix nanoseconds; its Timestamp, else its
// ObservedTimestamp, 0 when neither) and every attribute (the score's name, value and the rest),
// in a canonical form: keys sorted, each value with its type, nested maps and slices included.
// Nothing of the record's place in its batch counts, so the same record re-batched by a client
// (a retry, another batch size, other records around it) keeps its id. Two records that say
// exactly the same get the same id: they are the same score.
func RecordID(traceID pcommon.TraceID, spanID pcommon.SpanID, eventName string, eventTime pcommon.Timestamp, attrs pcommon.Map) string {
	// One buffer on the stack for records of ordinary size; nested maps and slices, rare in a
	// score, are encoded apart (a recursive encoder would move the buffer to the heap).
	var stack [512]byte
	buf := append(stack[:0], "record"...)
	buf = appendEventKey(append(buf, 0), traceID, spanID, eventName, eventTime)
	var keyStack [16]string
	keys := sortedKeys(keyStack[:0], attrs)
	buf = binary.AppendUvarint(buf, uint64(len(keys)))
	for _, k := range keys {
		v, _ := attrs.Get(k)
		buf = appendString(buf, k)
		if t := v.Type(); t == pcommon.ValueTypeMap || t == pcommon.ValueTypeSlice {
			buf = append(buf, byte(t))
			buf = append(buf, appendNested(nil, v)...)
			continue
		}
		buf = appendScalar(buf, v)
	}
	return idOf(buf)
}

// sortedKeys appends the keys of m to keys, sorted.
func sortedKeys(keys []string, m pcommon.Map) []string {
	m.Range(func(k string, _ pcommon.Value) bool {
		keys = append(keys, k)
		return true
	})
	slices.Sort(keys)
	return keys
}

// appendScalar appends the canonical form of a value that is not a map or slice: its type, then
// its content; strings and bytes length-prefixed, so that no two different values encode alike.
// Maps and slices: their type, then appendNested.
func appendScalar(buf []byte, v pcommon.Value) []byte {
	buf = append(buf, byte(v.Type()))
	switch v.Type() {
	case pcommon.ValueTypeStr:
		buf = appendString(buf, v.Str())
	case pcommon.ValueTypeInt:
		buf = binary.BigEndian.AppendUint64(buf, uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(v.Double()))
	case pcommon.ValueTypeBool:
		if v.Bool() {
			buf = append(buf, 1)
		} else {
			buf = append(buf, 0)
		}
	case pcommon.ValueTypeBytes:
		b := v.Bytes().AsRaw()
		buf = binary.AppendUvarint(buf, uint64(len(b)))
		buf = append(buf, b...)
	}
	return buf
}

// appendNested appends the content of a map (its size, then each key and value, keys sorted) or
// a slice (its length, then each value).
func appendNested(buf []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeMap:
		m := v.Map()
		keys := sortedKeys(make([]string, 0, m.Len()), m)
		buf = binary.AppendUvarint(buf, uint64(len(keys)))
		for _, k := range keys {
			item, _ := m.Get(k)
			buf = appendString(buf, k)
			buf = appendValue(buf, item)
		}
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		buf = binary.AppendUvarint(buf, uint64(s.Len()))
		for i := 0; i < s.Len(); i++ {
			buf = appendValue(buf, s.At(i))
		}
	}
	return buf
}

// appendValue is appendScalar inside a nested value: the same encoding, in the nested buffer.
func appendValue(buf []byte, v pcommon.Value) []byte {
	if t := v.Type(); t == pcommon.ValueTypeMap || t == pcommon.ValueTypeSlice {
		return appendNested(append(buf, byte(t)), v)
	}
	return appendScalar(buf, v)
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}
