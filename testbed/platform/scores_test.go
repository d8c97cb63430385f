package platform

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// scoresJSON is a batch of n valid scores with ids prefix-0, prefix-1, …
func scoresJSON(n int, prefix string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"id":"%s-%d","traceId":"t1","name":"quality","value":%d}`, prefix, i, i)
	}
	return "[" + strings.Join(items, ",") + "]"
}

func TestScoresBatchRules(t *testing.T) {
	p := startPlatform(t)
	tests := []struct {
		name    string
		body    string
		status  int
		message string
	}{
		{"one score", scoresJSON(1, "a"), http.StatusOK, ""},
		{"exactly 100", scoresJSON(100, "b"), http.StatusOK, ""},
		{"101 scores", scoresJSON(101, "c"), http.StatusBadRequest, "exceeds the limit of 100"},
		{"empty array", `[]`, http.StatusBadRequest, "empty batch"},
		{"single object", `{"traceId":"t1","name":"n","value":1}`, http.StatusBadRequest, "JSON array"},
		{"null", `null`, http.StatusBadRequest, "JSON array"},
		{"string", `"scores"`, http.StatusBadRequest, "JSON array"},
		{"malformed", `[{"name":"n",`, http.StatusBadRequest, "malformed JSON"},
		{"trailing garbage", `[{"traceId":"t1","name":"n","value":1}] x`, http.StatusBadRequest, "malformed JSON"},
		{"empty body", ``, http.StatusBadRequest, "malformed JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := sendScores(t, p, tt.body)
			if resp.status != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tt.status, resp.body)
			}
			if msg, _ := resp.jsonBody(t)["message"].(string); tt.message != "" && !strings.Contains(msg, tt.message) {
				t.Errorf("message %q does not mention %q", msg, tt.message)
			}
		})
	}
	if st := p.Stats(); st.UniqueScores != 101 {
		t.Errorf("%d scores stored, want 101 (rejected batches store nothing)", st.UniqueScores)
	}
}

func TestScoresContentRules(t *testing.T) {
	p := startPlatform(t)
	body := []byte(scoresJSON(1, "x"))
	tests := []struct {
		name    string
		headers map[string]string
		body    []byte
		status  int
	}{
		{"json", map[string]string{"Content-Type": "application/json"}, body, http.StatusOK},
		{"json gzip", map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, gzipBytes(t, body), http.StatusOK},
		{"missing content type", map[string]string{}, body, http.StatusUnsupportedMediaType},
		{"form content type", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body, http.StatusUnsupportedMediaType},
		{"unknown encoding", map[string]string{"Content-Type": "application/json", "Content-Encoding": "zstd"}, body, http.StatusUnsupportedMediaType},
		{"bad gzip", map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, body, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if resp := send(t, p, http.MethodPost, PathScores, tt.headers, tt.body); resp.status != tt.status {
				t.Errorf("status %d, want %d: %s", resp.status, tt.status, resp.body)
			}
		})
	}
}

func TestScoreValidation(t *testing.T) {
	tests := []struct {
		name    string
		score   string
		message string // empty: the score is valid
	}{
		{"numeric", `{"traceId":"t","name":"n","value":0.5}`, ""},
		{"categorical", `{"traceId":"t","name":"n","value":"good"}`, ""},
		{"boolean 1", `{"traceId":"t","name":"n","value":1,"dataType":"BOOLEAN"}`, ""},
		{"boolean 0", `{"traceId":"t","name":"n","value":0,"dataType":"BOOLEAN"}`, ""},
		{"every field", `{"id":"s1","traceId":"t","observationId":"o","sessionId":"se","datasetRunId":"r","name":"n","value":2,"dataType":"NUMERIC","comment":"c","configId":"cf","environment":"prod","metadata":{"k":[1]},"timestamp":"2025-03-01T12:00:00.123Z"}`, ""},
		{"null optional fields", `{"traceId":"t","name":"n","value":1,"comment":null,"metadata":null,"dataType":null}`, ""},
		{"session score", `{"sessionId":"se","name":"n","value":1}`, ""},
		{"run score", `{"datasetRunId":"r","name":"n","value":1}`, ""},
		{"timestamp with offset", `{"traceId":"t","name":"n","value":1,"timestamp":"2025-03-01T12:00:00+02:00"}`, ""},
		{"missing name", `{"traceId":"t","value":1}`, "name must be a non-empty string"},
		{"empty name", `{"traceId":"t","name":"","value":1}`, "name must be a non-empty string"},
		{"numeric name", `{"traceId":"t","name":5,"value":1}`, "name must be a string"},
		{"missing value", `{"traceId":"t","name":"n"}`, "value is required"},
		{"null value", `{"traceId":"t","name":"n","value":null}`, "value is required"},
		{"boolean value", `{"traceId":"t","name":"n","value":true}`, "not a boolean"},
		{"object value", `{"traceId":"t","name":"n","value":{"v":1}}`, "not an object"},
		{"array value", `{"traceId":"t","name":"n","value":[1]}`, "not an array"},
		{"overflowing number", `{"traceId":"t","name":"n","value":1e400}`, "not a finite number"},
		{"unknown data type", `{"traceId":"t","name":"n","value":1,"dataType":"numeric"}`, "is not one of"},
		{"numeric with string", `{"traceId":"t","name":"n","value":"1","dataType":"NUMERIC"}`, "NUMERIC needs a numeric value"},
		{"boolean 2", `{"traceId":"t","name":"n","value":2,"dataType":"BOOLEAN"}`, "BOOLEAN needs the value 0 or 1"},
		{"boolean string", `{"traceId":"t","name":"n","value":"true","dataType":"BOOLEAN"}`, "BOOLEAN needs the value 0 or 1"},
		{"categorical number", `{"traceId":"t","name":"n","value":1,"dataType":"CATEGORICAL"}`, "CATEGORICAL needs a string value"},
		{"unknown field", `{"traceId":"t","name":"n","value":1,"source":"API"}`, `unknown field "source"`},
		{"snake case field", `{"trace_id":"t","name":"n","value":1}`, `(fields are camelCase: "traceId")`},
		{"bad timestamp", `{"traceId":"t","name":"n","value":1,"timestamp":"01/03/2025"}`, "not RFC 3339"},
		{"numeric timestamp", `{"traceId":"t","name":"n","value":1,"timestamp":1700000000}`, "timestamp must be a string"},
		{"empty id", `{"id":"","traceId":"t","name":"n","value":1}`, "id must not be empty"},
		{"numeric trace id", `{"traceId":5,"name":"n","value":1}`, "traceId must be a string"},
		{"no target", `{"name":"n","value":1}`, "traceId, sessionId or datasetRunId"},
		{"observation without trace", `{"observationId":"o","sessionId":"se","name":"n","value":1}`, "observationId needs the traceId"},
		{"not an object", `"score"`, "must be a JSON object"},
		{"several problems at once", `{"traceId":"t","name":"","value":true}`, "name must be a non-empty string; value must be a number or a string"},
	}
	p := startPlatform(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each score goes with a valid companion, so a rejection is per score (207), never of the batch.
			resp := sendScores(t, p, "["+tt.score+`,{"traceId":"t","name":"companion","value":1}]`)
			if tt.message == "" {
				if resp.status != http.StatusOK {
					t.Fatalf("valid score: status %d: %s", resp.status, resp.body)
				}
				return
			}
			if resp.status != http.StatusMultiStatus {
				t.Fatalf("status %d, want 207: %s", resp.status, resp.body)
			}
			var results ScoreBatchResults
			if err := json.Unmarshal(resp.body, &results); err != nil {
				t.Fatal(err)
			}
			if results.Accepted != 1 || results.Rejected != 1 || len(results.Errors) != 1 || results.Errors[0].Index != 0 {
				t.Fatalf("results %+v: want the first score rejected and the companion accepted", results)
			}
			if !strings.Contains(results.Errors[0].Message, tt.message) {
				t.Errorf("error %q does not say %q", results.Errors[0].Message, tt.message)
			}
		})
	}
}

func TestScoresAnswers(t *testing.T) {
	p := startPlatform(t)

	ok := sendScores(t, p, `[{"id":"a","traceId":"t","name":"n","value":1},{"traceId":"t","name":"n","value":2}]`)
	if ok.status != http.StatusOK {
		t.Fatalf("status %d: %s", ok.status, ok.body)
	}
	for _, id := range []string{`"a"`, `"id"`} {
		if strings.Contains(string(ok.body), id) {
			t.Errorf("200 answer %s carries a score id (docs/contract.md §10 says it has none)", ok.body)
		}
	}

	partial := sendScores(t, p, `[{"id":"b","traceId":"t","name":"n","value":1},{"id":"bad","traceId":"t","name":"","value":1},{"traceId":"t","value":1}]`)
	if partial.status != http.StatusMultiStatus {
		t.Fatalf("status %d: %s", partial.status, partial.body)
	}
	var got map[string]any
	if err := json.Unmarshal(partial.body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"accepted": 1.0,
		"rejected": 2.0,
		"errors": []any{
			map[string]any{"index": 1.0, "id": "bad", "message": "name must be a non-empty string"},
			map[string]any{"index": 2.0, "message": "name must be a non-empty string"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("207 body\n got %v\nwant %v", got, want)
	}

	allBad := sendScores(t, p, `[{"traceId":"t","name":"","value":1}]`)
	if allBad.status != http.StatusMultiStatus || !strings.Contains(string(allBad.body), `"accepted":0`) {
		t.Errorf("a batch of only invalid scores: status %d %s; want 207 with accepted 0", allBad.status, allBad.body)
	}
	if st := p.Stats(); st.ScoresReceived != 3 || st.ScoresRejected != 3 {
		t.Errorf("received %d rejected %d, want 3 and 3", st.ScoresReceived, st.ScoresRejected)
	}
}

func TestScoresUpsertByID(t *testing.T) {
	p := startPlatform(t)
	sendScores(t, p, `[{"id":"s1","traceId":"t","name":"q","value":1},{"traceId":"t","name":"anon","value":1}]`)
	sendScores(t, p, `[{"id":"s1","traceId":"t","name":"q","value":0.25,"comment":"resent"},{"traceId":"t","name":"anon","value":1}]`)

	s1, ok := p.Score("s1")
	if !ok {
		t.Fatal("score s1 not stored")
	}
	if s1.Value != 0.25 || s1.Comment != "resent" || s1.Deliveries != 2 || s1.IDGenerated {
		t.Errorf("s1 = value %v comment %q deliveries %d generated %v; want the resent score, delivered twice",
			s1.Value, s1.Comment, s1.Deliveries, s1.IDGenerated)
	}
	anon := p.Scores(ScoreFilter{Name: "anon"})
	if len(anon) != 2 || anon[0].ID == anon[1].ID || !anon[0].IDGenerated {
		t.Errorf("scores without id: %+v; want two with distinct generated ids", anon)
	}
	st := p.Stats()
	if st.UniqueScores != 3 || st.ScoresReceived != 4 || st.ScoreDeliveries["s1"] != 2 {
		t.Errorf("stats unique %d received %d deliveries %v", st.UniqueScores, st.ScoresReceived, st.ScoreDeliveries)
	}
}

func TestScoreStoredFields(t *testing.T) {
	p := startPlatform(t)
	sendScores(t, p, `[{"id":"s","traceId":"t","observationId":"o","name":"q","value":"good","comment":"c","metadata":{"k":1},"timestamp":"2025-03-01T14:00:00+02:00"}]`)
	sendScores(t, p, `[{"id":"now","traceId":"t","name":"q","value":1}]`)
	s, _ := p.Score("s")
	if s.DataType != DataTypeCategorical || s.Value != "good" || s.ObservationID != "o" || fmt.Sprint(s.Metadata) != "map[k:1]" {
		t.Errorf("stored score %+v", s)
	}
	if want := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC); !s.Timestamp.Equal(want) {
		t.Errorf("timestamp %v, want %v", s.Timestamp, want)
	}
	if now, _ := p.Score("now"); now.Timestamp.IsZero() || now.DataType != DataTypeNumeric {
		t.Errorf("score without timestamp: %+v; want the arrival time and NUMERIC", now)
	}
}
