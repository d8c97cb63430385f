package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/genaicontent"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// noSpanContextOpt: content records without a trace id or span id (the memory has the other reasons).
var noSpanContextOpt = reasonOpt("no_span_context")

// contentSink takes a logs call's content records: durable before it returns, or refused retryably.
type contentSink interface {
	AddContent(ctx context.Context, content plog.Logs) error
}

// logsProcessor takes content records out of the logs pipeline for the trace memory and has score
// records follow their trace with outcome sampling (scores.go); other records go on unchanged.
type logsProcessor struct {
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	enabled   bool
	sink      func() contentSink
	next      consumer.Logs
	traces    func() *spanFilterProcessor // the traces processor of the component ID, nil without one

	once          sync.Once // starts the score releaser, when score records first follow
	stop, stopped chan struct{}
}

// processLogs writes ahead all the call may hold (its score records, then its content) before it
// applies any: a refused call changed nothing, so its resend is taken once. It skips the call when
// what the memory took leaves it empty.
func (lp *logsProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	scores, follow, err := lp.planScores(ctx, ld)
	if err != nil {
		return ld, err
	}
	took, err := lp.takeContent(ctx, ld) // written, then applied: the last write of the call
	if err != nil {
		scores.Cancel()
		return ld, err
	}
	lp.applyScores(ctx, scores, ld)
	if (took || follow) && ld.LogRecordCount() == 0 {
		return ld, processorhelper.ErrSkipProcessingData
	}
	return ld, nil
}

// takeContent hands the content records of ld to the sink; took: ld had some.
func (lp *logsProcessor) takeContent(ctx context.Context, ld plog.Logs) (took bool, err error) {
	if !lp.enabled {
		return false, nil
	}
	content, withoutSpan := takeContentRecords(ld)
	if content == (plog.Logs{}) {
		return false, nil
	}
	if withoutSpan > 0 {
		lp.telemetry.ProcessorSvcspanfilterContentUnmatched.Add(ctx, int64(withoutSpan), noSpanContextOpt)
		lp.logger.Debug("Discarded GenAI content records without a span context", zap.Int("records", withoutSpan))
	}
	if n := content.LogRecordCount(); n > 0 {
		if sink := lp.sink(); sink != nil {
			return true, sink.AddContent(ctx, content)
		}
		lp.logger.Debug("Discarded GenAI content records: no traces pipeline of this component takes content",
			zap.Int("records", n))
	}
	return true, nil
}

// takeContentRecords removes the content records from ld, and what they leave empty: those with a
// span context into content, under copies of their resource and scope (the zero Logs without any).
func takeContentRecords(ld plog.Logs) (content plog.Logs, withoutSpan int) {
	for _, rl := range ld.ResourceLogs().All() {
		var destResource plog.ResourceLogs
		rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
			var destScope plog.ScopeLogs
			took := false
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				if _, ok := genaicontent.IsContentRecord(lr); !ok {
					return false
				}
				took = true
				if content == (plog.Logs{}) {
					content = plog.NewLogs()
				}
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
	}
	if content != (plog.Logs{}) {
		ld.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool { return rl.ScopeLogs().Len() == 0 })
	}
	return content, withoutSpan
}

// contentJoin is the trace memory's hook: which spans wait for content and how it goes onto them.
type contentJoin struct{ *genaicontent.Candidates }

// newContentJoin is the hook for cfg; nil (no span waits for content) when the join is off.
func newContentJoin(cfg ContentJoinConfig) tracememory.Join {
	if !cfg.Enabled {
		return nil
	}
	return &contentJoin{genaicontent.NewCandidates(cfg.InstrumentationScopes)}
}

func (j *contentJoin) ScopeAwaitsContent(s pcommon.InstrumentationScope) bool { return j.InScope(s) }

func (j *contentJoin) AwaitsContent(span ptrace.Span) bool { return j.IsCandidateSpan(span) }

// Complete: the output of the call arrived, so nothing more is expected.
func (j *contentJoin) Complete(pieces []tracememory.Content) bool {
	output := func(c tracememory.Content) bool { return c.(spanContent).HasOutput() }
	return slices.ContainsFunc(pieces, output)
}

func (j *contentJoin) Apply(span ptrace.Span, pieces []tracememory.Content) bool {
	if len(pieces) == 1 { // the common case, without a copy
		return genaicontent.Apply(span, pieces[0].(spanContent).Content)
	}
	all := &genaicontent.Content{}
	for _, p := range pieces {
		all.Merge(p.(spanContent).Content)
	}
	return genaicontent.Apply(span, all)
}

