package svcspanfilterprocessor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/pkg/scorerecord"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadatatest"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/outcome"
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
	startOutcome(t, h.p, rate, maxHeldMiB)
}

func startOutcome(t *testing.T, p *spanFilterProcessor, rate float64, maxHeldMiB int) {
	cfg := sampling.DefaultOutcomeConfig()
	cfg.Rules = []sampling.OutcomeRule{{Name: "errors", Kind: sampling.RuleError}}
	cfg.MaxHeldMiB = maxHeldMiB
	o, err := sampling.NewOutcome(cfg, sampling.NewRatio(rate))
	require.NoError(t, err)
	id := component.MustNewID("svcsampling")
	p.cfg.Sampling = &id
	ext := &outcomeExtension{decider: sampling.NewDecider(sampling.NewRatio(rate), sampling.NewExperimentTraces(100, time.Hour)), outcome: o}
	require.NoError(t, p.startOutcome(extensionsHost{id: ext}))
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
	reason, ok := root.Attributes().Get(outcome.ReasonAttribute)
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

// scoreRecord is a score record as the svcscore connector writes it.
func scoreRecords(traces ...pcommon.TraceID) plog.Logs {
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	for i, tr := range traces {
		lr := sl.LogRecords().AppendEmpty()
		lr.SetEventName(scorerecord.EventName)
		lr.SetTraceID(tr)
		lr.Attributes().PutStr(scorerecord.AttrID, fmt.Sprintf("score-%d-%s", i, tr))
		lr.Attributes().PutStr(scorerecord.AttrName, "helpful")
		lr.Attributes().PutDouble(scorerecord.AttrValue, 1)
	}
	// A record of no trace (a run-level score) and an application log pass as they are.
	sl.LogRecords().AppendEmpty().Body().SetStr("an application log")
	return ld
}

// The logs side of the same component: score records of undecided traces wait, then follow
// their trace; records of decided traces pass or drop at once; other records pass.
func TestScoresFollowTheirTraceThroughTheLogsSide(t *testing.T) {
	failing, other := pcommon.TraceID{0xf2, 8: 0xff, 15: 1}, pcommon.TraceID{0xf2, 8: 0xff, 15: 2}
	h := newHarness(t, createDefaultConfig().(*Config))
	startWithOutcome(t, h, 0.0001, 64)
	sink := new(consumertest.LogsSink)
	lp := &logsProcessor{logger: zap.NewNop(), sink: func() contentSink { return h.p }, next: sink,
		traces: func() *spanFilterProcessor { return h.p }}
	defer func() { require.NoError(t, lp.shutdown(context.Background())) }()
	logs, err := processorhelper.NewLogs(context.Background(), processortest.NewNopSettings(metadata.Type), h.p.cfg, sink, lp.processLogs)
	require.NoError(t, err)

	require.NoError(t, logs.ConsumeLogs(context.Background(), scoreRecords(failing, other)))
	require.Equal(t, 1, sink.LogRecordCount(), "the application log passes; the scores wait")
	h.consume(testSpan{name: "agent", scope: scopeSDK, trace: failing, failed: true}, testSpan{name: "agent 2", scope: scopeSDK, trace: other})
	require.Eventually(t, func() bool { return sink.LogRecordCount() == 2 }, 5*time.Second, time.Millisecond,
		"the failing trace is kept at once: its score goes on")
	h.advance(6 * time.Second) // the other trace settles: dropped by the rate, with its score
	require.NoError(t, logs.ConsumeLogs(context.Background(), scoreRecords(failing, other)))
	assert.Equal(t, 4, sink.LogRecordCount(), "later: the kept trace's score passes, the dropped one's not (and the log)")
	var traces []pcommon.TraceID
	for _, ld := range sink.AllLogs() {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					if !lr.TraceID().IsEmpty() {
						traces = append(traces, lr.TraceID())
					}
				}
			}
		}
	}
	assert.Equal(t, []pcommon.TraceID{failing, failing}, traces, "no score of the dropped trace")
}

// A logs call whose score records cannot be written ahead (the journal refuses) is refused before
// any of it is applied: its content records, sent again with the client's resend, are joined once,
// and the span carries each message once, as without the refusal.
func TestRefusedLogsCallChangesNothing(t *testing.T) {
	var want string
	for _, refuse := range []bool{false, true} {
		f := newRefusalFixture(t, &refusingJournal{})
		startOutcome(t, f.p, 1, 64)
		lp := &logsProcessor{logger: zap.NewNop(), enabled: true, sink: func() contentSink { return f.p },
			next: new(consumertest.LogsSink), traces: func() *spanFilterProcessor { return f.p }}
		td := f.chatCall()
		call := func() plog.Logs { // the content records and a score of the chat span's trace
			ld := plog.NewLogs()
			f.content.CopyTo(ld)
			scoreRecords(td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()).
				ResourceLogs().MoveAndAppendTo(ld.ResourceLogs())
			return ld
		}
		if refuse {
			f.j.refuseScores = 1
			_, err := lp.processLogs(context.Background(), call())
			require.Error(t, err, "the score records could not be written: the call is refused")
		}
		_, err := lp.processLogs(context.Background(), call())
		require.NoError(t, err, "the client's resend")
		require.NoError(t, f.send(td))
		for range 3 {
			f.releaser(time.Minute) // decided by the rate (1): kept
		}
		spans := f.delivered()
		f.assertChatWithContent(spans)
		in, _ := spans["chat gpt-4o"].Attributes().Get("gen_ai.input.messages")
		require.NoError(t, lp.shutdown(context.Background()))
		if !refuse {
			want = in.Str()
			continue
		}
		assert.Equal(t, want, in.Str(), "each message once, as without the refusal")
	}
}
