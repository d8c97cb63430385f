//go:generate go tool mdatagen metadata.yaml

// Package svcmetadataprocessor implements the svcmetadata processor: it writes span metadata in
// the encoding the svc platform reads for each span (JSON text on the new SDK majors' spans, raw
// OTLP values elsewhere), promotes metadata other instrumentations write elsewhere, enforces the
// propagated-metadata length limit, upgrades trace-level input/output of older SDKs, and masks
// input, output, GenAI content and observation metadata.
package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"
