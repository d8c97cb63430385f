package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/component"
)

// instances are the component instances by component ID: the traces processor and the logs
// processor of one ID are one instance with one trace memory, so that content records reaching the
// logs pipeline meet the spans of the traces pipeline.
var instances = newSharedComponents[component.ID, *spanFilterInstance]()

// spanFilterInstance is what the traces and logs processors of one component ID share.
type spanFilterInstance struct {
	mu     sync.Mutex
	id     component.ID
	traces *spanFilterProcessor
}

func newSpanFilterInstance(id component.ID) func() (*spanFilterInstance, error) {
	return func() (*spanFilterInstance, error) { return &spanFilterInstance{id: id}, nil }
}

// setTraces registers the traces processor. A component ID serves one traces pipeline: two would
// need two next consumers for one memory.
func (i *spanFilterInstance) setTraces(p *spanFilterProcessor) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.traces != nil {
		return fmt.Errorf("%s is used in more than one traces pipeline; give each traces pipeline its own "+
			"component ID (for example %s/second): one ID is one trace memory, shared with its logs pipeline", i.id, i.id.Type())
	}
	i.traces = p
	return nil
}

// contentSink is where the logs processor hands content records: the traces processor's memory, once
// it takes content (it implements contentSink); nil without a traces pipeline for this ID.
func (i *spanFilterInstance) contentSink() contentSink {
	i.mu.Lock()
	defer i.mu.Unlock()
	if sink, ok := any(i.traces).(contentSink); ok {
		return sink
	}
	return nil
}

// start and shutdown do nothing: the traces processor starts and stops its memory with its own
// Start and Shutdown (factory.go); the shared instance only pairs it with the logs processor, which
// hands content while the traces side runs and is refused (retryably) otherwise.
func (i *spanFilterInstance) start(context.Context, component.Host) error { return nil }

func (i *spanFilterInstance) shutdown(context.Context) error { return nil }

func (i *spanFilterInstance) tracesProcessor() *spanFilterProcessor {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.traces
}
