package svcsamplingextension

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/svc/svc-collector/pkg/sampling"
)

// host is a component.Host with the given extensions.
type host struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h host) GetExtensions() map[component.ID]component.Component { return h.exts }

// TestComponentsShareOneDecision: every component that looks the extension up gets the same
// decision, so an experiment marked through one keeps the trace for all.
func TestComponentsShareOneDecision(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.SampleRate = 0.5
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, ext.Shutdown(context.Background())) }()
	id := component.NewID(f.Type())
	h := host{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{id: ext}}

	spanFilter, err := sampling.FromExtensions(h.GetExtensions(), id)
	require.NoError(t, err)
	scores, err := sampling.FromExtensions(h.GetExtensions(), id)
	require.NoError(t, err)
	assert.Same(t, spanFilter, scores)

	// A trace id the rate 0.5 samples out (low 64 bits at the top of the range).
	out := pcommon.TraceID{8: 0xff, 15: 0xff}
	require.True(t, spanFilter.SamplesOut(out))
	now := time.Now()
	assert.False(t, scores.Keep(out, false, now))
	assert.True(t, spanFilter.Keep(out, true, now), "a span marks the trace as an experiment")
	assert.True(t, scores.Keep(out, false, now.Add(time.Minute)), "the other component keeps its scores")
}

func TestFromExtensionsNamesWhatIsMissing(t *testing.T) {
	id := component.MustNewID("svcsampling")
	_, err := sampling.FromExtensions(host{Host: componenttest.NewNopHost()}.GetExtensions(), id)
	assert.ErrorContains(t, err, `extension "svcsampling" is not running: add it under extensions and service::extensions`)

	other := component.MustNewID("file_storage")
	var notSampling extension.Extension = struct {
		component.StartFunc
		component.ShutdownFunc
	}{}
	_, err = sampling.FromExtensions(map[component.ID]component.Component{other: notSampling}, other)
	assert.ErrorContains(t, err, `extension "file_storage" is not a sampling extension`)
}

// TestComponentsShareOneOutcome: the components that ask the extension for outcome sampling get
// the same Outcome (one memory of kept sessions), on the extension's rate; without an outcome
// section they get none and decide as before.
func TestComponentsShareOneOutcome(t *testing.T) {
	f := NewFactory()
	id := component.NewID(f.Type())
	start := func(cfg *Config) host {
		ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
		require.NoError(t, err)
		require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
		t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
		return host{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{id: ext}}
	}

	plain := f.CreateDefaultConfig().(*Config)
	o, err := sampling.OutcomeFromExtensions(start(plain).GetExtensions(), id)
	require.NoError(t, err)
	assert.Nil(t, o, "no outcome section: no outcome sampling")

	cfg := f.CreateDefaultConfig().(*Config)
	cfg.SampleRate = 0.5
	oc := sampling.DefaultOutcomeConfig()
	oc.Rules = []sampling.OutcomeRule{{Name: "failed", Kind: sampling.RuleError}}
	cfg.Outcome = configoptional.Some(oc)
	h := start(cfg)
	spanFilter, err := sampling.OutcomeFromExtensions(h.GetExtensions(), id)
	require.NoError(t, err)
	scores, err := sampling.OutcomeFromExtensions(h.GetExtensions(), id)
	require.NoError(t, err)
	require.NotNil(t, spanFilter)
	assert.Same(t, spanFilter, scores)

	// The rate of the rest is the extension's: a trace id 0.5 samples out is dropped.
	out := pcommon.TraceID{8: 0xff, 15: 0xff}
	var st sampling.TraceOutcome
	keep, reason := spanFilter.Decide(&st, out, false, time.Now())
	assert.Equal(t, []any{false, sampling.ReasonDropped}, []any{keep, reason})

	_, err = sampling.OutcomeFromExtensions(map[component.ID]component.Component{}, id)
	assert.ErrorContains(t, err, "is not running")
}

func TestInvalidOutcomeFailsCreate(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Outcome = configoptional.Some(sampling.DefaultOutcomeConfig()) // no rules
	_, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	assert.ErrorContains(t, err, "rules must name at least one rule")
}
