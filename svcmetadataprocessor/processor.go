package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"

import (
	"context"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/jsontext"
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
	p.relevant = kindsMetadataKey | kindBareTraceMetadata
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

// processSpan runs the steps in order: encode per-key metadata, promote,
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
	// A bare svc.observation.metadata / svc.trace.metadata object is not split: the platform
	// parses it itself, and per-key copies of its nested objects would beat it (as OTLP maps,
	// shown as their wire wrapper). Only the limit below acts on a propagated one.
	if found&p.relevant&kindOpenInferenceMetadata != 0 {
		c.promoted += promoteOpenInference(attrs, enc)
	}
	if found&p.relevant&kindVercelAIMetadata != 0 {
		c.promoted += promoteCopies(attrs, vercelAIMetadataPrefix, vercelAITraceKey, enc)
	}
	if found&p.relevant&kindOpenLLMetryProperty != 0 {
		c.promoted += promoteCopies(attrs, openLLMetryPropertiesPrefix, nil, enc)
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
// JSON text is longer than the platform accepts, and such members of a bare svc.trace.metadata
// object (the platform reads its members as propagated values too), each with a warning naming
// the key and the trace. Other spans' values are the platform's old shape, which the limit does
// not apply to.
func (p *metadataProcessor) dropLongPropagatedMetadata(span ptrace.Span) int64 {
	var n int64
	attrs := span.Attributes()
	attrs.RemoveIf(func(k string, v pcommon.Value) bool {
		if !strings.HasPrefix(k, svcattr.TraceMetadataPrefix) {
			return false
		}
		if !p.overPropagatedLimit(span, k[len(svcattr.TraceMetadataPrefix):], v.AsString()) {
			return false
		}
		n++
		return true
	})
	if blob, ok := attrs.Get(svcattr.TraceMetadata); ok {
		n += p.dropLongBlobMembers(span, blob)
	}
	return n
}

// dropLongBlobMembers removes the members over the limit from a bare svc.trace.metadata object:
// JSON object text (the other members keep their text, compacted) or an OTLP map. Anything else
// is left to the platform, which reads only objects.
func (p *metadataProcessor) dropLongBlobMembers(span ptrace.Span, blob pcommon.Value) int64 {
	var n int64
	switch blob.Type() {
	case pcommon.ValueTypeStr:
		kept := []byte{'{'}
		err := jsontext.ObjectMembers(blob.Str(), func(key, valueJSON string) {
			if p.overPropagatedLimit(span, key, valueJSON) {
				n++
				return
			}
			if len(kept) > 1 {
				kept = append(kept, ',')
			}
			kept = append(jsontext.AppendString(kept, key), ':')
			kept = append(kept, valueJSON...)
		})
		if err == nil && n > 0 {
			blob.SetStr(string(append(kept, '}')))
		}
	case pcommon.ValueTypeMap:
		blob.Map().RemoveIf(func(key string, v pcommon.Value) bool {
			if p.overPropagatedLimit(span, key, encodeValue(v)) {
				n++
				return true
			}
			return false
		})
	}
	return n
}

// overPropagatedLimit reports a propagated value's JSON text longer than the platform accepts,
// with a warning naming its key and the trace.
func (p *metadataProcessor) overPropagatedLimit(span ptrace.Span, key, text string) bool {
	if len(text) <= maxPropagatedMetadataLength {
		return false
	}
	length := utf8.RuneCountInString(text)
	if length <= maxPropagatedMetadataLength {
		return false
	}
	p.logger.Warn("Dropped propagated metadata value longer than the platform accepts",
		zap.String("key", key),
		zap.String("trace_id", span.TraceID().String()),
		zap.String("span_id", span.SpanID().String()),
		zap.Int("length", length),
		zap.Int("limit", maxPropagatedMetadataLength))
	return true
}

// upgradeTraceIO copies svc.trace.input / svc.trace.output of a root span to the root
// observation's svc.observation.input / svc.observation.output (docs/contract.md §12: trace input and
// output come from the root observation). The trace-level attributes stay: the platform reads
// them first for the trace's input and output. When the observation has its own value, that
// value stays.
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
		copied := ownedCopy(v)
		copied.CopyTo(attrs.PutEmpty(to))
	}
}
