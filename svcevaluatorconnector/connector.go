package svcevaluatorconnector

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/observation"
	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/pkg/svcattr"
	"github.com/svc/svc-collector/svcevaluatorconnector/internal/metadata"
)

// ScopeName is the instrumentation scope of the score records the connector makes.
const ScopeName = "github.com/svc/svc-collector/svcevaluatorconnector"

// MetadataEvaluator is the score metadata key that names the evaluator that made a score.
const MetadataEvaluator = "evaluator"

const metadataEvaluatorAttr = scorerecord.AttrMetadataPrefix + MetadataEvaluator

// idNamespace starts every score id of the connector, so that no id of an evaluator can equal
// an id derived for another kind of score.
const idNamespace = "svcevaluator"

// evaluatorConnector runs the evaluators on every span it consumes and emits their scores. It
// never changes the spans.
type evaluatorConnector struct {
	next       consumer.Logs
	logger     *zap.Logger
	telemetry  *metadata.TelemetryBuilder
	evaluators []*evaluator
	// decider is the sampling decision: the sampling extension's when samplingID names one (set
	// at Start, before any data), else the connector's own.
	decider    *sampling.Decider
	samplingID *component.ID

	// Metric attribute sets, built once per evaluator: recording must not allocate per batch.
	evaluatorAttrs []metric.AddOption
	outcomeAttrs   [][numOutcomes]metric.AddOption
}

var _ connector.Traces = (*evaluatorConnector)(nil)

func newEvaluatorConnector(set connector.Settings, cfg *Config, next consumer.Logs) (*evaluatorConnector, error) {
	evs, err := compileEvaluators(cfg.Evaluators)
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	c := &evaluatorConnector{
		next:       next,
		logger:     set.Logger,
		telemetry:  tb,
		evaluators: evs,
		decider: sampling.NewDecider(sampling.NewRatio(cfg.SampleRate),
			sampling.NewExperimentTraces(sampling.DefaultExperimentTracesMax, sampling.DefaultExperimentTracesTTL)),
		samplingID:     cfg.Sampling,
		evaluatorAttrs: make([]metric.AddOption, len(evs)),
		outcomeAttrs:   make([][numOutcomes]metric.AddOption, len(evs)),
	}
	for i, ev := range evs {
		name := attribute.String("evaluator", ev.name)
		c.evaluatorAttrs[i] = metric.WithAttributeSet(attribute.NewSet(name))
		for o := range numOutcomes {
			c.outcomeAttrs[i][o] = metric.WithAttributeSet(attribute.NewSet(name, attribute.String("outcome", outcomeNames[o])))
		}
	}
	return c, nil
}

// Capabilities: the connector reads spans and builds new logs.
func (c *evaluatorConnector) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// Start takes the sampling extension's decision when the config names one.
func (c *evaluatorConnector) Start(_ context.Context, host component.Host) (err error) {
	c.decider, err = sampling.ScoreDecider(host.GetExtensions(), c.samplingID, c.decider)
	return err
}

// Shutdown releases the component's telemetry.
func (c *evaluatorConnector) Shutdown(context.Context) error {
	c.telemetry.Shutdown()
	return nil
}

// batch gathers the scores of one consumed batch and the counts of its evaluations.
type batch struct {
	now      pcommon.Timestamp // when the batch arrived: the records' observed time
	out      plog.Logs
	outcomes [][numOutcomes]int64
	scored   []int64
	// firstErr is the batch's first evaluation error, logged once with the count.
	firstErr     error
	firstErrEval string
	rl           plog.ResourceLogs
	sl           plog.ScopeLogs
	haveScope    bool
}

// record appends an empty log record under a copy of the span's resource, creating the
// resource and scope on the resource's first score.
func (b *batch) record(res pcommon.Resource) plog.LogRecord {
	if !b.haveScope {
		b.rl = b.out.ResourceLogs().AppendEmpty()
		res.CopyTo(b.rl.Resource())
		b.sl = b.rl.ScopeLogs().AppendEmpty()
		b.sl.Scope().SetName(ScopeName)
		b.haveScope = true
	}
	return b.sl.LogRecords().AppendEmpty()
}

