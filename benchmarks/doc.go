// Package benchmarks compares the svc components with the contrib processors a user would
// otherwise configure (filter, transform, redaction in OTTL), in the same `go test -bench` run.
// It is a module of its own so that only it depends on opentelemetry-collector-contrib.
package benchmarks
