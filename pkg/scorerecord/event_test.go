package scorerecord

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
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
func requestOf(s Score) Request {
	lr := plog.NewLogRecord()
	Write(lr, s)
	return Read(lr)
}

func TestToScore(t *testing.T) {
	tests := []struct {
		name  string
		kind  EventKind
		attrs map[string]any
		// environment is the span's (or resource's) svc.environment.
		environment string
		noTime      bool
		noTrace     bool    // a log record without trace and span ids
		want        Request // ID empty: the derived EventID is expected
		wantErr     error
	}{
		{
			name: "svc.score with every field",
			kind: KindSvcScore,
			attrs: map[string]any{
				AttrName:                      "helpfulness",
				AttrValue:                     0.9,
				AttrDataType:                  "NUMERIC",
				AttrComment:                   "clear answer",
				AttrID:                        "score-1",
				AttrConfigID:                  "cfg-7",
				AttrEnvironment:               "staging",
				AttrMetadataPrefix + "judge":  "gpt-x",
				AttrMetadataPrefix + "rounds": int64(2),
			},
			environment: "production",
			want: Request{
				ID: "score-1", Name: "helpfulness", Value: 0.9, DataType: "NUMERIC", Comment: "clear answer",
				ConfigID: "cfg-7", Environment: "staging", Metadata: map[string]any{"judge": "gpt-x", "rounds": int64(2)},
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:        "svc.score without id or environment takes the derived id and the span's environment",
			kind:        KindSvcScore,
			attrs:       map[string]any{AttrName: "accuracy", AttrValue: int64(1)},
			environment: "production",
			want: Request{
				Name: "accuracy", Value: 1.0, DataType: "NUMERIC", Environment: "production",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:    "run-level svc.score names its experiment run",
			kind:    KindSvcScore,
			attrs:   map[string]any{AttrName: "run_accuracy", AttrValue: 0.93, AttrDatasetRunID: "run-7", AttrSessionID: "session-1"},
			noTrace: true,
			want:    Request{Name: "run_accuracy", Value: 0.93, DataType: "NUMERIC", DatasetRunID: "run-7", SessionID: "session-1"},
		},
		{
			name:  "svc.score aimed at the trace is a trace-level score",
			kind:  KindSvcScore,
			attrs: map[string]any{AttrName: "user_feedback", AttrValue: "thumbs_up", AttrTarget: "trace"},
			want: Request{
				Name: "user_feedback", Value: "thumbs_up", DataType: "CATEGORICAL",
				TraceID: "0af7651916cd43dd8448eb211c80319c",
			},
		},
		{
			name:  "svc.score aimed at the observation explicitly",
			kind:  KindSvcScore,
			attrs: map[string]any{AttrName: "accuracy", AttrValue: 0.5, AttrTarget: "observation"},
			want: Request{
				Name: "accuracy", Value: 0.5, DataType: "NUMERIC",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:    "svc.score with an unknown target is refused",
			kind:    KindSvcScore,
			attrs:   map[string]any{AttrName: "accuracy", AttrValue: 0.5, AttrTarget: "session"},
			wantErr: ErrInvalidTarget,
		},
		{
			name:  "bool value is a BOOLEAN score of 1 or 0",
			kind:  KindSvcScore,
			attrs: map[string]any{AttrName: "is_correct", AttrValue: false},
			want: Request{
				Name: "is_correct", Value: 0.0, DataType: "BOOLEAN",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:  "data type is upper-cased",
			kind:  KindSvcScore,
			attrs: map[string]any{AttrName: "tone", AttrValue: "friendly", AttrDataType: "categorical"},
			want: Request{
				Name: "tone", Value: "friendly", DataType: "CATEGORICAL",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name: "metadata as one map attribute",
			kind: KindSvcScore,
			attrs: map[string]any{
				AttrName: "accuracy", AttrValue: 0.5,
				"svc.score.metadata": map[string]any{"judge": "human", "batch": int64(3)},
			},
			want: Request{
				Name: "accuracy", Value: 0.5, DataType: "NUMERIC", Metadata: map[string]any{"judge": "human", "batch": int64(3)},
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name: "gen_ai.evaluation.result with a value, a label and an explanation",
			kind: KindGenAIEvaluation,
			attrs: map[string]any{
				GenAIEvaluationName: "relevance", GenAIEvaluationScoreValue: 0.75, GenAIEvaluationScoreLabel: "relevant",
				GenAIEvaluationExplanation: "mentions the product", GenAIResponseID: "chatcmpl-1",
			},
			environment: "production",
			want: Request{
				Name: "relevance", Value: 0.75, DataType: "NUMERIC", Comment: "mentions the product", Environment: "production",
				Metadata: map[string]any{"label": "relevant", "gen_ai.response.id": "chatcmpl-1"},
				TraceID:  "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:  "gen_ai.evaluation.result with a label and no value is categorical",
			kind:  KindGenAIEvaluation,
			attrs: map[string]any{GenAIEvaluationName: "toxicity", GenAIEvaluationScoreLabel: "none"},
			want: Request{
				Name: "toxicity", Value: "none", DataType: "CATEGORICAL",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:  "gen_ai.evaluation.result with a bool value and a label",
			kind:  KindGenAIEvaluation,
			attrs: map[string]any{GenAIEvaluationName: "grounded", GenAIEvaluationScoreValue: true, GenAIEvaluationScoreLabel: "grounded"},
			want: Request{
				Name: "grounded", Value: 1.0, DataType: "BOOLEAN", Metadata: map[string]any{"label": "grounded"},
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:  "gen_ai.evaluation.result with svc.score extras: id, target, config, metadata",
			kind:  KindGenAIEvaluation,
			attrs: map[string]any{GenAIEvaluationName: "coherence", GenAIEvaluationScoreValue: int64(4), AttrID: "eval-9", AttrTarget: "trace", AttrConfigID: "cfg-1", AttrMetadataPrefix + "model": "judge-1"},
			want: Request{
				ID: "eval-9", Name: "coherence", Value: 4.0, DataType: "NUMERIC", ConfigID: "cfg-1",
				Metadata: map[string]any{"model": "judge-1"},
				TraceID:  "0af7651916cd43dd8448eb211c80319c",
			},
		},
		{
			name:  "gen_ai.evaluation.result ignores svc.score.name and svc.score.value",
			kind:  KindGenAIEvaluation,
			attrs: map[string]any{GenAIEvaluationName: "coherence", GenAIEvaluationScoreValue: 0.4, AttrName: "other", AttrValue: 0.1},
			want: Request{
				Name: "coherence", Value: 0.4, DataType: "NUMERIC",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:  "svc.score ignores gen_ai attributes",
			kind:  KindSvcScore,
			attrs: map[string]any{AttrName: "accuracy", AttrValue: 0.5, GenAIEvaluationName: "other", GenAIEvaluationScoreLabel: "x"},
			want: Request{
				Name: "accuracy", Value: 0.5, DataType: "NUMERIC",
				TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
			},
		},
		{
			name:   "an event without time is stamped with the time it was queued",
			kind:   KindSvcScore,
			attrs:  map[string]any{AttrName: "accuracy", AttrValue: 0.5},
			noTime: true,
			want: Request{
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
			ev := Event{Kind: tt.kind, Attrs: attrs, TraceID: testTraceID, SpanID: testSpanID, Time: eventTime, SpanIndex: 3, Environment: tt.environment}
			if tt.noTime {
				ev.Time = 0
			}
			if tt.noTrace {
				ev.TraceID, ev.SpanID = pcommon.TraceID{}, pcommon.SpanID{}
			}
			score, err := ev.Score(queuedAt)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			want := tt.want
			if want.ID == "" {
				want.ID = EventID(ev.TraceID, ev.SpanID, tt.kind.String(), ev.Time, 3, want.Name)
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
// invalid scores are logged and dropped (docs/contract.md §10), and it will refuse this one.
func TestToScoreLeavesValidationToTheExporter(t *testing.T) {
	tests := []struct {
		name  string
		kind  EventKind
		attrs map[string]any
		want  error
	}{
		{name: "gen_ai evaluation without value or label", kind: KindGenAIEvaluation, attrs: map[string]any{GenAIEvaluationName: "relevance", ErrorType: "timeout"}, want: ErrInvalidValue},
		{name: "svc.score without a name", kind: KindSvcScore, attrs: map[string]any{AttrValue: 1.0}, want: ErrEmptyName},
		{name: "svc.score with a list value", kind: KindSvcScore, attrs: map[string]any{AttrName: "x", AttrValue: []any{1, 2}}, want: ErrInvalidValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attrs := pcommon.NewMap()
			require.NoError(t, attrs.FromRaw(tt.attrs))
			score, err := Event{Kind: tt.kind, Attrs: attrs, TraceID: testTraceID, SpanID: testSpanID, Time: eventTime}.Score(queuedAt)
			require.NoError(t, err)
			assert.ErrorIs(t, requestOf(score).Validate(), tt.want)
		})
	}
}

func TestEventIDsDifferPerEvent(t *testing.T) {
	base := Event{Kind: KindSvcScore, TraceID: testTraceID, SpanID: testSpanID, Time: eventTime, SpanIndex: 0}
	idOf := func(ev Event, name string) string {
		ev.Attrs = pcommon.NewMap()
		ev.Attrs.PutStr(AttrName, name)
		ev.Attrs.PutDouble(AttrValue, 1)
		s, err := ev.Score(queuedAt)
		require.NoError(t, err)
		return s.ID
	}
	first := idOf(base, "accuracy")
	assert.Equal(t, first, idOf(base, "accuracy"), "the same event must yield the same id")

	variants := map[string]func() string{
		"other index": func() string { ev := base; ev.SpanIndex = 1; return idOf(ev, "accuracy") },
		"other name":  func() string { return idOf(base, "relevance") },
		"other time":  func() string { ev := base; ev.Time++; return idOf(ev, "accuracy") },
		"other span":  func() string { ev := base; ev.SpanID[7]++; return idOf(ev, "accuracy") },
		"other trace": func() string { ev := base; ev.TraceID[15]++; return idOf(ev, "accuracy") },
		"other kind":  func() string { ev := base; ev.Kind = KindGenAIEvaluation; return idOfGenAI(t, ev, "accuracy") },
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

func idOfGenAI(t *testing.T, ev Event, name string) string {
	ev.Attrs = pcommon.NewMap()
	ev.Attrs.PutStr(GenAIEvaluationName, name)
	ev.Attrs.PutDouble(GenAIEvaluationScoreValue, 1)
	s, err := ev.Score(queuedAt)
	require.NoError(t, err)
	return s.ID
}

func TestScoringEventKind(t *testing.T) {
	tests := []struct {
		name   string
		want   EventKind
		wantOK bool
	}{
		{"svc.score", KindSvcScore, true},
		{"gen_ai.evaluation.result", KindGenAIEvaluation, true},
		{"gen_ai.evaluation", 0, false},
		{"svc.score.extra", 0, false},
		{"exception", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		kind, ok := KindOf(tt.name)
		assert.Equal(t, tt.wantOK, ok, tt.name)
		if ok {
			assert.Equal(t, tt.want, kind, tt.name)
			assert.Equal(t, tt.name, kind.String())
		}
	}
}

func TestRecordID(t *testing.T) {
	base := func() (pcommon.TraceID, pcommon.SpanID, string, pcommon.Timestamp, pcommon.Map) {
		attrs := pcommon.NewMap()
		attrs.PutStr(AttrName, "accuracy")
		attrs.PutDouble(AttrValue, 1)
		attrs.PutStr(AttrMetadataPrefix+"judge", "human")
		attrs.PutEmptyMap(AttrMetadata).PutInt("round", 2)
		return testTraceID, testSpanID, EventName, eventTime, attrs
	}
	first := RecordID(base())

	t.Run("the same content in another attribute order", func(t *testing.T) {
		attrs := pcommon.NewMap()
		attrs.PutEmptyMap(AttrMetadata).PutInt("round", 2)
		attrs.PutStr(AttrMetadataPrefix+"judge", "human")
		attrs.PutDouble(AttrValue, 1)
		attrs.PutStr(AttrName, "accuracy")
		assert.Equal(t, first, RecordID(testTraceID, testSpanID, EventName, eventTime, attrs))
	})

	variants := []struct {
		name   string
		change func(*pcommon.TraceID, *pcommon.SpanID, *string, *pcommon.Timestamp, pcommon.Map)
	}{
		{"other trace", func(tid *pcommon.TraceID, _ *pcommon.SpanID, _ *string, _ *pcommon.Timestamp, _ pcommon.Map) {
			tid[15]++
		}},
		{"no trace", func(tid *pcommon.TraceID, _ *pcommon.SpanID, _ *string, _ *pcommon.Timestamp, _ pcommon.Map) {
			*tid = pcommon.TraceID{}
		}},
		{"other span", func(_ *pcommon.TraceID, sid *pcommon.SpanID, _ *string, _ *pcommon.Timestamp, _ pcommon.Map) {
			sid[7]++
		}},
		{"no span", func(_ *pcommon.TraceID, sid *pcommon.SpanID, _ *string, _ *pcommon.Timestamp, _ pcommon.Map) {
			*sid = pcommon.SpanID{}
		}},
		{"other event", func(_ *pcommon.TraceID, _ *pcommon.SpanID, n *string, _ *pcommon.Timestamp, _ pcommon.Map) {
			*n = GenAIEvaluationEvent
		}},
		{"other time", func(_ *pcommon.TraceID, _ *pcommon.SpanID, _ *string, ts *pcommon.Timestamp, _ pcommon.Map) { *ts++ }},
		{"other name", func(_ *pcommon.TraceID, _ *pcommon.SpanID, _ *string, _ *pcommon.Timestamp, m pcommon.Map) {
			m.PutStr(AttrName, "relevance")
		}},
		{"other value", func(_ *pcommon.TraceID, _ *pcommon.SpanID, _ *string, _ *pcommon.Timestamp, m pcommon.Map) {
			m.PutDouble(AttrValue, 0.5)
		}},
		{"value of another type", func(_ *pcommon.TraceID, _ *pcommon.SpanID, _ *string, _ *pcommon.Timestamp, m pcommon.Map) {
			m.PutInt(AttrValue, 1)
		}},
		{"value as text", func(_ *pcommon.TraceID, _ *pcommon.SpanID, _ *string, _ *pcommon.Timestamp, m pcommon.Map) {
			m.PutStr(AttrValue, "1")
		}},
		{"other metadata", func(_ *pcommon.TraceID, _ *pcommon.SpanID, _ *string, _ *pcommon.Timestamp, m pcommon.Map) {
			m.PutStr(AttrMetadataPrefix+"judge", "model")
		}},
		{"other nested metadata", func(_ *pcommon.TraceID, _ *pcommon.SpanID, _ *string, _ *pcommon.Timestamp, m pcommon.Map) {
			v, _ := m.Get(AttrMetadata)
			v.Map().PutInt("round", 3)
		}},
		{"one attribute more", func(_ *pcommon.TraceID, _ *pcommon.SpanID, _ *string, _ *pcommon.Timestamp, m pcommon.Map) {
			m.PutStr(AttrComment, "ok")
		}},
		{"key and value boundary moved", func(_ *pcommon.TraceID, _ *pcommon.SpanID, _ *string, _ *pcommon.Timestamp, m pcommon.Map) {
			m.Remove(AttrMetadataPrefix + "judge")
			m.PutStr(AttrMetadataPrefix+"judg", "ehuman")
		}},
	}
	seen := map[string]string{first: "base"}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			tid, sid, name, ts, attrs := base()
			v.change(&tid, &sid, &name, &ts, attrs)
			got := RecordID(tid, sid, name, ts, attrs)
			if prev, dup := seen[got]; dup {
				t.Errorf("%s yields the same id as %s: %s", v.name, prev, got)
			}
			seen[got] = v.name
		})
	}
}

// A log record's score id comes from its content, never from the place the record had in its
// batch; a span event's keeps its index in the span (and its fixed value).
func TestEventScoreIDOfLogRecordIgnoresPlace(t *testing.T) {
	attrs := pcommon.NewMap()
	attrs.PutStr(AttrName, "helpfulness")
	attrs.PutDouble(AttrValue, 0.9)
	ev := Event{Kind: KindSvcScore, Attrs: attrs, TraceID: testTraceID, SpanID: testSpanID, Time: eventTime, LogRecord: true}
	first, err := ev.Score(queuedAt)
	require.NoError(t, err)
	ev.SpanIndex = 7 // meaningless for a record
	again, err := ev.Score(queuedAt)
	require.NoError(t, err)
	assert.Equal(t, first.ID, again.ID)
	assert.Equal(t, RecordID(testTraceID, testSpanID, EventName, eventTime, attrs), first.ID)

	ev.LogRecord, ev.SpanIndex = false, 0
	spanEvent, err := ev.Score(queuedAt)
	require.NoError(t, err)
	assert.Equal(t, "90aa2cc4-abb9-8188-80a2-73bf36f778ec", spanEvent.ID, "span-event ids stay as they were")
}

func BenchmarkRecordID(b *testing.B) {
	attrs := pcommon.NewMap()
	attrs.PutStr(GenAIEvaluationName, "relevance")
	attrs.PutDouble(GenAIEvaluationScoreValue, 0.75)
	attrs.PutStr(GenAIEvaluationScoreLabel, "relevant")
	attrs.PutStr(GenAIEvaluationExplanation, "mentions the product")
	attrs.PutStr(AttrEnvironment, "production")
	b.ReportAllocs()
	for b.Loop() {
		_ = RecordID(testTraceID, testSpanID, GenAIEvaluationEvent, eventTime, attrs)
	}
}
