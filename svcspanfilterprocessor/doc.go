// Package svcspanfilterprocessor implements the `svcspanfilter` processor: the svc SDKs' GenAI span
// filter as collector configuration, the OpenTelemetry TraceIdRatioBased sample rate, and trace
// integrity: every trace reaches the platform as one connected tree.
//
//go:generate go tool mdatagen metadata.yaml
package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"
