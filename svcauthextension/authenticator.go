package svcauthextension // import "github.com/svc/svc-collector/svcauthextension"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/credentials"
)

// AttributePublicKey is the client.Info auth attribute holding the request's public key (for
// components that want to know the tenant without reading the secret).
const AttributePublicKey = "public_key"

// errNotAllowed: the key pair is well formed but its project may not use this gateway.
var errNotAllowed = errors.New("this gateway does not accept the public key of these credentials (allowed_public_keys)")

type authenticator struct {
	component.StartFunc
	component.ShutdownFunc

	allowed map[string]struct{}
	logger  *zap.Logger
}

var (
	_ extension.Extension  = (*authenticator)(nil)
	_ extensionauth.Server = (*authenticator)(nil)
)

func newAuthenticator(cfg *Config, logger *zap.Logger) *authenticator {
	a := &authenticator{logger: logger}
	if len(cfg.AllowedPublicKeys) > 0 {
		a.allowed = make(map[string]struct{}, len(cfg.AllowedPublicKeys))
		for _, k := range cfg.AllowedPublicKeys {
			a.allowed[k] = struct{}{}
		}
	}
	return a
}

// Authenticate lets a request in when it carries exactly one well-formed `Authorization: Basic
// base64(public_key:secret_key)` (and, with allowed_public_keys, an allowed public key). The
// receiver answers any error with HTTP 401 / gRPC Unauthenticated and the error's text, which
// names no credential. The credentials themselves travel on as client metadata (the receiver's
// include_metadata): this authenticator does not check them against the platform, the platform
// does when the exporter forwards them.
func (a *authenticator) Authenticate(ctx context.Context, sources map[string][]string) (context.Context, error) {
	creds, err := credentials.FromValues(credentials.Lookup(sources))
	if err != nil {
		a.logger.Debug("Refused a request without well-formed svc credentials", zap.Error(err))
		return ctx, err
	}
	if a.allowed != nil {
		if _, ok := a.allowed[creds.PublicKey]; !ok {
			a.logger.Debug("Refused a request with a public key that is not allowed", zap.String("public_key", creds.PublicKey))
			return ctx, errNotAllowed
		}
	}
	info := client.FromContext(ctx)
	info.Auth = authData{publicKey: creds.PublicKey}
	return client.NewContext(ctx, info), nil
}

// authData exposes the public key only: the secret stays in the request's metadata.
type authData struct{ publicKey string }

func (d authData) GetAttribute(name string) any {
	if name == AttributePublicKey {
		return d.publicKey
	}
	return nil
}

func (authData) GetAttributeNames() []string { return []string{AttributePublicKey} }
