package svcscoreconnector

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
	component.StartFunc

	next      consumer.Logs
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	ratio     sampling.Ratio
	masker    *masking.Engine // nil when masking is off
	// now is the time a score without a time of its own is queued at.
	now func() pcommon.Timestamp

	// Metric attribute sets, built once: recording must not allocate per batch.
	emittedAttrs [numSources][numEventKinds]metric.AddOption
	droppedAttrs [numSources][numEventKinds][numDropReasons]metric.AddOption
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
		masker:    masker,
		next:      next,
		logger:    set.Logger,
		telemetry: tb,
		ratio:     sampling.NewRatio(cfg.SampleRate),
		now:       func() pcommon.Timestamp { return pcommon.NewTimestampFromTime(time.Now()) },
	}
	for s := range numSources {
		for k := range numEventKinds {
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

// Shutdown releases the component's telemetry.
func (c *scoreConnector) Shutdown(context.Context) error {
	c.telemetry.Shutdown()
	return nil
}

// batch gathers the score records made from one consumed batch, grouped under copies of the
// resource and scope they came from, and what was counted on the way.
type batch struct {
	out      plog.Logs
	queuedAt pcommon.Timestamp
	masker   *masking.Engine
	emitted  [numSources][numEventKinds]int64
	dropped  [numSources][numEventKinds][numDropReasons]int64
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

// add makes the score record of one scoring event, or counts why it made none. keepTrace is the
// sampling decision on the event's trace; experiment tells that what the event is attached to is
// part of an experiment, which sampling never drops.
func (b *batch) add(src source, ev scoringEvent, keepTrace, experiment bool,
	res pcommon.Resource, scope pcommon.InstrumentationScope, schemaURL string,
) {
	score, err := toScore(ev, b.queuedAt)
	if err != nil {
		b.dropped[src][ev.kind][dropInvalidTarget]++
		if b.firstErr == nil {
			b.firstErr = err
		}
		return
	}
	// A span's scores are exempt from sampling exactly when the span filter exempts the span
	// (svcattr.IsExperiment on its attributes), so a score never outlives its sampled-out span.
	// A log record has no span to follow: its own environment may also declare an experiment.
	declared := src == sourceLogRecord && score.Environment == svcattr.EnvironmentExperiment
	if !keepTrace && !experiment && !declared {
		b.dropped[src][ev.kind][dropSampledOut]++
		return
	}
	// Masked like the spans, before the record exists: nothing unmasked is written.
	b.masker.Score(&score, nil)
	lr := b.record(res, scope, schemaURL)
	scorerecord.Write(lr, score)
	if ev.observed != 0 {
		lr.SetObservedTimestamp(ev.observed)
	} else {
		lr.SetObservedTimestamp(b.queuedAt)
	}
	b.emitted[src][ev.kind]++
}

// keepTrace is the sampling decision on a trace; scores without a trace id (run-level) are kept.
func (c *scoreConnector) keepTrace(traceID pcommon.TraceID) bool {
	return c.ratio.KeepAll() || traceID.IsEmpty() || c.ratio.Keep(traceID)
}

// ConsumeTraces makes one score record per `svc.score` or `gen_ai.evaluation.result` span event.
func (c *scoreConnector) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	b := c.newBatch()
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
				spanSeen, keep, experiment, env := false, false, false, ""
				for e := 0; e < events.Len(); e++ {
					event := events.At(e)
					kind, ok := scoringEventKind(event.Name())
					if !ok {
						continue
					}
					if !spanSeen {
						spanSeen = true
						keep = c.keepTrace(span.TraceID())
						experiment = !keep && svcattr.IsExperiment(span.Attributes())
						env = environmentOf(span.Attributes())
						if env == "" {
							env = resourceEnv
						}
					}
					b.add(sourceSpanEvent, scoringEvent{
						kind:        kind,
						attrs:       event.Attributes(),
						traceID:     span.TraceID(),
						spanID:      span.SpanID(),
						time:        event.Timestamp(),
						index:       e,
						environment: env,
					}, keep, experiment, rs.Resource(), ss.Scope(), ss.SchemaUrl())
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
				kind, ok := scoringEventKind(eventName(lr))
				if !ok {
					continue
				}
				eventTime := lr.Timestamp()
				if eventTime == 0 {
					// Set by the emitting SDK: the time the record was queued.
					eventTime = lr.ObservedTimestamp()
				}
				keep := c.keepTrace(lr.TraceID())
				b.add(sourceLogRecord, scoringEvent{
					kind:        kind,
					attrs:       lr.Attributes(),
					traceID:     lr.TraceID(),
					spanID:      lr.SpanID(),
					time:        eventTime,
					observed:    lr.ObservedTimestamp(),
					index:       k,
					environment: resourceEnv,
				}, keep, !keep && svcattr.IsExperiment(lr.Attributes()), rl.Resource(), sl.Scope(), sl.SchemaUrl())
			}
		}
	}
	return c.flush(ctx, b)
}

func eventName(lr plog.LogRecord) string {
	if name := lr.EventName(); name != "" {
		return name
	}
	if v, ok := lr.Attributes().Get(eventNameAttr); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

// flush hands the batch's score records to the next consumer and records the batch's counts.
// The next consumer's error is returned as it is, so a permanent error stays permanent and a
// retried batch yields the same score ids.
func (c *scoreConnector) flush(ctx context.Context, b *batch) error {
	var dropped int64
	for s := range numSources {
		for k := range numEventKinds {
			for r := range numDropReasons {
				if n := b.dropped[s][k][r]; n > 0 {
					c.telemetry.SvcscoreScoresDropped.Add(ctx, n, c.droppedAttrs[s][k][r])
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
		for k := range numEventKinds {
			if n := b.emitted[s][k]; n > 0 {
				c.telemetry.SvcscoreScoresEmitted.Add(ctx, n, c.emittedAttrs[s][k])
			}
		}
	}
	return nil
}
