package svcspanfilterprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadatatest"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"
)

// outcomeExtension is the svcsampling extension with an outcome section, as the filter sees it.
type outcomeExtension struct {
	component.StartFunc
	component.ShutdownFunc
	decider *sampling.Decider
	outcome *sampling.Outcome
}

func (e *outcomeExtension) Decider() *sampling.Decider { return e.decider }
func (e *outcomeExtension) Outcome() *sampling.Outcome { return e.outcome }

type extensionsHost map[component.ID]component.Component

func (h extensionsHost) GetExtensions() map[component.ID]component.Component { return h }

// startWithOutcome starts the harness's outcome sampling: "errors + rate of the rest".
func startWithOutcome(t *testing.T, h *harness, rate float64, maxHeldMiB int) {
	cfg := sampling.DefaultOutcomeConfig()
	cfg.Rules = []sampling.OutcomeRule{{Name: "errors", Kind: sampling.RuleError}}
	cfg.MaxHeldMiB = maxHeldMiB
	o, err := sampling.NewOutcome(cfg, sampling.NewRatio(rate))
	require.NoError(t, err)
	id := component.MustNewID("svcsampling")
	h.p.cfg.Sampling = &id
	ext := &outcomeExtension{decider: sampling.NewDecider(sampling.NewRatio(rate), sampling.NewExperimentTraces(100, time.Hour)), outcome: o}
	require.NoError(t, h.p.startOutcome(extensionsHost{id: ext}))
}

// With the outcome section every failing trace is delivered whole, with its reason on the root;
// the others follow the rate once settled; the metrics count both.
func TestOutcomeSamplingKeepsFailingTracesWhole(t *testing.T) {
	failing, other := pcommon.TraceID{0xf1, 8: 0xff, 15: 1}, pcommon.TraceID{0xf1, 8: 0xff, 15: 2}
	h := newHarness(t, createDefaultConfig().(*Config))
	startWithOutcome(t, h, 0.0001, 64)
	for _, tr := range []pcommon.TraceID{failing, other} {
		name := func(n string) string { return n + " " + tr.String()[:4] + tr.String()[30:] }
		h.consume(testSpan{name: name("llm"), scope: scopeOpenAI, parent: name("agent"), trace: tr, attrs: genAIAttrs, failed: tr == failing},
			testSpan{name: name("GET /"), scope: "http", parent: name("agent"), trace: tr})
		h.consume(testSpan{name: name("agent"), scope: scopeSDK, trace: tr})
	}
	delivered := h.delivered()
	require.Len(t, delivered, 2, "the failing trace, decided by its rule at once: %v", h.tree())
	for n, s := range delivered {
		assert.Equal(t, failing, s.TraceID(), n)
	}
	root := delivered["agent f100"+failing.String()[30:]]
	reason, ok := root.Attributes().Get(tracememory.ReasonAttribute)
	require.True(t, ok, "the root of a kept trace carries the reason")
	assert.Equal(t, "errors", reason.Str())

	h.advance(6 * time.Second) // settle_duration: the other trace, root arrived, is decided
	assert.Len(t, h.delivered(), 2, "the other trace is dropped by the rate")
	assert.Zero(t, h.p.mem.HeldSpans())
	metadatatest.AssertEqualProcessorSvcspanfilterTracesDecided(t, h.telemetry, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("decision", "kept"), attribute.String("reason", "errors"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("decision", "dropped"), attribute.String("reason", "dropped"))},
	}, ignoreTime...)
	h.shutdown()
}

// max_held_mib may not exceed the memory that holds the spans.
func TestOutcomeMaxHeldWithinTheMemoryLimit(t *testing.T) {
	h := newHarness(t, createDefaultConfig().(*Config))
	cfg := sampling.DefaultOutcomeConfig()
	cfg.Rules = []sampling.OutcomeRule{{Name: "errors", Kind: sampling.RuleError}}
	cfg.MaxHeldMiB = h.p.cfg.TraceIntegrity.MemoryLimitMiB + 1
	o, err := sampling.NewOutcome(cfg, sampling.NewRatio(0.1))
	require.NoError(t, err)
	id := component.MustNewID("svcsampling")
	h.p.cfg.Sampling = &id
	err = h.p.startOutcome(extensionsHost{id: &outcomeExtension{decider: sampling.NewDecider(sampling.NewRatio(0.1), nil), outcome: o}})
	require.ErrorContains(t, err, "max_held_mib")
}
