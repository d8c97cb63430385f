package svcscoreconnector

import (
	"context"
	"sync"
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

	"github.com/svc/svc-collector/pkg/masking"
	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/pkg/svcattr"
	"github.com/svc/svc-collector/svcscoreconnector/internal/metadata"
)

// source is where a scoring event came from; a metric attribute.
type source int

const (
	sourceSpanEvent source = iota
	sourceLogRecord
	numSources
)

var sourceNames = [numSources]string{sourceSpanEvent: "span_event", sourceLogRecord: "log_record"}

// dropReason is why a scoring event made no score record; a metric attribute.
type dropReason int

const (
	dropSampledOut dropReason = iota
	dropInvalidTarget
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{dropSampledOut: "sampled_out", dropInvalidTarget: "invalid_target"}

// scoreConnector turns scoring events into score records. One type serves both the traces → logs
// and the logs → logs pipelines; it never changes the data it consumes.
type scoreConnector struct {
	next      consumer.Logs
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	masker    *masking.Engine // nil when masking is off
	// decider is the sampling decision: the sampling extension's when the config names one (set at
	// Start, before any data); else one of its own whose set of experiment traces is shared with
	// the other instance of this connector id (traces_to_logs and logs_to_logs), released at
	// Shutdown.
	decider            *sampling.Decider
	releaseExperiments func()
	samplingID         *component.ID
	// now is the time a score without a time of its own is queued at.
	now func() pcommon.Timestamp

	// Metric attribute sets, built once: recording must not allocate per batch.
	emittedAttrs [numSources][scorerecord.NumEventKinds]metric.AddOption
	droppedAttrs [numSources][scorerecord.NumEventKinds][numDropReasons]metric.AddOption
}

var (
	_ connector.Traces = (*scoreConnector)(nil)
	_ connector.Logs   = (*scoreConnector)(nil)
)

func newScoreConnector(set connector.Settings, cfg *Config, next consumer.Logs) (*scoreConnector, error) {
	masker, err := masking.New(cfg.Masking)
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	c := &scoreConnector{
		masker:     masker,
		next:       next,
		logger:     set.Logger,
		telemetry:  tb,
		now:        func() pcommon.Timestamp { return pcommon.NewTimestampFromTime(time.Now()) },
		samplingID: cfg.Sampling,
	}
	experiments, release := acquireExperimentTraces(set.ID)
	c.decider = sampling.NewDecider(sampling.NewRatio(cfg.SampleRate), experiments)
	c.releaseExperiments = sync.OnceFunc(release)
	for s := range numSources {
		for k := range scorerecord.NumEventKinds {
			src := attribute.String("source", sourceNames[s])
			ev := attribute.String("event", k.String())
			c.emittedAttrs[s][k] = metric.WithAttributeSet(attribute.NewSet(src, ev))
			for r := range numDropReasons {
				c.droppedAttrs[s][k][r] = metric.WithAttributeSet(attribute.NewSet(src, ev, attribute.String("reason", dropReasonNames[r])))
			}
		}
	}
	return c, nil
}

// Capabilities: the connector reads its input and builds new logs.
func (c *scoreConnector) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// Start takes the sampling extension's decision when the config names one.
func (c *scoreConnector) Start(_ context.Context, host component.Host) error {
	decider, err := sampling.ScoreDecider(host.GetExtensions(), c.samplingID, c.decider)
	if err != nil {
		return err
	}
	if decider != c.decider {
		c.decider = decider
		c.releaseExperiments() // its own set is not used
	}
	return nil
}

// Shutdown releases the component's telemetry.
func (c *scoreConnector) Shutdown(context.Context) error {
	c.releaseExperiments()
	c.telemetry.Shutdown()
	return nil
}

// batch gathers the score records made from one consumed batch, grouped under copies of the
// resource and scope they came from, and what was counted on the way.
type batch struct {
	out      plog.Logs
	queuedAt pcommon.Timestamp
	masker   *masking.Engine
	emitted  [numSources][scorerecord.NumEventKinds]int64
	dropped  [numSources][scorerecord.NumEventKinds][numDropReasons]int64
	// firstErr is the first invalid event of the batch, logged once with the count.
	firstErr error

	rl                      plog.ResourceLogs
	sl                      plog.ScopeLogs
	haveResource, haveScope bool
}

func (c *scoreConnector) newBatch() *batch {
	return &batch{out: plog.NewLogs(), queuedAt: c.now(), masker: c.masker}
}

func (b *batch) startResource() { b.haveResource, b.haveScope = false, false }
func (b *batch) startScope()    { b.haveScope = false }

// record appends an empty log record under the current resource and scope, creating them on
// the first record so that a resource without scores leaves nothing behind.
func (b *batch) record(res pcommon.Resource, scope pcommon.InstrumentationScope, schemaURL string) plog.LogRecord {
	if !b.haveResource {
		b.rl = b.out.ResourceLogs().AppendEmpty()
		res.CopyTo(b.rl.Resource())
		b.haveResource = true
	}
	if !b.haveScope {
		b.sl = b.rl.ScopeLogs().AppendEmpty()
		scope.CopyTo(b.sl.Scope())
		b.sl.SetSchemaUrl(schemaURL)
		b.haveScope = true
	}
	return b.sl.LogRecords().AppendEmpty()
}

// add makes the score record of one scoring event, or counts why it made none. keep is the
// sampling decision on the event (its trace kept, or an experiment, which sampling never drops).
func (b *batch) add(src source, ev scorerecord.Event, observed pcommon.Timestamp, keep bool,
	res pcommon.Resource, scope pcommon.InstrumentationScope, schemaURL string,
) {
	score, err := ev.Score(b.queuedAt)
	if err != nil {
		// The exporter would refuse the record alike (scorerecord.Normalize on both sides).
		b.dropped[src][ev.Kind][dropInvalidTarget]++
		if b.firstErr == nil {
			b.firstErr = err
		}
		return
	}
	// A log record has no span to follow: its own score environment may also declare an
	// experiment.
	declared := src == sourceLogRecord && score.Environment == svcattr.EnvironmentExperiment
	if !keep && !declared {
		b.dropped[src][ev.Kind][dropSampledOut]++
		return
	}
	// Masked like the spans, before the record exists: nothing unmasked is written.
	b.masker.Score(&score, nil)
	lr := b.record(res, scope, schemaURL)
	scorerecord.Write(lr, score)
	if observed != 0 {
		lr.SetObservedTimestamp(observed)
	} else {
		lr.SetObservedTimestamp(b.queuedAt)
	}
	b.emitted[src][ev.Kind]++
}

// ConsumeTraces makes one score record per `svc.score` or `gen_ai.evaluation.result` span event.
// The scores of a sampled-out trace are dropped, unless a span of the trace (in this batch or
// an earlier one) marked it as an experiment.
func (c *scoreConnector) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	b := c.newBatch()
	now := b.queuedAt.AsTime()
	c.decider.MarkExperiments(td, now)
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		b.startResource()
		resourceEnv := environmentOf(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			b.startScope()
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				events := span.Events()
				// Per-span facts, worked out at the span's first scoring event only.
				spanSeen, keep, env := false, false, ""
				for e := 0; e < events.Len(); e++ {
					event := events.At(e)
					kind, ok := scorerecord.KindOf(event.Name())
					if !ok {
						continue
					}
					if !spanSeen {
						spanSeen = true
						keep = c.decider.Keep(span.TraceID(), false, now)
						env = environmentOf(span.Attributes())
						if env == "" {
							env = resourceEnv
						}
					}
					b.add(sourceSpanEvent, scorerecord.Event{
						Kind:        kind,
						Attrs:       event.Attributes(),
						TraceID:     span.TraceID(),
						SpanID:      span.SpanID(),
						Time:        event.Timestamp(),
						SpanIndex:   e,
						Environment: env,
					}, 0, keep, rs.Resource(), ss.Scope(), ss.SchemaUrl())
				}
			}
		}
	}
	return c.flush(ctx, b)
}

