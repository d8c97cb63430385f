package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"
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
// records follow their trace with outcome sampling (holdScores); other records go on unchanged.
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

// processLogs skips the call when what the memory took leaves it empty.
func (lp *logsProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	took, err := lp.takeContent(ctx, ld)
	if err == nil && lp.traces != nil && (!took || ld.LogRecordCount() > 0) {
		took, err = lp.holdScores(ctx, ld)
	}
	if err == nil && took && ld.LogRecordCount() == 0 {
		return ld, processorhelper.ErrSkipProcessingData
	}
	return ld, err
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
		id, err := j.Append(ctx, journal.KindContent, now, tracememory.Metadata(info), payload)
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

// startScoreReleaser starts the releaser of the score records the memory holds for this pipeline
// until their trace is kept. Without outcome sampling (known once the traces processor started: the
// collector starts the two in no set order, and receivers last) none runs.
func (lp *logsProcessor) startScoreReleaser(p *spanFilterProcessor) {
	lp.once.Do(func() {
		lp.stop, lp.stopped = make(chan struct{}), make(chan struct{})
		go release(lp.stop, lp.stopped, time.Second, p.mem.ScoreWake(), func() {}, func() {
			lp.deliverScores(context.Background(), p.mem.TakeReadyScores(lp), false) // refused: again at the next tick
		})
	})
}

// holdScores takes the score records of ld that follow their trace (false: none do, outcome
// sampling is off): those of undecided traces are held, of dropped traces removed; the rest stays
// in ld. A retryable error refuses the call.
func (lp *logsProcessor) holdScores(ctx context.Context, ld plog.Logs) (bool, error) {
	p := lp.traces()
	if p == nil || !p.mem.ScoresFollow() {
		return false, nil
	}
	if !p.running.Load() {
		return true, errNotRunning
	}
	lp.startScoreReleaser(p)
	held, dropped, err := p.mem.AddScores(client.FromContext(ctx), lp, ld)
	if err != nil {
		if !errors.Is(err, tracememory.ErrContentOverloaded) {
			lp.logger.Warn("Could not hold score records for their trace's decision; the logs request is refused "+
				"for the client to retry", zap.Error(err))
		}
		return true, err
	}
	if held+dropped > 0 {
		lp.logger.Debug("Score records follow their trace's decision", zap.Int("held", held), zap.Int("dropped", dropped))
	}
	lp.deliverScores(ctx, p.mem.TakeReadyScores(lp), false) // released by this call's decisions
	return true, nil
}

// deliverScores hands released score records on; a retryable refusal puts the rest back for the
// releaser, or with tryAll counts the records refused.
func (lp *logsProcessor) deliverScores(ctx context.Context, ds []*tracememory.ScoreDelivery, tryAll bool) int {
	refused := 0
	mem := lp.traces().mem
	for i, d := range ds {
		err := lp.next.ConsumeLogs(client.NewContext(ctx, d.Info), d.Logs)
		switch {
		case err == nil:
			mem.ScoresDelivered(d)
		case consumererror.IsPermanent(err):
			lp.logger.Error("Score records were lost: the next consumer refused them permanently",
				zap.Int("records", d.Records), zap.Error(err))
			mem.ScoresDelivered(d)
		case tryAll:
			refused += d.Records
		default:
			lp.logger.Warn("The next consumer refused released score records; they will be retried",
				zap.Int("records", d.Records), zap.Error(err))
			mem.RequeueScores(ds[i:]...)
			return 0
		}
	}
	return refused
}

// shutdown stops the releaser and delivers what is released; with on_shutdown: release (or no
// journal) it first decides the traces that hold score records, as the traces side does for spans.
func (lp *logsProcessor) shutdown(ctx context.Context) error {
	p := lp.traces()
	if p == nil || !p.mem.ScoresFollow() {
		return nil
	}
	lp.startScoreReleaser(p) // records recovered from the journal may wait for this pipeline
	close(lp.stop)
	select {
	case <-lp.stopped:
	case <-ctx.Done(): // the releaser is stuck in the next consumer; journaled records stay
		return ctx.Err()
	}
	journaled := p.journal != journal.Nop
	final := p.mem.DrainScores
	if journaled && p.cfg.TraceIntegrity.OnShutdown == onShutdownKeep {
		final = p.mem.TakeReadyScores
	}
	switch lost := lp.deliverScores(ctx, final(lp), true); {
	case lost > 0 && journaled:
		lp.logger.Warn("The next consumer still refused released score records at shutdown; they stay in the "+
			"journal and are delivered after the next start", zap.Int("records", lost))
	case lost > 0:
		lp.logger.Error("Score records were lost: the next consumer still refused them at shutdown", zap.Int("records", lost))
		return fmt.Errorf("svcspanfilter: %d score records released at shutdown could not be delivered", lost)
	}
	return nil
}
