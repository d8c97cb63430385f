package svcspanfilterprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
)

func instanceOf(id component.ID) *spanFilterInstance {
	instances.Lock()
	defer instances.Unlock()
	return instances.m[id]
}

func TestInstancesOnePerID(t *testing.T) {
	id := component.MustNewIDWithName("svcspanfilter", "instances_test")
	otherID := component.MustNewIDWithName("svcspanfilter", "instances_test_other")

	traces, releaseTraces := acquireInstance(id)
	logs, releaseLogs := acquireInstance(id)
	other, releaseOther := acquireInstance(otherID)
	defer releaseOther()
	assert.Same(t, traces, logs, "one instance for one ID")
	assert.NotSame(t, traces, other)

	releaseTraces()
	assert.Same(t, traces, instanceOf(id), "still used by the logs pipeline")
	releaseTraces()
	assert.Same(t, traces, instanceOf(id), "a second release of the same user is not another reference")
	releaseLogs()
	assert.Nil(t, instanceOf(id), "the last reference forgets it")

	// After the last release the ID is free: a reload builds a new instance.
	again, releaseAgain := acquireInstance(id)
	defer releaseAgain()
	assert.NotSame(t, traces, again)
}

// A user whose creation fails after acquiring gives its reference back, and the instance of a
// component that never ran is forgotten.
func TestInstancesReleaseAfterFailedCreate(t *testing.T) {
	id := component.MustNewIDWithName("svcspanfilter", "instances_failed")
	inst, release := acquireInstance(id)
	require.NoError(t, inst.setTraces(&spanFilterProcessor{}))
	require.ErrorContains(t, inst.setTraces(&spanFilterProcessor{}), "used in more than one traces pipeline")
	release()
	assert.Nil(t, instanceOf(id))
	assert.Nil(t, (&spanFilterInstance{}).contentSink(), "no traces pipeline: no sink")
}
