package svcscoreconnector

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/pkg/svcattr"
)

// Event and attribute names of the OpenTelemetry GenAI semantic conventions' evaluation event.
const (
	genAIEvaluationEvent       = "gen_ai.evaluation.result"
	genAIEvaluationName        = "gen_ai.evaluation.name"
	genAIEvaluationScoreValue  = "gen_ai.evaluation.score.value"
	genAIEvaluationScoreLabel  = "gen_ai.evaluation.score.label"
	genAIEvaluationExplanation = "gen_ai.evaluation.explanation"
	// Carried into the score's metadata under their own names: which response was evaluated, and
	// why the evaluation failed.
	genAIResponseID = "gen_ai.response.id"
	errorType       = "error.type"
)

// eventNameAttr carries the event name of log records from SDKs older than LogRecord.EventName.
const eventNameAttr = "event.name"

// metadataLabelKey is the metadata key of a gen_ai.evaluation.result label when the event also
// has a numeric value (the value wins: it is the score; the label is kept beside it).
const metadataLabelKey = "label"

// eventKind is the kind of a scoring event.
type eventKind int

const (
	kindSvcScore eventKind = iota
	kindGenAIEvaluation
	numEventKinds
)

func (k eventKind) String() string {
	if k == kindGenAIEvaluation {
		return genAIEvaluationEvent
	}
	return scorerecord.EventName
}

// scoringEventKind tells whether an event of this name makes a score.
func scoringEventKind(name string) (eventKind, bool) {
	switch name {
	case scorerecord.EventName:
		return kindSvcScore, true
	case genAIEvaluationEvent:
		return kindGenAIEvaluation, true
	}
	return 0, false
}

// scoringEvent is one event that makes a score, with what it is attached to.
type scoringEvent struct {
	kind    eventKind
	attrs   pcommon.Map
	traceID pcommon.TraceID
	spanID  pcommon.SpanID
	// time is the event's own time; 0 when it has none.
	time pcommon.Timestamp
	// observed is when the producer observed a log record (its ObservedTimestamp), kept on the
	// score record; 0 for span events, whose records are observed when queued here.
	observed pcommon.Timestamp
	// index is the event's position in its span (or the record's in its scope), part of the id.
	index int
	// environment is the svc.environment of the span or resource, used when the event has none.
	environment string
}

// errInvalidTarget reports a svc.score.target that is neither observation nor trace.
var errInvalidTarget = fmt.Errorf("%s must be %q or %q", scorerecord.AttrTarget, scorerecord.TargetObservation, scorerecord.TargetTrace)

// toScore maps a scoring event onto a score. queuedAt is the timestamp of a score whose event
// has no time. The score's name and value are not validated here: the svc exporter validates
// every score at one place (SPEC.md 7.2), so a score without a name or value goes on and is
// logged and dropped there. Only what the connector alone can judge fails here: the target.
func toScore(ev scoringEvent, queuedAt pcommon.Timestamp) (scorerecord.Score, error) {
	s := scorerecord.Score{
		TraceID:       ev.traceID,
		ObservationID: ev.spanID,
		Timestamp:     ev.time,
	}
	if s.Timestamp == 0 {
		s.Timestamp = queuedAt
	}
	var target, label string
	var hasLabel bool
	ev.attrs.Range(func(k string, v pcommon.Value) bool {
		switch k {
		case scorerecord.AttrID:
			s.ID = v.AsString()
		case scorerecord.AttrDataType:
			s.DataType = strings.ToUpper(v.AsString())
		case scorerecord.AttrConfigID:
			s.ConfigID = v.AsString()
		case scorerecord.AttrEnvironment:
			s.Environment = v.AsString()
		case scorerecord.AttrSessionID:
			s.SessionID = v.AsString()
		case scorerecord.AttrDatasetRunID:
			s.DatasetRunID = v.AsString()
		case scorerecord.AttrTarget:
			target = v.AsString()
		case scorerecord.AttrMetadata:
			if v.Type() == pcommon.ValueTypeMap {
				v.Map().Range(func(mk string, mv pcommon.Value) bool {
					mv.CopyTo(scoreMetadata(&s).PutEmpty(mk))
					return true
				})
			}
		default:
			if key, ok := strings.CutPrefix(k, scorerecord.AttrMetadataPrefix); ok && key != "" {
				v.CopyTo(scoreMetadata(&s).PutEmpty(key))
				return true
			}
			if ev.kind == kindSvcScore {
				switch k {
				case scorerecord.AttrName:
					s.Name = v.AsString()
				case scorerecord.AttrValue:
					s.Value = v
				case scorerecord.AttrComment:
					s.Comment = v.AsString()
				}
				return true
			}
			switch k {
			case genAIEvaluationName:
				s.Name = v.AsString()
			case genAIEvaluationScoreValue:
				s.Value = v
			case genAIEvaluationScoreLabel:
				label, hasLabel = v.AsString(), true
			case genAIEvaluationExplanation:
				s.Comment = v.AsString()
			case genAIResponseID, errorType:
				v.CopyTo(scoreMetadata(&s).PutEmpty(k))
			}
		}
		return true
	})

	switch target {
	case "", scorerecord.TargetObservation:
	case scorerecord.TargetTrace:
		s.ObservationID = pcommon.SpanID{}
	default:
		return s, fmt.Errorf("score %q: %w, got %q", s.Name, errInvalidTarget, target)
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
			s.DataType = scorerecord.DataTypeBoolean
		}
	}
	switch {
	case hasLabel && hasValue:
		// gen_ai.evaluation.result with both: the number is the score, the label rides along.
		scoreMetadata(&s).PutStr(metadataLabelKey, label)
	case hasLabel:
		// A label without a value is a categorical score (DESIGN.md 2.4).
		s.Value = pcommon.NewValueStr(label)
		if s.DataType == "" {
			s.DataType = scorerecord.DataTypeCategorical
		}
	}

	if s.Environment == "" {
		s.Environment = ev.environment
	}
	if s.ID == "" {
		s.ID = scorerecord.EventID(ev.traceID, ev.spanID, ev.kind.String(), ev.time, ev.index, s.Name)
	}
	return s, nil
}

// scoreMetadata returns the score's metadata map, creating it on first use.
func scoreMetadata(s *scorerecord.Score) pcommon.Map {
	if s.Metadata == (pcommon.Map{}) {
		s.Metadata = pcommon.NewMap()
	}
	return s.Metadata
}

// environmentOf is the svc.environment attribute of a span or resource, "" when absent.
func environmentOf(attrs pcommon.Map) string {
	if v, ok := attrs.Get(svcattr.Environment); ok {
		return v.AsString()
	}
	return ""
}