// ConsumeTraces runs every evaluator on every span of td and hands the scores, with the
// request's context (its client metadata: the pass-through credentials), to the next consumer.
func (c *evaluatorConnector) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if len(c.evaluators) == 0 {
		return nil
	}
	now := time.Now()
	c.decider.MarkExperiments(td, now)
	b := &batch{
		now:      pcommon.NewTimestampFromTime(now),
		out:      plog.NewLogs(),
		outcomes: make([][numOutcomes]int64, len(c.evaluators)),
		scored:   make([]int64, len(c.evaluators)),
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		b.haveScope = false
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				v := observation.NewView(spans.At(k), rs.Resource(), ss.Scope())
				c.evaluateSpan(ctx, b, &v, spanRef{rs: rs, ss: ss}, now)
			}
		}
	}
	if err := c.flush(ctx, b); err != nil {
		return err
	}
	return nil
}

// evaluateSpan runs the evaluators on one observation.
func (c *evaluatorConnector) evaluateSpan(ctx context.Context, b *batch, v *observation.View, ref spanRef, now time.Time) {
	keep, decided := true, false
	for i, ev := range c.evaluators {
		if !ev.filter.Match(v) {
			continue
		}
		if !decided {
			keep, decided = c.decider.Keep(v.Span.TraceID(), false, now), true
		}
		if !keep {
			b.outcomes[i][outcomeSampledOut]++
			continue
		}
		r, o := ev.evaluate(ctx, v, ref)
		b.outcomes[i][o]++
		if r.err != nil && b.firstErr == nil {
			b.firstErr, b.firstErrEval = r.err, ev.name
		}
		if o != outcomeScored {
			continue
		}
		c.writeScore(b.record(v.Resource), ev, v, r, b.now)
		b.scored[i]++
	}
}

// writeScore fills lr with the score record of one evaluation. Its id is derived from the trace
// id, the span id and the evaluator's name: a resent span makes the same score again, which the
// platform stores once.
func (c *evaluatorConnector) writeScore(lr plog.LogRecord, ev *evaluator, v *observation.View, r result, now pcommon.Timestamp) {
	span := v.Span
	s := scorerecord.Score{
		ID:            scorerecord.KeyedID(idNamespace, span.TraceID(), span.SpanID(), ev.name),
		TraceID:       span.TraceID(),
		ObservationID: span.SpanID(),
		Name:          ev.scoreName,
		Value:         pcommon.NewValueDouble(r.value),
		DataType:      ev.dataType,
		Comment:       r.comment,
		Environment:   environment(v),
		Timestamp:     span.EndTimestamp(),
	}
	if ev.traceLevel {
		s.ObservationID = pcommon.SpanID{}
	}
	if s.Timestamp == 0 {
		s.Timestamp = now
	}
	scorerecord.Write(lr, s)
	// The score's metadata.evaluator, written as the record attribute it becomes: no map to
	// build and copy per score.
	lr.Attributes().PutStr(metadataEvaluatorAttr, ev.name)
	lr.SetObservedTimestamp(now)
}

// environment is svc.environment of the span, else of its resource, else "" (the platform's
// default), as for event scores.
func environment(v *observation.View) string {
	if e, ok := v.Span.Attributes().Get(svcattr.Environment); ok && e.AsString() != "" {
		return e.AsString()
	}
	if e, ok := v.Resource.Attributes().Get(svcattr.Environment); ok {
		return e.AsString()
	}
	return ""
}

// flush hands the batch's scores to the next consumer and records the batch's counts. The next
// consumer's error is returned as it is: a retried batch yields the same score ids.
func (c *evaluatorConnector) flush(ctx context.Context, b *batch) error {
	if b.firstErr != nil {
		var failed int64
		for i := range c.evaluators {
			failed += b.outcomes[i][outcomeError]
		}
		c.logger.Warn("evaluations failed", zap.Int64("failed", failed),
			zap.String("first_evaluator", b.firstErrEval), zap.Error(b.firstErr))
	}
	for i := range c.evaluators {
		for o := range numOutcomes {
			if n := b.outcomes[i][o]; n > 0 {
				c.telemetry.ConnectorSvcevaluatorEvaluations.Add(ctx, n, c.outcomeAttrs[i][o])
			}
		}
		if n := b.outcomes[i][outcomeError]; n > 0 {
			c.telemetry.ConnectorSvcevaluatorEvaluationErrors.Add(ctx, n, c.evaluatorAttrs[i])
		}
	}
	if b.out.LogRecordCount() == 0 {
		return nil
	}
	if err := c.next.ConsumeLogs(ctx, b.out); err != nil {
		return err
	}
	for i := range c.evaluators {
		if n := b.scored[i]; n > 0 {
			c.telemetry.ConnectorSvcevaluatorScores.Add(ctx, n, c.evaluatorAttrs[i])
		}
	}
	return nil
}
