// Package credentials is the one reading of svc API credentials in a request: `Authorization:
// Basic base64(public_key:secret_key)`, as the platform's SDKs send them (docs/contract.md §2, docs/architecture.md §7). The
// gateway's receiver authenticator (svcauthextension) and the exporter's pass-through mode both use
// it, so that what the receiver lets in is exactly what the exporter can forward.
//
// Errors never quote the header, the encoded value or the secret: they end up in logs and in the
// 401 answers of the receiver.
package credentials

import (
	"encoding/base64"
	"errors"
	"strings"
)

// MetadataKey is the client metadata key (and HTTP header / gRPC metadata name) of the credentials.
// Client metadata keys are case-insensitive; gRPC sends them lower-case.
const MetadataKey = "authorization"

// Errors of Parse. They name what is wrong and how to send it right, without any credential.
var (
	ErrMissing   = errors.New("missing Authorization: send `Authorization: Basic base64(public_key:secret_key)` with your svc project's API keys")
	ErrAmbiguous = errors.New("more than one Authorization value: send exactly one `Authorization: Basic base64(public_key:secret_key)`")
	ErrScheme    = errors.New("authorization scheme must be Basic: send `Authorization: Basic base64(public_key:secret_key)`")
	ErrMalformed = errors.New("malformed Basic credentials: expected base64(public_key:secret_key) with a non-empty public and secret key")
	// ErrSwapped: the public key has the shape of a secret key. Taken as given, the secret would be
	// logged and counted as the public key, which the gateway shows freely.
	ErrSwapped = errors.New("the public key has the shape of a secret key (sk-...): send base64(public_key:secret_key), public key first")
)

// Credentials is one svc project's API key pair.
type Credentials struct {
	PublicKey string
	SecretKey string
}

// Parse reads an Authorization value: `Basic base64(public_key:secret_key)` (scheme in any case).
// Both keys must be non-empty and printable, without spaces: a key with a control character
// could not be sent on as an HTTP header, and an empty one is certainly wrong.
func Parse(header string) (Credentials, error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return Credentials{}, ErrMissing
	}
	scheme, encoded, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Basic") {
		return Credentials{}, ErrScheme
	}
	decoded, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return Credentials{}, ErrMalformed
	}
	public, secret, ok := strings.Cut(string(decoded), ":")
	if !ok || !wellFormedKey(public) || !wellFormedKey(secret) {
		return Credentials{}, ErrMalformed
	}
	if strings.HasPrefix(public, "sk-") {
		return Credentials{}, ErrSwapped
	}
	return Credentials{PublicKey: public, SecretKey: secret}, nil
}

// FromValues reads the credentials of a request's header or metadata values of MetadataKey:
// exactly one value is accepted.
func FromValues(values []string) (Credentials, error) {
	switch len(values) {
	case 0:
		return Credentials{}, ErrMissing
	case 1:
		return Parse(values[0])
	default:
		return Credentials{}, ErrAmbiguous
	}
}

// Lookup returns the values of MetadataKey in a header-like map whose keys may be in any case
// (HTTP headers are canonical, `Authorization`; gRPC metadata lower-case).
func Lookup(sources map[string][]string) []string {
	if v, ok := sources[MetadataKey]; ok {
		return v
	}
	if v, ok := sources["Authorization"]; ok {
		return v
	}
	for k, v := range sources {
		if strings.EqualFold(k, MetadataKey) {
			return v
		}
	}
	return nil
}

// Header is the Authorization value of c.
func (c Credentials) Header() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(c.PublicKey+":"+c.SecretKey))
}

// wellFormedKey: non-empty, visible ASCII only (no spaces, no controls).
func wellFormedKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] > '~' {
			return false
		}
	}
	return true
}
