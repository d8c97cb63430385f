//go:generate go tool mdatagen metadata.yaml

// Package svcexporter is the `svc` exporter: it delivers spans to the svc platform's OTLP
// endpoint ({endpoint}/api/public/otel/v1/traces) and score records (logs, see
// github.com/svc/svc-collector/pkg/scorerecord) to its scores API ({endpoint}/api/public/scores),
// as the platform's newest SDKs do (docs/contract.md §2).
package svcexporter // import "github.com/svc/svc-collector/svcexporter"
