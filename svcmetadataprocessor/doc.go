//go:generate go tool mdatagen metadata.yaml

// Package svcmetadataprocessor implements the svcmetadata processor: it brings span metadata
// into the svc platform's typed JSON encoding, promotes metadata other instrumentations write
// elsewhere, enforces the propagated-metadata length limit, upgrades trace-level input/output
// of older SDKs, and masks input, output, GenAI content and observation metadata.
package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"