// ConsumeLogs makes one score record per log record whose event name (LogRecord.EventName, or
// the `event.name` attribute of older SDKs) is `svc.score` or `gen_ai.evaluation.result`; score
// records pass through normalised. Other log records are not scores and are not forwarded.
func (c *scoreConnector) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	b := c.newBatch()
	now := b.queuedAt.AsTime()
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		b.startResource()
		resourceEnv := environmentOf(rl.Resource().Attributes())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			b.startScope()
			records := sl.LogRecords()
			for k := 0; k < records.Len(); k++ {
				lr := records.At(k)
				kind, ok := scorerecord.KindOf(scorerecord.LogRecordEventName(lr))
				if !ok {
					continue
				}
				eventTime := lr.Timestamp()
				if eventTime == 0 {
					// Set by the emitting SDK: the time the record was queued.
					eventTime = lr.ObservedTimestamp()
				}
				// A record with experiment attributes is kept; it does not mark its trace: the
				// span filter, which sees spans only, could not follow such a marking.
				keep := c.decider.Keep(lr.TraceID(), false, now) || svcattr.IsExperiment(lr.Attributes())
				b.add(sourceLogRecord, scorerecord.Event{
					Kind:        kind,
					Attrs:       lr.Attributes(),
					TraceID:     lr.TraceID(),
					SpanID:      lr.SpanID(),
					Time:        eventTime,
					LogRecord:   true,
					Environment: resourceEnv,
				}, lr.ObservedTimestamp(), keep, rl.Resource(), sl.Scope(), sl.SchemaUrl())
			}
		}
	}
	return c.flush(ctx, b)
}

// flush hands the batch's score records to the next consumer and records the batch's counts.
// The next consumer's error is returned as it is, so a permanent error stays permanent and a
// retried batch yields the same score ids.
func (c *scoreConnector) flush(ctx context.Context, b *batch) error {
	var dropped int64
	for s := range numSources {
		for k := range scorerecord.NumEventKinds {
			for r := range numDropReasons {
				if n := b.dropped[s][k][r]; n > 0 {
					c.telemetry.ConnectorSvcscoreScoresDropped.Add(ctx, n, c.droppedAttrs[s][k][r])
					if r == dropInvalidTarget {
						dropped += n
					}
				}
			}
		}
	}
	if b.firstErr != nil {
		c.logger.Warn("dropped scoring events with an invalid target",
			zap.Int64("dropped", dropped), zap.Error(b.firstErr))
	}
	if b.out.LogRecordCount() == 0 {
		return nil
	}
	if err := c.next.ConsumeLogs(ctx, b.out); err != nil {
		return err
	}
	for s := range numSources {
		for k := range scorerecord.NumEventKinds {
			if n := b.emitted[s][k]; n > 0 {
				c.telemetry.ConnectorSvcscoreScoresEmitted.Add(ctx, n, c.emittedAttrs[s][k])
			}
		}
	}
	return nil
}

// environmentOf is the svc.environment attribute of a span or resource, "" when absent.
func environmentOf(attrs pcommon.Map) string {
	if v, ok := attrs.Get(svcattr.Environment); ok {
		return v.AsString()
	}
	return ""
}
