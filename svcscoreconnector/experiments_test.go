package svcscoreconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/component"

	"github.com/svc/svc-collector/svcscoreconnector/internal/metadata"
)

func TestExperimentTracesAreSharedPerConnectorID(t *testing.T) {
	id := component.MustNewIDWithName(metadata.Type.String(), "shared_test")
	other := component.MustNewIDWithName(metadata.Type.String(), "other_test")
	first, releaseFirst := acquireExperimentTraces(id)
	second, releaseSecond := acquireExperimentTraces(id)
	third, releaseThird := acquireExperimentTraces(other)
	assert.Same(t, first, second, "traces_to_logs and logs_to_logs of one id share the set")
	assert.NotSame(t, first, third, "another connector id has its own")

	releaseFirst()
	releaseThird()
	experimentTraces.Lock()
	assert.Contains(t, experimentTraces.byID, id, "still used by the second instance")
	assert.NotContains(t, experimentTraces.byID, other)
	experimentTraces.Unlock()
	releaseSecond()
	experimentTraces.Lock()
	assert.NotContains(t, experimentTraces.byID, id, "dropped with its last instance")
	experimentTraces.Unlock()
}
