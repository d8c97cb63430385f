package platform

import (
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
)

// Headers the svc clients send beside Authorization (docs/contract.md §2).
const (
	HeaderPublicKey  = "X-Svc-Public-Key"
	HeaderSDKName    = "X-Svc-Sdk-Name"
	HeaderSDKVersion = "X-Svc-Sdk-Version"
)

// authorize checks `Authorization: Basic base64(public_key:secret_key)` against the configured
// keys, and, when the client also names its public key in X-Svc-Public-Key, that it is the same
// key. The error says what is wrong without repeating any credential.
func (p *Platform) authorize(r *http.Request) error {
	header := r.Header.Get("Authorization")
	if header == "" {
		return errors.New("missing Authorization header; use Basic auth with the public and secret key")
	}
	scheme, encoded, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Basic") {
		return errors.New("authorization scheme must be Basic")
	}
	encoded = strings.TrimSpace(encoded)
	if encoded == "" {
		return errors.New("malformed Basic credentials: empty")
	}
	decoded, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return errors.New("malformed Basic credentials: not base64")
	}
	public, secret, ok := strings.Cut(string(decoded), ":")
	if !ok {
		return errors.New("malformed Basic credentials: expected public_key:secret_key")
	}
	// Both comparisons always run, so that timing does not tell which key was wrong.
	publicOK := subtle.ConstantTimeCompare([]byte(public), []byte(p.opts.PublicKey)) == 1
	secretOK := subtle.ConstantTimeCompare([]byte(secret), []byte(p.opts.SecretKey)) == 1
	if !publicOK || !secretOK {
		return errors.New("invalid public or secret key")
	}
	if named := r.Header.Get(HeaderPublicKey); named != "" && named != p.opts.PublicKey {
		return errors.New(HeaderPublicKey + " does not match the public key of the Basic credentials")
	}
	return nil
}
