package credentials

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func basic(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		header  string
		want    Credentials
		wantErr error
	}{
		{name: "well formed", header: basic("pk-lf-1:sk-lf-1"), want: Credentials{"pk-lf-1", "sk-lf-1"}},
		{name: "scheme in any case, spaces around", header: "  basic " + base64.StdEncoding.EncodeToString([]byte("pk:sk")) + " ", want: Credentials{"pk", "sk"}},
		{name: "secret may hold a colon", header: basic("pk:sk:more"), want: Credentials{"pk", "sk:more"}},
		{name: "empty", header: "", wantErr: ErrMissing},
		{name: "bearer", header: "Bearer abc", wantErr: ErrScheme},
		{name: "scheme only", header: "Basic", wantErr: ErrMalformed},
		{name: "not base64", header: "Basic !!!", wantErr: ErrMalformed},
		{name: "no colon", header: basic("pk-only"), wantErr: ErrMalformed},
		{name: "keys swapped", header: basic("sk-secret:pk-public"), wantErr: ErrSwapped},
		{name: "empty public key", header: basic(":sk"), wantErr: ErrMalformed},
		{name: "empty secret key", header: basic("pk:"), wantErr: ErrMalformed},
		{name: "control character", header: basic("pk:s\nk"), wantErr: ErrMalformed},
		{name: "space in key", header: basic("p k:sk"), wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.header)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Parse error = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("Parse = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestErrorsQuoteNoCredential(t *testing.T) {
	const secret = "sk-very-secret-123"
	for _, h := range []string{basic("pk:" + secret + "\x01"), "Token " + secret, "Basic " + secret} {
		_, err := Parse(h)
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("Parse(%q) error %v: want an error that does not quote the secret", h, err)
		}
	}
}

func TestFromValuesAndLookup(t *testing.T) {
	good := basic("pk:sk")
	tests := []struct {
		name    string
		sources map[string][]string
		wantErr error
	}{
		{name: "HTTP canonical header", sources: map[string][]string{"Authorization": {good}}},
		{name: "gRPC lower-case metadata", sources: map[string][]string{"authorization": {good}}},
		{name: "odd case", sources: map[string][]string{"AUTHORIZATION": {good}}},
		{name: "absent", sources: map[string][]string{"content-type": {"x"}}, wantErr: ErrMissing},
		{name: "two values", sources: map[string][]string{"authorization": {good, good}}, wantErr: ErrAmbiguous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := FromValues(Lookup(tt.sources))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if err == nil && c.Header() != good {
				t.Fatalf("Header() = %q, want %q", c.Header(), good)
			}
		})
	}
}
