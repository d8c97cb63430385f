package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"

import (
	"context"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/masking"
	"github.com/svc/svc-collector/pkg/svcattr"
	"github.com/svc/svc-collector/svcmetadataprocessor/internal/metadata"
)

// maxPropagatedMetadataLength is the platform's limit on a propagated metadata value, in
// characters of its JSON text (docs/contract.md §6): a string keeps at most 198 characters.
const maxPropagatedMetadataLength = 200

type metadataProcessor struct {
	cfg       *Config
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	masker    *masking.Engine // nil when masking is off
	// relevant are the attribute kinds the metadata steps act on; spans with none skip them.
	relevant attrKind
}

// counts of what one batch went through, recorded as the component's metrics.
type counts struct {
	encoded, promoted, droppedForLength, masked, placeholders, oversized int64
}

func newMetadataProcessor(cfg *Config, set component.TelemetrySettings) (*metadataProcessor, error) {
	m, err := masking.New(cfg.Masking.Config)
	if err != nil {
		return nil, err
	}
	if len(cfg.Masking.ExtraAttributes) > 0 {
		set.Logger.Warn("masking.extra_attributes is deprecated and ignored: every attribute is masked now; remove it (use masking.skip_attributes to leave attributes unmasked)",
			zap.Strings("extra_attributes", cfg.Masking.ExtraAttributes))
	}
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	p := &metadataProcessor{cfg: cfg, logger: set.Logger, telemetry: tb, masker: m}
	p.relevant = kindsMetadataKey | kindsBare
	if cfg.Promote.OpenInference {
		p.relevant |= kindOpenInferenceMetadata
	}
	if cfg.Promote.VercelAI {
		p.relevant |= kindVercelAIMetadata
	}
	if cfg.Promote.OpenLLMetry {
		p.relevant |= kindOpenLLMetryProperty
	}
	if cfg.UpgradeTraceIO {
		p.relevant |= kindTraceIO
	}
	return p, nil
}

func (p *metadataProcessor) shutdown(context.Context) error {
	p.telemetry.Shutdown()
	return nil
}

func (p *metadataProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	var c counts
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			enc := encodingOf(rs.Resource(), ss.Scope())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				p.processSpan(spans.At(k), enc, &c)
			}
		}
	}
	p.record(ctx, c)
	return td, nil
}

func (p *metadataProcessor) record(ctx context.Context, c counts) {
	if c.encoded > 0 {
		p.telemetry.ProcessorSvcmetadataValuesEncoded.Add(ctx, c.encoded)
	}
	if c.promoted > 0 {
		p.telemetry.ProcessorSvcmetadataValuesPromoted.Add(ctx, c.promoted)
	}
	if c.droppedForLength > 0 {
		p.telemetry.ProcessorSvcmetadataValuesDroppedForLength.Add(ctx, c.droppedForLength)
	}
	if c.masked > 0 {
		p.telemetry.ProcessorSvcmetadataValuesMasked.Add(ctx, c.masked)
	}
	if c.oversized > 0 {
		p.telemetry.ProcessorSvcmetadataValuesRemovedForSize.Add(ctx, c.oversized)
	}
	if c.placeholders > 0 {
		p.telemetry.ProcessorSvcmetadataValuesReplacedByPlaceholder.Add(ctx, c.placeholders)
	}
}

// processSpan runs the steps in order: encode per-key metadata, flatten bare metadata, promote,
// enforce the propagated-metadata limit, upgrade trace input/output, mask. Every step writes
// metadata in the span's own encoding enc (see spanEncoding).
func (p *metadataProcessor) processSpan(span ptrace.Span, enc spanEncoding, c *counts) {
	attrs := span.Attributes()
	var found attrKind
	for k := range attrs.All() {
		found |= classify(k)
	}
	if found&p.relevant != 0 {
		p.metadataSteps(span, found, enc, c)
	}
	if p.masker != nil {
		p.maskSpan(span, enc, c)
	}
}

