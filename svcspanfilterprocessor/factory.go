package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

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
	c := cfg.(*Config)
	p, err := newSpanFilterProcessor(set, c, next, newProcessorJournal(c, set.ID, set.Logger))
	if err != nil {
		return nil, err
	}
	_, release, err := acquireInstance(set.ID, p)
	if err != nil {
		return nil, err
	}
	// The memory follows the TRACES processor's Start and Shutdown: the collector starts it after its
	// next consumers and stops it before them (the logs processor of the same ID has no such edge).
	return processorhelper.NewTraces(ctx, set, cfg, next, p.processTraces,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(func(ctx context.Context) error {
			defer release()
			return p.shutdown(ctx)
		}),
	)
}

// createLogs builds the logs side: it hands content records to the memory of the same component ID.
func createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	inst, release, _ := acquireInstance(set.ID, nil) // without traces it cannot fail
	lp := &logsProcessor{
		logger:    set.Logger,
		telemetry: tb,
		enabled:   cfg.(*Config).ContentJoin.Enabled,
		sink:      inst.contentSink,
		next:      next,
		traces:    inst.traces.Load,
	}
	return processorhelper.NewLogs(ctx, set, cfg, next, lp.processLogs,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithShutdown(func(ctx context.Context) error {
			defer release()
			return lp.shutdown(ctx)
		}),
	)
}

// instances are the component instances by ID: the traces and logs processors of one ID share one,
// so that content records of the logs pipeline meet the spans of the traces pipeline's memory.
var instances = struct {
	sync.Mutex
	m map[component.ID]*spanFilterInstance
}{m: map[component.ID]*spanFilterInstance{}}

// spanFilterInstance has no lifecycle of its own (see createTraces).
type spanFilterInstance struct {
	refs   int                                 // guarded by instances
	traces atomic.Pointer[spanFilterProcessor] // nil without a traces pipeline for the ID
}

// acquireInstance returns the instance of id, with traces unless nil (one per ID: one next consumer
// per memory), and the release of the reference, once; the last forgets it (a reload builds anew).
func acquireInstance(id component.ID, traces *spanFilterProcessor) (*spanFilterInstance, func(), error) {
	instances.Lock()
	defer instances.Unlock()
	i := instances.m[id]
	if i == nil {
		i = &spanFilterInstance{}
		instances.m[id] = i
	}
	if traces != nil && !i.traces.CompareAndSwap(nil, traces) {
		return nil, nil, fmt.Errorf("%s is used in more than one traces pipeline; give each traces "+
			"pipeline its own component ID (for example %s/second): one ID is one trace memory, shared "+
			"with its logs pipeline", id, id.Type())
	}
	i.refs++
	return i, sync.OnceFunc(func() {
		instances.Lock()
		defer instances.Unlock()
		i.refs--
		if i.refs == 0 {
			delete(instances.m, id)
		}
	}), nil
}

// contentSink is the traces processor, nil without a traces pipeline for this ID.
func (i *spanFilterInstance) contentSink() contentSink {
	if p := i.traces.Load(); p != nil {
		return p
	}
	return nil // not a nil *spanFilterProcessor in the interface
}
