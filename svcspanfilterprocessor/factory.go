package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

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
	inst, release := acquireInstance(set.ID)
	c := cfg.(*Config)
	p, err := newSpanFilterProcessor(set, c, next, newProcessorJournal(c, set.ID, set.Logger))
	if err == nil {
		err = inst.setTraces(p)
	}
	if err != nil {
		release()
		return nil, err
	}
	// processorhelper carries the synchronous part (and the standard processor telemetry); the
	// spans that wait for their parent are delivered by the processor's own releaser. Recovery, the
	// releaser and the final delivery follow the TRACES processor's own Start and Shutdown: the
	// collector starts it after its next consumers and stops it before them (the logs processor of
	// the same ID has no edge to the traces exporter, so its lifecycle must not drive them).
	return processorhelper.NewTraces(ctx, set, cfg, next, p.processTraces,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(func(ctx context.Context) error {
			defer release()
			return p.shutdown(ctx)
		}),
	)
}

// createLogs builds the logs side: in a logs pipeline the component takes the GenAI content records
// out and hands them to the trace memory of its traces pipeline (same component ID).
func createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	inst, release := acquireInstance(set.ID)
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		release()
		return nil, err
	}
	lp := &contentLogsProcessor{
		logger:    set.Logger,
		enabled:   cfg.(*Config).ContentJoin.Enabled,
		sink:      inst.contentSink,
		telemetry: tb,
	}
	return processorhelper.NewLogs(ctx, set, cfg, next, lp.processLogs,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithShutdown(func(context.Context) error {
			release()
			return nil
		}),
	)
}
