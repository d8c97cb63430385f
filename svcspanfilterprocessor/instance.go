package svcspanfilterprocessor // import "github.com/svc/svc-collector/svcspanfilterprocessor"

import (
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/component"
)

// instances are the component instances by component ID: the traces processor and the logs
// processor of one ID share one instance, so that content records reaching the logs pipeline meet
// the spans of the traces pipeline's trace memory. An instance is forgotten when its last user
// gives its reference back, so a collector reload builds a new one.
var instances = struct {
	sync.Mutex
	m map[component.ID]*spanFilterInstance
}{m: map[component.ID]*spanFilterInstance{}}

// spanFilterInstance is what the traces and logs processors of one component ID share. It has no
// lifecycle of its own: the traces processor starts and stops the memory with its own Start and
// Shutdown (factory.go); the logs side hands content while the traces side runs and is refused
// (retryably) otherwise. Its fields are guarded by instances.
type spanFilterInstance struct {
	id     component.ID
	refs   int
	traces *spanFilterProcessor
}

// acquireInstance returns the instance of id, created if there is none, and the function that
// gives this user's reference back: once, however often it is called (a Shutdown, or the failed
// creation of the user).
func acquireInstance(id component.ID) (*spanFilterInstance, func()) {
	instances.Lock()
	defer instances.Unlock()
	i := instances.m[id]
	if i == nil {
		i = &spanFilterInstance{id: id}
		instances.m[id] = i
	}
	i.refs++
	return i, sync.OnceFunc(func() {
		instances.Lock()
		defer instances.Unlock()
		i.refs--
		if i.refs == 0 {
			delete(instances.m, id)
		}
	})
}

// setTraces registers the traces processor. A component ID serves one traces pipeline: two would
// need two next consumers for one memory.
func (i *spanFilterInstance) setTraces(p *spanFilterProcessor) error {
	instances.Lock()
	defer instances.Unlock()
	if i.traces != nil {
		return fmt.Errorf("%s is used in more than one traces pipeline; give each traces pipeline its own "+
			"component ID (for example %s/second): one ID is one trace memory, shared with its logs pipeline",
			i.id, i.id.Type())
	}
	i.traces = p
	return nil
}

func (i *spanFilterInstance) tracesProcessor() *spanFilterProcessor {
	instances.Lock()
	defer instances.Unlock()
	return i.traces
}

// contentSink is where the logs processor hands content records: the traces processor's memory;
// nil without a traces pipeline for this ID.
func (i *spanFilterInstance) contentSink() contentSink {
	if p := i.tracesProcessor(); p != nil {
		return p
	}
	return nil
}
