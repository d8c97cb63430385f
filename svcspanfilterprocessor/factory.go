package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
)

// NewFactory returns the factory of the svcspanfilter processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithTraces(createTraces, metadata.TracesStability),
		processor.WithLogs(createLogs, metadata.LogsStability),
	)
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	shared, err := instances.LoadOrStore(set.ID, newSpanFilterInstance(set.ID))
	if err != nil {
		return nil, err
	}
	c := cfg.(*Config)
	p, err := newSpanFilterProcessor(set, c, next, newProcessorJournal(c, set.ID, set.Logger))
	if err == nil {
		err = shared.Value().setTraces(p)
	}
	if err != nil {
		shared.release()
		return nil, err
	}
	// processorhelper carries the synchronous part (and the standard processor telemetry); the
	// spans that wait for their parent are delivered by the processor's own releaser. Recovery, the
	// releaser and the final delivery follow the TRACES processor's own Start and Shutdown: the
	// collector starts it after its next consumers and stops it before them (the logs processor of
	// the same ID has no edge to the traces exporter, so its lifecycle must not drive them).
	return processorhelper.NewTraces(ctx, set, cfg, next, p.processTraces,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithStart(func(ctx context.Context, host component.Host) error {
			if c.Sampling != nil { // the sampling extension's rate, before any span
				decider, err := sampling.FromExtensions(host.GetExtensions(), *c.Sampling)
				if err != nil {
					return err
				}
				p.filter.sampler = decider.Ratio()
				p.filter.experiments = decider
			}
			if err := shared.Start(ctx, host); err != nil {
				return err
			}
			return p.start(ctx, host)
		}),
		processorhelper.WithShutdown(func(ctx context.Context) error {
			return errors.Join(p.shutdown(ctx), shared.Shutdown(ctx))
		}),
	)
}

// createLogs builds the logs side: in a logs pipeline the component takes the GenAI content records
// out and hands them to the trace memory of its traces pipeline (same component ID).
func createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	shared, err := instances.LoadOrStore(set.ID, newSpanFilterInstance(set.ID))
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		shared.release()
		return nil, err
	}
	lp := &contentLogsProcessor{
		logger:    set.Logger,
		enabled:   cfg.(*Config).ContentJoin.Enabled,
		sink:      shared.Value().contentSink,
		telemetry: tb,
	}
	return processorhelper.NewLogs(ctx, set, cfg, next, lp.processLogs,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithStart(shared.Start),
		processorhelper.WithShutdown(shared.Shutdown),
	)
}