// metadataSteps runs the steps before masking on a span with attributes they act on.
func (p *metadataProcessor) metadataSteps(span ptrace.Span, found attrKind, enc spanEncoding, c *counts) {
	attrs := span.Attributes()
	if found&kindsMetadataKey != 0 && enc == jsonEncoding {
		c.encoded += encodeNonStringMetadata(attrs)
	}
	var flattened int64
	if found&kindBareObservationMetadata != 0 {
		flattened += flatten(attrs, svcattr.ObservationMetadata, svcattr.ObservationMetadataPrefix, enc)
	}
	if found&kindBareTraceMetadata != 0 {
		flattened += flatten(attrs, svcattr.TraceMetadata, svcattr.TraceMetadataPrefix, enc)
	}
	if enc == jsonEncoding {
		c.encoded += flattened
	}
	if found&p.relevant&kindOpenInferenceMetadata != 0 {
		c.promoted += promoteOpenInference(attrs, enc)
	}
	if found&p.relevant&kindVercelAIMetadata != 0 {
		c.promoted += promotePrefixed(attrs, vercelAIMetadataPrefix, enc)
	}
	if found&p.relevant&kindOpenLLMetryProperty != 0 {
		c.promoted += promotePrefixed(attrs, openLLMetryPropertiesPrefix, enc)
	}
	if found&(kindTraceMetadataKey|kindBareTraceMetadata) != 0 && enc == jsonEncoding {
		c.droppedForLength += p.dropLongPropagatedMetadata(span)
	}
	if found&p.relevant&kindTraceIO != 0 && span.ParentSpanID().IsEmpty() {
		upgradeTraceIO(attrs)
	}
}

// encodeNonStringMetadata writes, on a new-SDK span, every svc.observation.metadata.<key> and
// svc.trace.metadata.<key> value that is not a string as its JSON text: the platform decodes
// every value of such a span as JSON, and JSON text is always a string attribute. String values
// are the SDK's JSON text already and are never encoded a second time, which also makes a
// second pass change nothing.
func encodeNonStringMetadata(attrs pcommon.Map) int64 {
	var n int64
	var scratch [128]byte
	for k, v := range attrs.All() {
		if v.Type() == pcommon.ValueTypeStr || classify(k)&kindsMetadataKey == 0 {
			continue
		}
		text := string(appendValueJSON(scratch[:0], v))
		v.SetStr(text)
		n++
	}
	return n
}

// dropLongPropagatedMetadata removes, on a new-SDK span, svc.trace.metadata.<key> values whose
// JSON text is longer than the platform accepts, with a warning naming the key and the trace.
// Other spans' values are the platform's old shape, which the limit does not apply to.
func (p *metadataProcessor) dropLongPropagatedMetadata(span ptrace.Span) int64 {
	var n int64
	span.Attributes().RemoveIf(func(k string, v pcommon.Value) bool {
		if !strings.HasPrefix(k, svcattr.TraceMetadataPrefix) {
			return false
		}
		text := v.AsString()
		if len(text) <= maxPropagatedMetadataLength {
			return false
		}
		length := utf8.RuneCountInString(text)
		if length <= maxPropagatedMetadataLength {
			return false
		}
		p.logger.Warn("Dropped propagated metadata value longer than the platform accepts",
			zap.String("key", k[len(svcattr.TraceMetadataPrefix):]),
			zap.String("trace_id", span.TraceID().String()),
			zap.String("span_id", span.SpanID().String()),
			zap.Int("length", length),
			zap.Int("limit", maxPropagatedMetadataLength))
		n++
		return true
	})
	return n
}

// upgradeTraceIO moves svc.trace.input / svc.trace.output of a root span to the root
// observation's svc.observation.input / svc.observation.output (docs/contract.md §12). When the
// observation has its own value, that value stays and the trace-level one is left in place.
func upgradeTraceIO(attrs pcommon.Map) {
	for _, pair := range [...][2]string{
		{svcattr.TraceInput, svcattr.ObservationInput},
		{svcattr.TraceOutput, svcattr.ObservationOutput},
	} {
		from, to := pair[0], pair[1]
		v, ok := attrs.Get(from)
		if !ok {
			continue
		}
		if _, exists := attrs.Get(to); exists {
			continue
		}
		moved := pcommon.NewValueEmpty()
		v.CopyTo(moved)
		attrs.Remove(from)
		moved.CopyTo(attrs.PutEmpty(to))
	}
}
