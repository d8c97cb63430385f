// Package svcevaluatorconnector is the svcevaluator connector: online evaluators at the gateway.
// It reads the spans that become observations (after svcspanfilter and svcmetadata, so on masked
// content), selects them with v2 observation filters (pkg/observation), runs rule-based checks
// on them and emits one svc score record (pkg/scorerecord) per evaluated observation for the svc
// exporter.
//
//go:generate go tool mdatagen metadata.yaml
package svcevaluatorconnector
