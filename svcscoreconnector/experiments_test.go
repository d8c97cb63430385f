package svcscoreconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/sampling"
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

// samplingHost is a host running one sampling extension (sampling.Provider) as svcsampling.
type samplingHost struct {
	component.Host
	decider *sampling.Decider
}

type fakeSamplingExtension struct {
	component.StartFunc
	component.ShutdownFunc
	decider *sampling.Decider
}

func (e fakeSamplingExtension) Decider() *sampling.Decider { return e.decider }

func (h samplingHost) GetExtensions() map[component.ID]component.Component {
	return map[component.ID]component.Component{samplingID: fakeSamplingExtension{decider: h.decider}}
}

// TestSamplingExtensionSharesTheDecisionAcrossComponents: connectors of different ids that name
// one sampling extension take its rate and share its experiment memory: a trace marked through
// one keeps its scores in the other. Without the extension they would not know each other.
func TestSamplingExtensionSharesTheDecisionAcrossComponents(t *testing.T) {
	const rate = 1e-9
	ids := sampledOutTraceIDs(t, rate, 2)
	experiment, other := ids[0], ids[1]
	decider := sampling.NewDecider(sampling.NewRatio(rate), sampling.NewExperimentTraces(10, time.Hour))
	host := samplingHost{Host: componenttest.NewNopHost(), decider: decider}
	ctx := context.Background()
	cfg := &Config{SampleRate: 1, Sampling: &samplingID} // the connector's own rate is not used
	sinkA, sinkB := &consumertest.LogsSink{}, &consumertest.LogsSink{}
	settings := func(name string) connector.Settings {
		set := connectortest.NewNopSettings(metadata.Type)
		set.ID = component.MustNewIDWithName(metadata.Type.String(), name)
		return set
	}
	a, err := NewFactory().CreateTracesToLogs(ctx, settings("a"), cfg, sinkA)
	require.NoError(t, err)
	b, err := NewFactory().CreateTracesToLogs(ctx, settings("b"), cfg, sinkB)
	require.NoError(t, err)
	for _, c := range []component.Component{a, b} {
		require.NoError(t, c.Start(ctx, host))
		t.Cleanup(func() { require.NoError(t, c.Shutdown(ctx)) })
	}

	marking := ptrace.NewTraces()
	scoredSpan(t, marking.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans(), experiment, "root", map[string]any{"svc.experiment.id": "exp-1"})
	require.NoError(t, a.ConsumeTraces(ctx, marking))

	late := ptrace.NewTraces()
	spans := late.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	scoredSpan(t, spans, experiment, "late_span", nil)
	scoredSpan(t, spans, other, "sampled_out", nil)
	require.NoError(t, b.ConsumeTraces(ctx, late))

	assert.Equal(t, []string{"root"}, names(sinkA))
	assert.Equal(t, []string{"late_span"}, names(sinkB), "b keeps the trace a saw marked, and applies the extension's rate")
}

func TestSamplingExtensionMissingFailsStart(t *testing.T) {
	ctx := context.Background()
	c, err := NewFactory().CreateTracesToLogs(ctx, connectortest.NewNopSettings(metadata.Type), &Config{SampleRate: 1, Sampling: &samplingID}, &consumertest.LogsSink{})
	require.NoError(t, err)
	err = c.Start(ctx, componenttest.NewNopHost())
	assert.ErrorContains(t, err, `extension "svcsampling" is not running`)
	require.NoError(t, c.Shutdown(ctx))
}

// TestSamplingExtensionReleasesTheOwnSetOnce: a connector that takes the extension's decision
// releases its own experiment set in Start; its Shutdown must not release it again, which would
// take the reference of another instance of the same id and drop the set under it.
func TestSamplingExtensionReleasesTheOwnSetOnce(t *testing.T) {
	ctx := context.Background()
	set := connectortest.NewNopSettings(metadata.Type)
	set.ID = component.MustNewIDWithName(metadata.Type.String(), "release_once")
	// Another instance of the id holds the set too (a test stand-in for the logs_to_logs one).
	_, releaseOther := acquireExperimentTraces(set.ID)
	defer releaseOther()
	refs := func() int {
		experimentTraces.Lock()
		defer experimentTraces.Unlock()
		if shared, ok := experimentTraces.byID[set.ID]; ok {
			return shared.refs
		}
		return 0
	}

	host := samplingHost{Host: componenttest.NewNopHost(), decider: sampling.NewDecider(sampling.NewRatio(1), nil)}
	c, err := NewFactory().CreateTracesToLogs(ctx, set, &Config{SampleRate: 1, Sampling: &samplingID}, &consumertest.LogsSink{})
	require.NoError(t, err)
	assert.Equal(t, 2, refs())
	require.NoError(t, c.Start(ctx, host))
	assert.Equal(t, 1, refs(), "the extension's set is used: the own one is released in Start")
	require.NoError(t, c.Shutdown(ctx))
	assert.Equal(t, 1, refs(), "not released twice: the other instance still holds the set")
}
