package platform

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

func TestAuthRejectsBadCredentials(t *testing.T) {
	p := startPlatform(t)
	tests := []struct {
		name    string
		headers map[string]string
		status  int
		message string
	}{
		{"valid", nil, http.StatusOK, ""},
		{"missing header", map[string]string{"Authorization": ""}, http.StatusUnauthorized, "missing Authorization"},
		{"bearer scheme", map[string]string{"Authorization": "Bearer " + testSecretKey}, http.StatusUnauthorized, "scheme must be Basic"},
		{"no credentials", map[string]string{"Authorization": "Basic"}, http.StatusUnauthorized, "empty"},
		{"not base64", map[string]string{"Authorization": "Basic %%%"}, http.StatusUnauthorized, "not base64"},
		{"no colon", map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(testPublicKey))}, http.StatusUnauthorized, "public_key:secret_key"},
		{"wrong public key", map[string]string{"Authorization": basicAuth("pk-other", testSecretKey)}, http.StatusUnauthorized, "invalid public or secret key"},
		{"wrong secret key", map[string]string{"Authorization": basicAuth(testPublicKey, "sk-other")}, http.StatusUnauthorized, "invalid public or secret key"},
		{"keys swapped", map[string]string{"Authorization": basicAuth(testSecretKey, testPublicKey)}, http.StatusUnauthorized, "invalid public or secret key"},
		{"public key header differs", map[string]string{HeaderPublicKey: "pk-other"}, http.StatusUnauthorized, HeaderPublicKey},
		{"public key header matches", map[string]string{HeaderPublicKey: testPublicKey}, http.StatusOK, ""},
		{"lower-case scheme", map[string]string{"Authorization": "basic " + base64.StdEncoding.EncodeToString([]byte(testPublicKey+":"+testSecretKey))}, http.StatusOK, ""},
	}
	// Every authenticated endpoint applies the same rule; the reads are the cheapest to call.
	for _, path := range []string{PathObservations, PathScoresRead} {
		for _, tt := range tests {
			t.Run(path+"/"+tt.name, func(t *testing.T) {
				resp := send(t, p, http.MethodGet, path, tt.headers, nil)
				if resp.status != tt.status {
					t.Fatalf("status %d, want %d: %s", resp.status, tt.status, resp.body)
				}
				if tt.status == http.StatusUnauthorized {
					msg, _ := resp.jsonBody(t)["message"].(string)
					if !strings.Contains(msg, tt.message) {
						t.Errorf("message %q does not say %q", msg, tt.message)
					}
					if strings.Contains(string(resp.body), testSecretKey) {
						t.Errorf("the error repeats the secret key: %s", resp.body)
					}
				}
			})
		}
	}
}

func TestAuthGuardsWriteEndpoints(t *testing.T) {
	p := startPlatform(t)
	noAuth := map[string]string{"Authorization": "", "Content-Type": "application/json"}
	tests := []struct {
		path string
		body string
	}{
		{PathTraces, `{}`},
		{PathScores, `[{"name":"n","value":1,"traceId":"t"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp := send(t, p, http.MethodPost, tt.path, noAuth, []byte(tt.body))
			if resp.status != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401: %s", resp.status, resp.body)
			}
		})
	}
	st := p.Stats()
	if st.SpansReceived != 0 || st.ScoresReceived != 0 {
		t.Errorf("unauthorized requests stored data: %+v", st)
	}
}

func TestHealthNeedsNoAuth(t *testing.T) {
	p := startPlatform(t, func(o *Options) { o.Version = "4.60.1" })
	resp := send(t, p, http.MethodGet, PathHealth, map[string]string{"Authorization": ""}, nil)
	if resp.status != http.StatusOK {
		t.Fatalf("status %d: %s", resp.status, resp.body)
	}
	body := resp.jsonBody(t)
	if body["status"] != "OK" || body["version"] != "4.60.1" {
		t.Errorf("health body %v, want status OK and version 4.60.1", body)
	}
}
