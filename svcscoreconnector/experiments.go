package svcscoreconnector

import (
	"sync"

	"go.opentelemetry.io/collector/component"

	"github.com/svc/svc-collector/pkg/sampling"
)

// experimentTraces holds the experiment traces of each svcscore connector id. The collector
// makes one instance per pipeline type (traces_to_logs, logs_to_logs) of one connector id; they
// share the set, so that the scores sent as log records of a trace that spans marked as an
// experiment are kept too.
var experimentTraces = struct {
	sync.Mutex
	byID map[component.ID]*sharedExperiments
}{byID: map[component.ID]*sharedExperiments{}}

type sharedExperiments struct {
	set  *sampling.ExperimentTraces
	refs int
}

// acquireExperimentTraces returns the set of id and the function that releases it; the set is
// dropped when its last instance is released.
func acquireExperimentTraces(id component.ID) (*sampling.ExperimentTraces, func()) {
	experimentTraces.Lock()
	defer experimentTraces.Unlock()
	shared, ok := experimentTraces.byID[id]
	if !ok {
		shared = &sharedExperiments{set: sampling.NewExperimentTraces(sampling.DefaultExperimentTracesMax, sampling.DefaultExperimentTracesTTL)}
		experimentTraces.byID[id] = shared
	}
	shared.refs++
	return shared.set, func() {
		experimentTraces.Lock()
		defer experimentTraces.Unlock()
		if shared.refs--; shared.refs == 0 {
			delete(experimentTraces.byID, id)
		}
	}
}