// spanContent is the content of one span from one logs call; it joins only its tenant's spans.
type spanContent struct {
	*genaicontent.Content
	tenant string
}

func (s spanContent) Size() int64    { return int64(s.Bytes()) }
func (s spanContent) Tenant() string { return s.tenant }

type spanKey struct {
	trace pcommon.TraceID
	span  pcommon.SpanID
}

// contentBySpan parses the content records of ld into one Content per span, in first-seen order.
func contentBySpan(ld plog.Logs, tenant string) ([]spanKey, map[spanKey]spanContent) {
	var keys []spanKey
	bySpan := map[spanKey]spanContent{}
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				key := spanKey{trace: lr.TraceID(), span: lr.SpanID()}
				c, ok := bySpan[key]
				if !ok {
					c = spanContent{&genaicontent.Content{}, tenant}
				}
				if c.Add(lr) && !ok {
					bySpan[key] = c
					keys = append(keys, key)
				}
			}
		}
	}
	return keys, bySpan
}

// contentOutcomes counts spans by what the memory did with their content.
type contentOutcomes [tracememory.ContentDiscarded + 1]int

// addContent makes one logs call's content records durable (one record in j), then gives them to m.
func addContent(ctx context.Context, m *tracememory.Memory, j journal.Journal, ld plog.Logs, now time.Time) (contentOutcomes, error) {
	var out contentOutcomes
	info := client.FromContext(ctx)
	keys, bySpan := contentBySpan(ld, tracememory.TenantOf(info))
	if len(keys) == 0 {
		return out, nil
	}
	var size int64 // pushed back before anything is durable when eviction cannot make room
	for _, c := range bySpan {
		size += c.Size()
	}
	if err := m.ContentRoom(size); err != nil {
		return out, err
	}
	var ref *tracememory.RecordRef
	if j != journal.Nop {
		payload, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		if err != nil {
			return out, consumererror.NewPermanent(fmt.Errorf("svcspanfilter: content records: %w", err))
		}
		// The request's metadata tells after a restart whose content it is (TenantOf).
		id, err := j.Append(ctx, journal.KindContent, now, journal.Metadata(info), payload)
		if err != nil {
			return out, fmt.Errorf("svcspanfilter: content records could not be made durable, retry: %w", err)
		}
		ref = m.NewRecordRef(id, len(keys))
	}
	for _, k := range keys {
		out[m.AddContent(k.trace, k.span, bySpan[k], ref)]++
	}
	return out, nil
}

// recoverContent gives the memory the content records a previous process left; their wait restarts.
// With the content join off now they are discarded: a memory without a join cannot join them.
func recoverContent(m *tracememory.Memory, records []journal.Record, joinOn bool) (contentOutcomes, error) {
	var out contentOutcomes
	var errs []error
	for _, rec := range records {
		if rec.Kind != journal.KindContent {
			continue
		}
		var keys []spanKey
		var bySpan map[spanKey]spanContent
		if !joinOn {
			out[tracememory.ContentDiscarded]++
		} else if ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(rec.Payload); err != nil {
			errs = append(errs, fmt.Errorf("journal record %d: %w", rec.ID, err))
		} else {
			info := client.Info{Metadata: client.NewMetadata(rec.Metadata)}
			keys, bySpan = contentBySpan(ld, tracememory.TenantOf(info))
		}
		if len(keys) == 0 { // nothing to give: the record is done
			m.NewRecordRef(rec.ID, 1).Done(1)
			continue
		}
		ref := m.NewRecordRef(rec.ID, len(keys))
		for _, k := range keys {
			out[m.AddContent(k.trace, k.span, bySpan[k], ref)]++
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("svcspanfilter: %d content journal records could not be read: %v", len(errs), errs)
	}
	return out, nil
}

// AddContent makes the traces processor the logs processor's contentSink.
func (p *spanFilterProcessor) AddContent(ctx context.Context, ld plog.Logs) error {
	if !p.running.Load() {
		return errNotRunning
	}
	out, err := addContent(ctx, p.mem, p.journal, ld, p.now())
	if err != nil {
		p.logger.Warn("Could not take GenAI content records; the logs request is refused for the client to retry",
			zap.Error(err))
		return err
	}
	if n := out[tracememory.ContentDiscarded]; n > 0 {
		p.logger.Debug("Discarded GenAI content records: their span was dropped or already went on",
			zap.Int("spans", n))
	}
	return nil
}
