// Package svcspanfilterprocessor implements the `svcspanfilter` processor: the svc SDKs' GenAI span
// filter (`is_default_export_span` combined with `should_export_span`) as collector configuration,
// the OpenTelemetry TraceIdRatioBased sample rate, and trace integrity: kept spans whose parent was
// dropped are re-parented so that every trace reaches the platform as one connected tree.
//
//go:generate go tool mdatagen metadata.yaml
package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"
