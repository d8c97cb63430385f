//go:generate mdatagen metadata.yaml

// Package svcsamplingextension holds the one sampling decision of a collector: the
// TraceIdRatioBased sample_rate and the memory of experiment traces (which sampling never drops),
// shared by every svc component that names it in its `sampling` setting. So a span, its scores and
// its evaluator scores are kept or dropped together, from one setting. Its `outcome` section (rules
// on a trace's outcome, sampling.Outcome) is compiled and shared the same way: the svcspanfilter
// processor applies it to spans and score records, and the score connectors then drop no score
// by the rate.
package svcsamplingextension // import "github.com/svc/svc-collector/svcsamplingextension"
