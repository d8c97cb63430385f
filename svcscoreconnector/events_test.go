package svcscoreconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/svc/svc-collector/pkg/scorerecord"
)

var (
	testTraceID = pcommon.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}
	testSpanID  = pcommon.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31}
)

const (
	eventTime = pcommon.Timestamp(1_700_000_000_000_000_000)
	queuedAt  = pcommon.Timestamp(1_700_000_100_000_000_000)
)

// requestOf is what the svc exporter will send for a score: the score written as a record and
// read back, the way the record travels.
func requestOf(s scorerecord.Score) scorerecord.Request {
	lr := plog.NewLogRecord()
	scorerecord.Write(lr, s)
	return scorerecord.Read(lr)
}

func TestToScore(t *testing.T) {
	tests := []struct {
		name  string
		kind  eventKind
		attrs map[string]any
		// environment is the span's (or resource's) svc.environment.
		environment string
		noTime      bool
		noTrace     bool                // a log record without trace and span ids
		want        scorerecord.Request // ID empty: the derived EventID is expected
		wantErr     error
	}{
		{
			name: "svc.score with every field",
			kind: kindSvcScore,
			attrs: map[string]any{
				scorerecord.AttrName:                      "helpfulness",
				scorerecord.AttrValue:                     0.9,
				scorerecord.AttrDataType:                  "NUMERIC",
				scorerecord.AttrComment:                   "clear answer",
				scorerecord.AttrID:                        "score-1",
				scorerecord.AttrConfigID:                  "cfg-7",
				scorerecord.AttrEnvironment:               "staging",
				scorerecord.AttrMetadataPrefix + "judge":  "gpt-x",
				scorerecord.AttrMetadataPrefix + "rounds": int64(2),
			},
			environment: "production",
			want: scorerecord.Request{
				ID: "score-1", Name: "helpfulness", Value: 0.9, DataType: "NUMERIC", Comment: "clear answer",
				ConfigID: "cfg-7", Environment: "staging", Metadata: map[string]any{"judge": "gpt-x", "rounds": int64(2)},
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:        "svc.score without id or environment takes the derived id and the span's environment",
			kind:        kindSvcScore,
			attrs:       map[string]any{scorerecord.AttrName: "accuracy", scorerecord.AttrValue: int64(1)},
			environment: "production",
			want: scorerecord.Request{
				Name: "accuracy", Value: 1.0, DataType: "NUMERIC", Environment: "production",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:    "run-level svc.score names its experiment run",
			kind:    kindSvcScore,
			attrs:   map[string]any{scorerecord.AttrName: "run_accuracy", scorerecord.AttrValue: 0.93, scorerecord.AttrDatasetRunID: "run-7", scorerecord.AttrSessionID: "session-1"},
			noTrace: true,
			want:    scorerecord.Request{Name: "run_accuracy", Value: 0.93, DataType: "NUMERIC", DatasetRunID: "run-7", SessionID: "session-1"},
		},
		{
			name:  "svc.score aimed at the trace is a trace-level score",
			kind:  kindSvcScore,
			attrs: map[string]any{scorerecord.AttrName: "user_feedback", scorerecord.AttrValue: "thumbs_up", scorerecord.AttrTarget: "trace"},
			want: scorerecord.Request{
				Name: "user_feedback", Value: "thumbs_up", DataType: "CATEGORICAL",
				TraceID: "0af7651916cd43dd8448eb211c80319c",
			},
		},
		{
			name:  "svc.score aimed at the observation explicitly",
			kind:  kindSvcScore,
			attrs: map[string]any{scorerecord.AttrName: "accuracy", scorerecord.AttrValue: 0.5, scorerecord.AttrTarget: "observation"},
			want: scorerecord.Request{
				Name: "accuracy", Value: 0.5, DataType: "NUMERIC",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:    "svc.score with an unknown target is refused",
			kind:    kindSvcScore,
			attrs:   map[string]any{scorerecord.AttrName: "accuracy", scorerecord.AttrValue: 0.5, scorerecord.AttrTarget: "session"},
			wantErr: errInvalidTarget,
		},
		{
			name:  "bool value is a BOOLEAN score of 1 or 0",
			kind:  kindSvcScore,
			attrs: map[string]any{scorerecord.AttrName: "is_correct", scorerecord.AttrValue: false},
			want: scorerecord.Request{
				Name: "is_correct", Value: 0.0, DataType: "BOOLEAN",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:  "data type is upper-cased",
			kind:  kindSvcScore,
			attrs: map[string]any{scorerecord.AttrName: "tone", scorerecord.AttrValue: "friendly", scorerecord.AttrDataType: "categorical"},
			want: scorerecord.Request{
				Name: "tone", Value: "friendly", DataType: "CATEGORICAL",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name: "metadata as one map attribute",
			kind: kindSvcScore,
			attrs: map[string]any{
				scorerecord.AttrName: "accuracy", scorerecord.AttrValue: 0.5,
				"svc.score.metadata": map[string]any{"judge": "human", "batch": int64(3)},
			},
			want: scorerecord.Request{
				Name: "accuracy", Value: 0.5, DataType: "NUMERIC", Metadata: map[string]any{"judge": "human", "batch": int64(3)},
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name: "gen_ai.evaluation.result with a value, a label and an explanation",
			kind: kindGenAIEvaluation,
			attrs: map[string]any{
				genAIEvaluationName: "relevance", genAIEvaluationScoreValue: 0.75, genAIEvaluationScoreLabel: "relevant",
				genAIEvaluationExplanation: "mentions the product", genAIResponseID: "chatcmpl-1",
			},
			environment: "production",
			want: scorerecord.Request{
				Name: "relevance", Value: 0.75, DataType: "NUMERIC", Comment: "mentions the product", Environment: "production",
				Metadata: map[string]any{"label": "relevant", "gen_ai.response.id": "chatcmpl-1"},
				TraceID:  "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:  "gen_ai.evaluation.result with a label and no value is categorical",
			kind:  kindGenAIEvaluation,
			attrs: map[string]any{genAIEvaluationName: "toxicity", genAIEvaluationScoreLabel: "none"},
			want: scorerecord.Request{
				Name: "toxicity", Value: "none", DataType: "CATEGORICAL",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:  "gen_ai.evaluation.result with a bool value and a label",
			kind:  kindGenAIEvaluation,
			attrs: map[string]any{genAIEvaluationName: "grounded", genAIEvaluationScoreValue: true, genAIEvaluationScoreLabel: "grounded"},
			want: scorerecord.Request{
				Name: "grounded", Value: 1.0, DataType: "BOOLEAN", Metadata: map[string]any{"label": "grounded"},
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:  "gen_ai.evaluation.result with svc.score extras: id, target, config, metadata",
			kind:  kindGenAIEvaluation,
			attrs: map[string]any{genAIEvaluationName: "coherence", genAIEvaluationScoreValue: int64(4), scorerecord.AttrID: "eval-9", scorerecord.AttrTarget: "trace", scorerecord.AttrConfigID: "cfg-1", scorerecord.AttrMetadataPrefix + "model": "judge-1"},
			want: scorerecord.Request{
				ID: "eval-9", Name: "coherence", Value: 4.0, DataType: "NUMERIC", ConfigID: "cfg-1",
				Metadata: map[string]any{"model": "judge-1"},
				TraceID:  "0af7651916cd43dd8448eb211c80319c",
			},
		},
		{
			name:  "gen_ai.evaluation.result ignores svc.score.name and svc.score.value",
			kind:  kindGenAIEvaluation,
			attrs: map[string]any{genAIEvaluationName: "coherence", genAIEvaluationScoreValue: 0.4, scorerecord.AttrName: "other", scorerecord.AttrValue: 0.1},
			want: scorerecord.Request{
				Name: "coherence", Value: 0.4, DataType: "NUMERIC",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:  "svc.score ignores gen_ai attributes",
			kind:  kindSvcScore,
			attrs: map[string]any{scorerecord.AttrName: "accuracy", scorerecord.AttrValue: 0.5, genAIEvaluationName: "other", genAIEvaluationScoreLabel: "x"},
			want: scorerecord.Request{
				Name: "accuracy", Value: 0.5, DataType: "NUMERIC",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:   "an event without time is stamped with the time it was queued",
			kind:   kindSvcScore,
			attrs:  map[string]any{scorerecord.AttrName: "accuracy", scorerecord.AttrValue: 0.5},
			noTime: true,
			want: scorerecord.Request{
				Name: "accuracy", Value: 0.5, DataType: "NUMERIC",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
				Timestamp: "2023-11-14T22:15:00Z",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attrs := pcommon.NewMap()
			require.NoError(t, attrs.FromRaw(tt.attrs))
			ev := scoringEvent{kind: tt.kind, attrs: attrs, traceID: testTraceID, spanID: testSpanID, time: eventTime, index: 3, environment: tt.environment}
			if tt.noTime {
				ev.time = 0
			}
			if tt.noTrace {
				ev.traceID, ev.spanID = pcommon.TraceID{}, pcommon.SpanID{}
			}
			score, err := toScore(ev, queuedAt)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			want := tt.want
			if want.ID == "" {
				want.ID = scorerecord.EventID(ev.traceID, ev.spanID, tt.kind.String(), ev.time, 3, want.Name)
			}
			if want.Timestamp == "" {
				want.Timestamp = "2023-11-14T22:13:20Z"
			}
			got := requestOf(score)
			assert.Equal(t, want, got)
			assert.NoError(t, got.Validate())
		})
	}
}

// An evaluation event without value and label still becomes a record: the exporter is where
// invalid scores are logged and dropped (SPEC.md 7.2), and it will refuse this one.
func TestToScoreLeavesValidationToTheExporter(t *testing.T) {
	tests := []struct {
		name  string
		kind  eventKind
		attrs map[string]any
		want  error
	}{
		{name: "gen_ai evaluation without value or label", kind: kindGenAIEvaluation, attrs: map[string]any{genAIEvaluationName: "relevance", errorType: "timeout"}, want: scorerecord.ErrInvalidValue},
		{name: "svc.score without a name", kind: kindSvcScore, attrs: map[string]any{scorerecord.AttrValue: 1.0}, want: scorerecord.ErrEmptyName},
		{name: "svc.score with a list value", kind: kindSvcScore, attrs: map[string]any{scorerecord.AttrName: "x", scorerecord.AttrValue: []any{1, 2}}, want: scorerecord.ErrInvalidValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attrs := pcommon.NewMap()
			require.NoError(t, attrs.FromRaw(tt.attrs))
			score, err := toScore(scoringEvent{kind: tt.kind, attrs: attrs, traceID: testTraceID, spanID: testSpanID, time: eventTime}, queuedAt)
			require.NoError(t, err)
			assert.ErrorIs(t, requestOf(score).Validate(), tt.want)
		})
	}
}

func TestEventIDsDifferPerEvent(t *testing.T) {
	base := scoringEvent{kind: kindSvcScore, traceID: testTraceID, spanID: testSpanID, time: eventTime, index: 0}
	idOf := func(ev scoringEvent, name string) string {
		ev.attrs = pcommon.NewMap()
		ev.attrs.PutStr(scorerecord.AttrName, name)
		ev.attrs.PutDouble(scorerecord.AttrValue, 1)
		s, err := toScore(ev, queuedAt)
		require.NoError(t, err)
		return s.ID
	}
	first := idOf(base, "accuracy")
	assert.Equal(t, first, idOf(base, "accuracy"), "the same event must yield the same id")

	variants := map[string]func() string{
		"other index": func() string { ev := base; ev.index = 1; return idOf(ev, "accuracy") },
		"other name":  func() string { return idOf(base, "relevance") },
		"other time":  func() string { ev := base; ev.time++; return idOf(ev, "accuracy") },
		"other span":  func() string { ev := base; ev.spanID[7]++; return idOf(ev, "accuracy") },
		"other trace": func() string { ev := base; ev.traceID[15]++; return idOf(ev, "accuracy") },
		"other kind":  func() string { ev := base; ev.kind = kindGenAIEvaluation; return idOfGenAI(t, ev, "accuracy") },
	}
	seen := map[string]string{first: "base"}
	for name, id := range variants {
		got := id()
		if prev, dup := seen[got]; dup {
			t.Errorf("%s yields the same id as %s: %s", name, prev, got)
		}
		seen[got] = name
	}
}

func idOfGenAI(t *testing.T, ev scoringEvent, name string) string {
	ev.attrs = pcommon.NewMap()
	ev.attrs.PutStr(genAIEvaluationName, name)
	ev.attrs.PutDouble(genAIEvaluationScoreValue, 1)
	s, err := toScore(ev, queuedAt)
	require.NoError(t, err)
	return s.ID
}

func TestScoringEventKind(t *testing.T) {
	tests := []struct {
		name   string
		want   eventKind
		wantOK bool
	}{
		{"svc.score", kindSvcScore, true},
		{"gen_ai.evaluation.result", kindGenAIEvaluation, true},
		{"gen_ai.evaluation", 0, false},
		{"svc.score.extra", 0, false},
		{"exception", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		kind, ok := scoringEventKind(tt.name)
		assert.Equal(t, tt.wantOK, ok, tt.name)
		if ok {
			assert.Equal(t, tt.want, kind, tt.name)
			assert.Equal(t, tt.name, kind.String())
		}
	}
}
