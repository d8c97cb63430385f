//go:generate mdatagen metadata.yaml

// Package svcsamplingextension holds the one sampling decision of a collector: the
// TraceIdRatioBased sample_rate and the memory of experiment traces (which sampling never drops),
// shared by every svc component that names it in its `sampling` setting. So a span, its scores and
// its evaluator scores are kept or dropped together, from one setting. Its `outcome` section (rules
// on a trace's outcome, sampling.Outcome) is compiled and shared the same way; no component
// applies it yet, so a configuration that sets it is refused at load.
package svcsamplingextension // import "github.com/svc/svc-collector/svcsamplingextension"
