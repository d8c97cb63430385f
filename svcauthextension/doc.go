// Package svcauthextension is the server authenticator `svcauth` of the multi-tenant (pass-through)
// gateway: a receiver that names it refuses every request without well-formed svc credentials
// (`Authorization: Basic base64(public_key:secret_key)`) with HTTP 401 / gRPC Unauthenticated,
// before anything of the request is accepted.
//
//go:generate go tool mdatagen metadata.yaml
package svcauthextension // import "github.com/svc/svc-collector/svcauthextension"
