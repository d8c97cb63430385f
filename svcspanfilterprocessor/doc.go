// Package svcspanfilterprocessor implements the `svcspanfilter` processor: the svc SDKs' GenAI span
// filter, the TraceIdRatioBased sample rate, and trace integrity (every trace one connected tree).
//
//go:generate go tool mdatagen metadata.yaml
package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"
