package svcauthextension

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"

	"go.opentelemetry.io/collector/client"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/credentials"
)

func basic(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }

func TestAuthenticate(t *testing.T) {
	const secret = "sk-lf-tenant-secret-77"
	tests := []struct {
		name    string
		allowed []string
		sources map[string][]string
		wantPK  string
		wantErr error
	}{
		{name: "HTTP header", sources: map[string][]string{"Authorization": {basic("pk-a:" + secret)}}, wantPK: "pk-a"},
		{name: "gRPC metadata", sources: map[string][]string{"authorization": {basic("pk-b:" + secret)}}, wantPK: "pk-b"},
		{name: "allowed key", allowed: []string{"pk-a"}, sources: map[string][]string{"Authorization": {basic("pk-a:" + secret)}}, wantPK: "pk-a"},
		{name: "no credentials", sources: map[string][]string{"Content-Type": {"application/x-protobuf"}}, wantErr: credentials.ErrMissing},
		{name: "bearer token", sources: map[string][]string{"Authorization": {"Bearer " + secret}}, wantErr: credentials.ErrScheme},
		{name: "empty secret", sources: map[string][]string{"Authorization": {basic("pk-a:")}}, wantErr: credentials.ErrMalformed},
		{name: "two values", sources: map[string][]string{"authorization": {basic("pk-a:s"), basic("pk-b:s")}}, wantErr: credentials.ErrAmbiguous},
		{name: "key not allowed", allowed: []string{"pk-a"}, sources: map[string][]string{"Authorization": {basic("pk-c:" + secret)}}, wantErr: errNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAuthenticator(&Config{AllowedPublicKeys: tt.allowed}, zap.NewNop())
			ctx, err := a.Authenticate(context.Background(), tt.sources)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Authenticate error = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			auth := client.FromContext(ctx).Auth
			if auth == nil || auth.GetAttribute(AttributePublicKey) != tt.wantPK {
				t.Fatalf("client.Info auth public_key = %v, want %q", auth, tt.wantPK)
			}
			for _, name := range auth.GetAttributeNames() {
				if v, _ := auth.GetAttribute(name).(string); v == secret {
					t.Fatalf("auth attribute %q exposes the secret", name)
				}
			}
		})
	}
}
