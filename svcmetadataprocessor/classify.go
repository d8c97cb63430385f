package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"

import (
	"strings"

	"github.com/svc/svc-collector/pkg/svcattr"
)

// Attribute names of other instrumentations whose metadata the processor promotes.
const (
	// OpenInference writes an observation's metadata as one JSON object string.
	openInferenceMetadata = "metadata"
	// The Vercel AI SDK writes experimental_telemetry.metadata entries one attribute per key.
	vercelAIMetadataPrefix = "ai.telemetry.metadata."
	// OpenLLMetry (Traceloop) writes association properties one attribute per key.
	openLLMetryPropertiesPrefix = "traceloop.association.properties."
)

// attrKind classifies a span attribute name by what the processor does with it.
type attrKind uint16

const (
	kindObservationMetadataKey  attrKind = 1 << iota // svc.observation.metadata.<key>
	kindTraceMetadataKey                             // svc.trace.metadata.<key>
	kindBareObservationMetadata                      // svc.observation.metadata
	kindBareTraceMetadata                            // svc.trace.metadata
	kindObservationIO                                // svc.observation.input / output
	kindTraceIO                                      // svc.trace.input / output
	kindGenAIContent                                 // gen_ai.input.messages, ...
	kindOpenInferenceMetadata                        // metadata
	kindVercelAIMetadata                             // ai.telemetry.metadata.<key>
	kindOpenLLMetryProperty                          // traceloop.association.properties.<key>
)

const (
	kindsMetadataKey = kindObservationMetadataKey | kindTraceMetadataKey
)

// classify returns the kind of an attribute name, 0 for attributes the processor leaves alone.
func classify(name string) attrKind {
	if name == "" {
		return 0
	}
	switch name[0] {
	case 's':
		if !strings.HasPrefix(name, "svc.") {
			return 0
		}
		switch {
		case strings.HasPrefix(name, svcattr.ObservationMetadataPrefix):
			return kindObservationMetadataKey
		case strings.HasPrefix(name, svcattr.TraceMetadataPrefix):
			return kindTraceMetadataKey
		}
		switch name {
		case svcattr.ObservationMetadata:
			return kindBareObservationMetadata
		case svcattr.TraceMetadata:
			return kindBareTraceMetadata
		case svcattr.ObservationInput, svcattr.ObservationOutput:
			return kindObservationIO
		case svcattr.TraceInput, svcattr.TraceOutput:
			return kindTraceIO
		}
	case 'g':
		switch name {
		case svcattr.GenAIInputMessages, svcattr.GenAIOutputMessages, svcattr.GenAISystemInstructions:
			return kindGenAIContent
		}
	case 'm':
		if name == openInferenceMetadata {
			return kindOpenInferenceMetadata
		}
	case 'a':
		if strings.HasPrefix(name, vercelAIMetadataPrefix) {
			return kindVercelAIMetadata
		}
	case 't':
		if strings.HasPrefix(name, openLLMetryPropertiesPrefix) {
			return kindOpenLLMetryProperty
		}
	}
	return 0
}
