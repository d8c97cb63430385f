// Package kubernetes holds the Kubernetes manifests of the svc-collector two-tier deployment
// (namespace.yaml, gateway.yaml, router.yaml) and, in its test, their strict decoding with the
// Kubernetes API types and the checks of their wiring.
package kubernetes
