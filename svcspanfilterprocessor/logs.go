package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/genaicontent"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
)

// noSpanContextOpt: content records without a trace id or span id (the memory has the other reasons).
var noSpanContextOpt = reasonOpt("no_span_context")

// contentSink takes the content records (with a span context) of one logs call until their span
// arrives or their wait ends: durable before it returns, or refused retryably, keeping nothing.
type contentSink interface {
	AddContent(ctx context.Context, content plog.Logs) error
}

// contentLogsProcessor takes the content records out of the logs pipeline for the trace memory;
// every other record (gen_ai.evaluation.result for svcscore, application logs) goes on unchanged.
type contentLogsProcessor struct {
	logger    *zap.Logger
	enabled   bool
	sink      func() contentSink
	telemetry *metadata.TelemetryBuilder
}

func (p *contentLogsProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	if !p.enabled || !hasContentRecords(ld) {
		return ld, nil
	}
	content, withoutSpan := takeContentRecords(ld)
	if withoutSpan > 0 {
		// Without a span to join there is no place for content on the platform.
		p.telemetry.ProcessorSvcspanfilterContentUnmatched.Add(ctx, int64(withoutSpan), noSpanContextOpt)
		p.logger.Debug("Discarded GenAI content records without a span context", zap.Int("records", withoutSpan))
	}
	if n := content.LogRecordCount(); n > 0 {
		if sink := p.sink(); sink != nil {
			if err := sink.AddContent(ctx, content); err != nil {
				return ld, err
			}
		} else {
			p.logger.Debug("Discarded GenAI content records: no traces pipeline of this component takes content",
				zap.Int("records", n))
		}
	}
	if ld.LogRecordCount() == 0 {
		return ld, processorhelper.ErrSkipProcessingData
	}
	return ld, nil
}

// hasContentRecords is the cheap check that lets batches without content pass untouched.
func hasContentRecords(ld plog.Logs) bool {
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				if _, ok := genaicontent.IsContentRecord(lr); ok {
					return true
				}
			}
		}
	}
	return false
}

// takeContentRecords removes the content records from ld (and the scopes and resources they leave
// empty): those with a span context into content, under copies of their resource and scope.
func takeContentRecords(ld plog.Logs) (content plog.Logs, withoutSpan int) {
	content = plog.NewLogs()
	ld.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
		var destResource plog.ResourceLogs
		rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
			var destScope plog.ScopeLogs
			took := false
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				if _, ok := genaicontent.IsContentRecord(lr); !ok {
					return false
				}
				took = true
				if lr.TraceID() == (pcommon.TraceID{}) || lr.SpanID() == (pcommon.SpanID{}) {
					withoutSpan++
					return true
				}
				if destScope == (plog.ScopeLogs{}) {
					if destResource == (plog.ResourceLogs{}) {
						destResource = content.ResourceLogs().AppendEmpty()
						rl.Resource().CopyTo(destResource.Resource())
						destResource.SetSchemaUrl(rl.SchemaUrl())
					}
					destScope = destResource.ScopeLogs().AppendEmpty()
					sl.Scope().CopyTo(destScope.Scope())
					destScope.SetSchemaUrl(sl.SchemaUrl())
				}
				lr.CopyTo(destScope.LogRecords().AppendEmpty())
				return true
			})
			return took && sl.LogRecords().Len() == 0
		})
		return rl.ScopeLogs().Len() == 0
	})
	return content, withoutSpan
}
