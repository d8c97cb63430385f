package scorerecord

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

var (
	traceID = pcommon.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}
	spanID  = pcommon.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31}
)

const scoreTime = pcommon.Timestamp(1_700_000_000_123_456_789) // 2023-11-14T22:13:20.123456789Z

func metadataOf(t *testing.T, raw map[string]any) pcommon.Map {
	t.Helper()
	m := pcommon.NewMap()
	if err := m.FromRaw(raw); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWriteReadRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		score Score
		want  Request
	}{
		{
			name: "observation-level numeric score with every field",
			score: Score{
				ID: "score-1", TraceID: traceID, ObservationID: spanID, Name: "helpfulness",
				Value: pcommon.NewValueDouble(0.9), DataType: DataTypeNumeric, Comment: "clear answer",
				ConfigID: "cfg-7", Environment: "production",
				Metadata:  metadataOf(t, map[string]any{"judge": "gpt-x", "rounds": int64(2), "tags": []any{"a", "b"}}),
				Timestamp: scoreTime,
			},
			want: Request{
				ID: "score-1", TraceID: "0af7651916cd43dd8448eb211c80319c", ObservationID: "b7ad6b7169203331",
				Name: "helpfulness", Value: 0.9, DataType: "NUMERIC", Comment: "clear answer", ConfigID: "cfg-7",
				Environment: "production", Metadata: map[string]any{"judge": "gpt-x", "rounds": int64(2), "tags": []any{"a", "b"}},
				Timestamp: "2023-11-14T22:13:20.123456789Z",
			},
		},
		{
			name:  "trace-level categorical score: no observation id, data type inferred from the string",
			score: Score{ID: "s2", TraceID: traceID, Name: "user_feedback", Value: pcommon.NewValueStr("thumbs_up"), Timestamp: scoreTime},
			want: Request{
				ID: "s2", TraceID: "0af7651916cd43dd8448eb211c80319c", Name: "user_feedback", Value: "thumbs_up",
				DataType: "CATEGORICAL", Timestamp: "2023-11-14T22:13:20.123456789Z",
			},
		},
		{
			name:  "run-level score: neither trace nor observation; an int value becomes a number",
			score: Score{ID: "s3", Name: "accuracy", Value: pcommon.NewValueInt(3), Timestamp: scoreTime},
			want:  Request{ID: "s3", Name: "accuracy", Value: 3.0, DataType: "NUMERIC", Timestamp: "2023-11-14T22:13:20.123456789Z"},
		},
		{
			name:  "run-level score of an experiment run, and a session score",
			score: Score{ID: "s7", Name: "run_accuracy", Value: pcommon.NewValueDouble(0.93), DatasetRunID: "run-7", SessionID: "session-1", Timestamp: scoreTime},
			want: Request{ID: "s7", Name: "run_accuracy", Value: 0.93, DataType: "NUMERIC", DatasetRunID: "run-7", SessionID: "session-1",
				Timestamp: "2023-11-14T22:13:20.123456789Z"},
		},
		{
			name:  "boolean data type with its 0/1 value",
			score: Score{ID: "s4", Name: "is_correct", Value: pcommon.NewValueDouble(1), DataType: DataTypeBoolean, Timestamp: scoreTime},
			want:  Request{ID: "s4", Name: "is_correct", Value: 1.0, DataType: "BOOLEAN", Timestamp: "2023-11-14T22:13:20.123456789Z"},
		},
		{
			name:  "no value (the zero Value) reads as missing",
			score: Score{ID: "s5", Name: "relevance", Timestamp: scoreTime},
			want:  Request{ID: "s5", Name: "relevance", Timestamp: "2023-11-14T22:13:20.123456789Z"},
		},
		{
			name:  "no timestamp: none in the request",
			score: Score{ID: "s6", Name: "n", Value: pcommon.NewValueStr("x")},
			want:  Request{ID: "s6", Name: "n", Value: "x", DataType: "CATEGORICAL"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr := plog.NewLogRecord()
			Write(lr, tt.score)
			if lr.EventName() != EventName {
				t.Errorf("event name %q, want %q", lr.EventName(), EventName)
			}
			got := Read(lr)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Read(Write(score)):\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestWriteLeavesEmptyFieldsOut(t *testing.T) {
	lr := plog.NewLogRecord()
	Write(lr, Score{ID: "s", Name: "n", Value: pcommon.NewValueDouble(1)})
	var keys []string
	lr.Attributes().Range(func(k string, _ pcommon.Value) bool {
		keys = append(keys, k)
		return true
	})
	want := []string{AttrID, AttrName, AttrValue}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("attributes %v, want %v", keys, want)
	}
}

func TestReadFallsBackToObservedTimestamp(t *testing.T) {
	lr := plog.NewLogRecord()
	Write(lr, Score{ID: "s", Name: "n", Value: pcommon.NewValueDouble(1)})
	lr.SetObservedTimestamp(scoreTime)
	if got := Read(lr).Timestamp; got != "2023-11-14T22:13:20.123456789Z" {
		t.Errorf("timestamp %q", got)
	}
	lr.SetTimestamp(scoreTime + 1e9)
	if got := Read(lr).Timestamp; got != "2023-11-14T22:13:21.123456789Z" {
		t.Errorf("timestamp %q: the record's own time must win", got)
	}
}

func TestRequestJSONIsCreateScoreRequest(t *testing.T) {
	lr := plog.NewLogRecord()
	Write(lr, Score{
		ID: "s1", TraceID: traceID, ObservationID: spanID, Name: "relevance", Value: pcommon.NewValueDouble(0.5),
		Comment: "ok", Metadata: metadataOf(t, map[string]any{"label": "relevant"}), Timestamp: scoreTime,
	})
	raw, err := json.Marshal(Read(lr))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"s1","traceId":"0af7651916cd43dd8448eb211c80319c","observationId":"b7ad6b7169203331",` +
		`"name":"relevance","value":0.5,"dataType":"NUMERIC","comment":"ok","metadata":{"label":"relevant"},` +
		`"timestamp":"2023-11-14T22:13:20.123456789Z"}`
	if string(raw) != want {
		t.Errorf("JSON\n got %s\nwant %s", raw, want)
	}

	run := plog.NewLogRecord()
	Write(run, Score{ID: "s2", Name: "run_accuracy", Value: pcommon.NewValueStr("A"), DatasetRunID: "run-7", SessionID: "session-1"})
	raw, err = json.Marshal(Read(run))
	if err != nil {
		t.Fatal(err)
	}
	want = `{"id":"s2","sessionId":"session-1","datasetRunId":"run-7","name":"run_accuracy","value":"A","dataType":"CATEGORICAL"}`
	if string(raw) != want {
		t.Errorf("JSON\n got %s\nwant %s", raw, want)
	}
}

func TestValidate(t *testing.T) {
	valueOf := func(v pcommon.Value) any {
		lr := plog.NewLogRecord()
		Write(lr, Score{Name: "n", Value: v})
		return Read(lr).Value
	}
	list := pcommon.NewValueSlice()
	list.Slice().AppendEmpty().SetInt(1)
	tests := []struct {
		name string
		req  Request
		want error // nil: valid
	}{
		{"number", Request{Name: "n", Value: 0.5}, nil},
		{"zero", Request{Name: "n", Value: 0.0}, nil},
		{"negative", Request{Name: "n", Value: -3.0}, nil},
		{"string", Request{Name: "n", Value: "good"}, nil},
		{"empty string value", Request{Name: "n", Value: ""}, nil},
		{"empty name", Request{Name: "", Value: 1.0}, ErrEmptyName},
		{"empty name and bad value reports the name", Request{Value: math.NaN()}, ErrEmptyName},
		{"NaN", Request{Name: "n", Value: math.NaN()}, ErrNonFiniteValue},
		{"+Inf", Request{Name: "n", Value: math.Inf(1)}, ErrNonFiniteValue},
		{"-Inf", Request{Name: "n", Value: math.Inf(-1)}, ErrNonFiniteValue},
		{"missing value", Request{Name: "n"}, ErrInvalidValue},
		{"bool attribute is a BOOLEAN score", Request{Name: "n", Value: valueOf(pcommon.NewValueBool(true))}, nil},
		{"bytes attribute", Request{Name: "n", Value: valueOf(pcommon.NewValueBytes())}, ErrInvalidValue},
		{"list attribute", Request{Name: "n", Value: valueOf(list)}, ErrInvalidValue},
		{"map attribute", Request{Name: "n", Value: valueOf(pcommon.NewValueMap())}, ErrInvalidValue},
		{"int attribute", Request{Name: "n", Value: valueOf(pcommon.NewValueInt(7))}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("Validate() = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestValidateNamesTheBadType(t *testing.T) {
	lr := plog.NewLogRecord()
	Write(lr, Score{Name: "n", Value: pcommon.NewValueBytes()})
	err := Read(lr).Validate()
	if err == nil || !strings.Contains(err.Error(), "Bytes") {
		t.Errorf("Validate() = %v, want an error naming the Bytes type", err)
	}
}

var uuidV8 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestDeterministicID(t *testing.T) {
	// Fixed values: ids already sent to the platform must never change with a new release.
	stable := []struct {
		parts []string
		want  string
	}{
		{nil, "e3b0c442-98fc-8c14-9afb-f4c8996fb924"},
		{[]string{"a", "b"}, "8fb20ef6-3ced-8145-bc2e-983ffe597d1d"},
		{[]string{"ab", ""}, "de82794c-205e-8b98-8ea0-53270405e257"},
		{[]string{"0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "svc.score", "1700000000000000000", "0", "helpfulness"}, "90aa2cc4-abb9-8188-80a2-73bf36f778ec"},
	}
	for _, tt := range stable {
		if got := DeterministicID(tt.parts...); got != tt.want {
			t.Errorf("DeterministicID(%q) = %s, want %s", tt.parts, got, tt.want)
		}
	}

	long := strings.Repeat("x", 1000) // beyond the stack buffer
	inputs := [][]string{
		{"a", "b"}, {"ab"}, {"ab", ""}, {"a", "b", ""}, {"b", "a"}, {""}, {}, {long}, {long, "y"},
	}
	seen := map[string][]string{}
	for _, parts := range inputs {
		id := DeterministicID(parts...)
		if !uuidV8.MatchString(id) {
			t.Errorf("DeterministicID(%q) = %s: not a version 8 UUID", parts, id)
		}
		if id != DeterministicID(parts...) {
			t.Errorf("DeterministicID(%q) is not stable", parts)
		}
		if prev, dup := seen[id]; dup {
			t.Errorf("DeterministicID(%q) = DeterministicID(%q) = %s: part boundaries must count", parts, prev, id)
		}
		seen[id] = parts
	}
}

func TestEventID(t *testing.T) {
	tests := []struct {
		name      string
		traceID   pcommon.TraceID
		spanID    pcommon.SpanID
		eventTime pcommon.Timestamp
		index     int
		wantParts []string
	}{
		{"span event", traceID, spanID, 1_700_000_000_000_000_000, 0,
			[]string{"0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "svc.score", "1700000000000000000", "0", "helpfulness"}},
		{"no span", traceID, pcommon.SpanID{}, 5, 12,
			[]string{"0af7651916cd43dd8448eb211c80319c", "", "svc.score", "5", "12", "helpfulness"}},
		{"run level without time", pcommon.TraceID{}, pcommon.SpanID{}, 0, 3,
			[]string{"", "", "svc.score", "0", "3", "helpfulness"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EventID(tt.traceID, tt.spanID, EventName, tt.eventTime, tt.index, "helpfulness")
			if want := DeterministicID(tt.wantParts...); got != want {
				t.Errorf("EventID = %s, want DeterministicID(%q) = %s", got, tt.wantParts, want)
			}
		})
	}
	// The first case is the fixed value of TestDeterministicID: the composition is stable too.
	if got := EventID(traceID, spanID, EventName, 1_700_000_000_000_000_000, 0, "helpfulness"); got != "90aa2cc4-abb9-8188-80a2-73bf36f778ec" {
		t.Errorf("EventID changed: %s", got)
	}
}

func BenchmarkEventID(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = EventID(traceID, spanID, EventName, scoreTime, i&7, "helpfulness")
	}
}

// TestReadTraceTarget: a record sent straight to the exporter with svc.score.target=trace is a
// trace-level score even when it carries the span id of the span it was emitted under.
func TestReadTraceTarget(t *testing.T) {
	tests := []struct {
		target          string
		wantObservation string
	}{
		{target: "", wantObservation: spanID.String()},
		{target: TargetObservation, wantObservation: spanID.String()},
		{target: TargetTrace, wantObservation: ""},
	}
	for _, tt := range tests {
		lr := plog.NewLogRecord()
		Write(lr, Score{ID: "s", TraceID: traceID, ObservationID: spanID, Name: "n", Value: pcommon.NewValueDouble(1)})
		if tt.target != "" {
			lr.Attributes().PutStr(AttrTarget, tt.target)
		}
		req := Read(lr)
		if req.ObservationID != tt.wantObservation || req.TraceID != traceID.String() {
			t.Errorf("target %q: traceId %q observationId %q, want %q %q", tt.target, req.TraceID, req.ObservationID, traceID.String(), tt.wantObservation)
		}
	}
}

// TestContentID: a record without an id gets the same id each time it is read (so a resend
// replaces it), and a different one when anything it says differs.
func TestContentID(t *testing.T) {
	base := Request{TraceID: traceID.String(), ObservationID: spanID.String(), Name: "relevance", Value: 0.5,
		Timestamp: "2023-11-14T22:13:20.123456789Z"}
	if again := base; base.ContentID() != again.ContentID() {
		t.Fatal("ContentID is not stable")
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(base.ContentID()) {
		t.Errorf("ContentID %q is not in the UUID layout", base.ContentID())
	}
	for name, change := range map[string]func(*Request){
		"value":     func(r *Request) { r.Value = 0.6 },
		"name":      func(r *Request) { r.Name = "tone" },
		"timestamp": func(r *Request) { r.Timestamp = "2023-11-14T22:13:21Z" },
		"trace":     func(r *Request) { r.TraceID = "" },
		"target":    func(r *Request) { r.ObservationID = "" },
	} {
		other := base
		change(&other)
		if other.ContentID() == base.ContentID() {
			t.Errorf("changing the %s keeps the id", name)
		}
	}
}
