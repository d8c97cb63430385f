package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/masking"
	"github.com/svc/svc-collector/pkg/svcattr"
)

// maskSpan masks everything of the span that leaves the gateway with content in it, with the
// one engine of pkg/masking: every attribute value (except the structural ones and
// masking.skip_attributes), event and link attributes, the status message. Observation
// metadata is masked as decoded values and written back in the span's encoding (JSON text on
// new-SDK spans, raw OTLP values elsewhere); propagated metadata (svc.trace.metadata.*) is not
// masked (docs/contract.md §7).
func (p *metadataProcessor) maskSpan(span ptrace.Span, enc spanEncoding, c *counts) {
	e := p.masker
	var st masking.Stats
	for k, v := range span.Attributes().All() {
		key, ok := strings.CutPrefix(k, svcattr.ObservationMetadataPrefix)
		if !ok || e.Skips(k) {
			continue
		}
		var res masking.Result
		switch {
		case enc == jsonEncoding && v.Type() == pcommon.ValueTypeStr:
			var out string
			out, res = e.JSON(key, v.Str())
			if res != masking.Unchanged {
				v.SetStr(out)
			}
		case e.IsMaskedKey(key):
			if v.Type() != pcommon.ValueTypeStr || v.Str() != e.KeyReplacement() {
				v.SetStr(e.KeyReplacement())
				res = masking.Masked
			}
		default:
			res = e.Value(v)
		}
		st.Add(res)
		p.logFailed(res, k)
	}
	e.Span(span, isMetadataAttribute, &st)
	c.masked += st.Masked + st.Oversized + st.Failed
	c.placeholders += st.Failed
	c.oversized += st.Oversized
}

// isMetadataAttribute: per-key metadata is masked by maskSpan itself (observation metadata,
// decoded) or not at all (propagated metadata, also a bare one left unflattened).
func isMetadataAttribute(name string) bool {
	return strings.HasPrefix(name, svcattr.ObservationMetadataPrefix) ||
		strings.HasPrefix(name, svcattr.TraceMetadataPrefix) || name == svcattr.TraceMetadata
}

func (p *metadataProcessor) logFailed(res masking.Result, attribute string) {
	if res == masking.Failed {
		p.logger.Debug("Masking could not process a value and replaced it whole by the placeholder",
			zap.String("attribute", attribute))
	}
}
