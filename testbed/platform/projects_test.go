package platform

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
)

var (
	projectA = ProjectKeys{PublicKey: "pk-team-a", SecretKey: "sk-team-a"}
	projectB = ProjectKeys{PublicKey: "pk-team-b", SecretKey: "sk-team-b"}
)

func startProjects(t *testing.T) *Projects {
	t.Helper()
	ps, err := StartProjects(ProjectsOptions{Projects: []ProjectKeys{projectA, projectB}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Close() })
	return ps
}

// sendAs sends one request to the front with keys (none when keys is zero) and returns status and body.
func sendAs(t *testing.T, ps *Projects, keys ProjectKeys, method, path string, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ps.URL()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if keys.PublicKey != "" {
		req.Header.Set("Authorization", basicAuth(keys.PublicKey, keys.SecretKey))
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// readTraceAs is the number of observations of trace b that keys can read.
func readTraceAs(t *testing.T, ps *Projects, keys ProjectKeys, b byte) int {
	t.Helper()
	status, body := sendAs(t, ps, keys, http.MethodGet, PathObservations+"?"+url.Values{"traceId": {hexTrace(b)}}.Encode(), "", nil)
	if status != http.StatusOK {
		t.Fatalf("read as %s: %d %s", keys.PublicKey, status, body)
	}
	var page struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	return len(page.Data)
}

func TestProjectsKeepEachProjectsDataApart(t *testing.T) {
	ps := startProjects(t)
	spansOf := func(tr byte) []byte {
		return protoBody(t, makeTraces(t, testResource{scopeName: "svc-sdk"}, testSpan{traceID: tr, spanID: tr, name: "llm"}))
	}
	if status, body := sendAs(t, ps, projectA, http.MethodPost, PathTraces, "application/x-protobuf", spansOf(1)); status != http.StatusOK {
		t.Fatalf("project A's spans: %d %s", status, body)
	}
	if status, body := sendAs(t, ps, projectB, http.MethodPost, PathTraces, "application/x-protobuf", spansOf(2)); status != http.StatusOK {
		t.Fatalf("project B's spans: %d %s", status, body)
	}
	scoreBody := []byte(`[{"id":"s-1","traceId":"` + hexTrace(1) + `","name":"quality","value":1}]`)
	if status, body := sendAs(t, ps, projectA, http.MethodPost, PathScores, "application/json", scoreBody); status != http.StatusOK {
		t.Fatalf("project A's score: %d %s", status, body)
	}

	tests := []struct {
		name   string
		keys   ProjectKeys
		trace  byte
		wantN  int
		stored func() bool
	}{
		{name: "A reads its trace", keys: projectA, trace: 1, wantN: 1},
		{name: "A does not read B's trace", keys: projectA, trace: 2, wantN: 0},
		{name: "B reads its trace", keys: projectB, trace: 2, wantN: 1},
		{name: "B does not read A's trace", keys: projectB, trace: 1, wantN: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readTraceAs(t, ps, tt.keys, tt.trace); got != tt.wantN {
				t.Fatalf("read %d observations, want %d", got, tt.wantN)
			}
		})
	}
	if _, ok := ps.Project(projectA.PublicKey).Score("s-1"); !ok {
		t.Error("project A does not hold its score")
	}
	if _, ok := ps.Project(projectB.PublicKey).Score("s-1"); ok {
		t.Error("project B holds project A's score")
	}
	if got := ps.Project(projectB.PublicKey).Stats().UniqueSpans; got != 1 {
		t.Errorf("project B holds %d spans, want only its own 1", got)
	}
}

func TestProjectsRefuseUnknownWrongAndRevokedKeys(t *testing.T) {
	tests := []struct {
		name       string
		keys       ProjectKeys
		revoke     int
		wantStatus int
	}{
		{name: "no credentials", wantStatus: http.StatusUnauthorized},
		{name: "unknown public key", keys: ProjectKeys{"pk-nobody", "sk-x"}, wantStatus: http.StatusUnauthorized},
		{name: "wrong secret of a known project", keys: ProjectKeys{projectA.PublicKey, projectB.SecretKey}, wantStatus: http.StatusUnauthorized},
		{name: "revoked with 403", keys: projectB, revoke: http.StatusForbidden, wantStatus: http.StatusForbidden},
		{name: "revoked with 401", keys: projectB, revoke: http.StatusUnauthorized, wantStatus: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := startProjects(t)
			if tt.revoke != 0 {
				ps.Revoke(tt.keys.PublicKey, tt.revoke)
			}
			body := protoBody(t, makeTraces(t, testResource{scopeName: "svc-sdk"}, testSpan{traceID: 3, spanID: 3, name: "llm"}))
			status, _ := sendAs(t, ps, tt.keys, http.MethodPost, PathTraces, "application/x-protobuf", body)
			if status != tt.wantStatus {
				t.Fatalf("status %d, want %d", status, tt.wantStatus)
			}
			for _, keys := range []ProjectKeys{projectA, projectB} {
				if n := ps.Project(keys.PublicKey).Stats().UniqueSpans; n != 0 {
					t.Errorf("project %s stored %d spans of a refused request", keys.PublicKey, n)
				}
			}
			if tt.revoke != 0 {
				ps.Restore(tt.keys.PublicKey)
				if status, _ := sendAs(t, ps, tt.keys, http.MethodPost, PathTraces, "application/x-protobuf", body); status != http.StatusOK {
					t.Fatalf("after Restore: status %d, want 200", status)
				}
				if ps.Refused(tt.keys.PublicKey) != 1 {
					t.Errorf("Refused(%s) = %d, want 1", tt.keys.PublicKey, ps.Refused(tt.keys.PublicKey))
				}
			}
		})
	}
}

func TestProjectsHealthNeedsNoCredentials(t *testing.T) {
	ps := startProjects(t)
	if status, body := sendAs(t, ps, ProjectKeys{}, http.MethodGet, PathHealth, "", nil); status != http.StatusOK {
		t.Fatalf("health: %d %s", status, body)
	}
}

func TestStartProjectsRefusesBadOptions(t *testing.T) {
	for name, opts := range map[string]ProjectsOptions{
		"no project":             {},
		"duplicate key":          {Projects: []ProjectKeys{projectA, projectA}},
		"not loopback":           {Addr: "0.0.0.0:0", Projects: []ProjectKeys{projectA}},
		"project without secret": {Projects: []ProjectKeys{{PublicKey: "pk"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if ps, err := StartProjects(opts); err == nil {
				_ = ps.Close()
				t.Fatal("StartProjects accepted bad options")
			}
		})
	}
}
