package svcspanfilterprocessor

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
)

type countingLifecycle struct {
	starts, shutdowns int
}

func (l *countingLifecycle) start(context.Context, component.Host) error {
	l.starts++
	return nil
}

func (l *countingLifecycle) shutdown(context.Context) error {
	l.shutdowns++
	return nil
}

func TestSharedComponentsOneInstancePerKey(t *testing.T) {
	s := newSharedComponents[string, *countingLifecycle]()
	created := 0
	create := func() (*countingLifecycle, error) { created++; return &countingLifecycle{}, nil }

	traces, err := s.LoadOrStore("svcspanfilter", create)
	require.NoError(t, err)
	logs, err := s.LoadOrStore("svcspanfilter", create)
	require.NoError(t, err)
	other, err := s.LoadOrStore("svcspanfilter/other", create)
	require.NoError(t, err)
	assert.Same(t, traces.Value(), logs.Value(), "one instance for one key")
	assert.NotSame(t, traces.Value(), other.Value())
	assert.Equal(t, 2, created)

	ctx, host := context.Background(), componenttest.NewNopHost()
	require.NoError(t, traces.Start(ctx, host))
	require.NoError(t, logs.Start(ctx, host))
	assert.Equal(t, 1, traces.Value().starts, "started once")

	require.NoError(t, traces.Shutdown(ctx))
	assert.Equal(t, 0, traces.Value().shutdowns, "still used by the logs pipeline")
	require.NoError(t, traces.Shutdown(ctx), "a second Shutdown of the same user is not another reference")
	assert.Equal(t, 0, traces.Value().shutdowns)
	require.NoError(t, logs.Shutdown(ctx))
	assert.Equal(t, 1, logs.Value().shutdowns, "the last reference shuts it down")

	// After the last shutdown the key is free: a reload builds a new instance.
	again, err := s.LoadOrStore("svcspanfilter", create)
	require.NoError(t, err)
	assert.NotSame(t, traces.Value(), again.Value())
	assert.Equal(t, 3, created)
}

func TestSharedComponentsNeverStarted(t *testing.T) {
	s := newSharedComponents[string, *countingLifecycle]()
	c, err := s.LoadOrStore("k", func() (*countingLifecycle, error) { return &countingLifecycle{}, nil })
	require.NoError(t, err)
	require.NoError(t, c.Shutdown(context.Background()))
	assert.Equal(t, 0, c.Value().shutdowns, "an instance never started is not shut down")
}

func TestSharedComponentsCreateErrorAndRelease(t *testing.T) {
	s := newSharedComponents[string, *countingLifecycle]()
	_, err := s.LoadOrStore("k", func() (*countingLifecycle, error) { return nil, errors.New("bad config") })
	require.EqualError(t, err, "bad config")
	assert.Empty(t, s.m, "nothing stored after a failed create")

	c, err := s.LoadOrStore("k", func() (*countingLifecycle, error) { return &countingLifecycle{}, nil })
	require.NoError(t, err)
	c.release()
	assert.Empty(t, s.m, "a released, never started instance is forgotten")
}
