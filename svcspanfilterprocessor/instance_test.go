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

	traces, releaseTraces, err := acquireInstance(id, &spanFilterProcessor{})
	require.NoError(t, err)
	logs, releaseLogs, _ := acquireInstance(id, nil)
	other, releaseOther, _ := acquireInstance(otherID, nil)
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
	again, releaseAgain, _ := acquireInstance(id, nil)
	defer releaseAgain()
	assert.NotSame(t, traces, again)
}

// A second traces processor for one ID is refused without taking a reference; the instance of a
// component that never ran is forgotten with its last reference.
func TestInstancesOneTracesProcessorPerID(t *testing.T) {
	id := component.MustNewIDWithName("svcspanfilter", "instances_second_traces")
	inst, release, err := acquireInstance(id, &spanFilterProcessor{})
	require.NoError(t, err)
	_, _, err = acquireInstance(id, &spanFilterProcessor{})
	require.ErrorContains(t, err, "used in more than one traces pipeline")
	assert.Equal(t, 1, inst.refs)
	release()
	assert.Nil(t, instanceOf(id))
	assert.Nil(t, (&spanFilterInstance{}).contentSink(), "no traces pipeline: no sink")
}
