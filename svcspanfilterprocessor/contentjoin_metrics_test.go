package svcspanfilterprocessor

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/svc/svc-collector/pkg/golden"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/genaicontent"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadatatest"
)

// contentWaitBounds are the content_wait bucket boundaries of metadata.yaml.
var contentWaitBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// waitPoint is the content_wait histogram point of the waits given, in seconds.
func waitPoint(waits ...float64) metricdata.HistogramDataPoint[float64] {
	counts := make([]uint64, len(contentWaitBounds)+1)
	var sum float64
	for _, w := range waits {
		i := 0
		for i < len(contentWaitBounds) && w > contentWaitBounds[i] {
			i++
		}
		counts[i]++
		sum += w
	}
	minW, maxW := waits[0], waits[0]
	for _, w := range waits {
		minW, maxW = min(minW, w), max(maxW, w)
	}
	return metricdata.HistogramDataPoint[float64]{
		Bounds: contentWaitBounds, BucketCounts: counts, Count: uint64(len(waits)), Sum: sum,
		Min: metricdata.NewExtrema(minW), Max: metricdata.NewExtrema(maxW),
	}
}

func unmatchedPoint(reason string, n int64) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Attributes: attribute.NewSet(attribute.String("reason", reason)), Value: n}
}

// contentCall is the golden call of the join (python_tool_round_trip): 4 input records sent when the
// call starts, the choice when it ends, and its span.
type contentCall struct {
	h              *harness
	inputs, choice plog.Logs
}

func newContentCall(t *testing.T) *contentCall {
	dir := filepath.Join("internal", "genaicontent", "testdata", joinCase)
	all := golden.ReadLogs(t, filepath.Join(dir, "logs.json"))
	c := &contentCall{h: newHarness(t, createDefaultConfig().(*Config)), inputs: plog.NewLogs(), choice: plog.NewLogs()}
	all.CopyTo(c.inputs)
	all.CopyTo(c.choice)
	c.inputs.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().RemoveIf(func(lr plog.LogRecord) bool { return lr.EventName() == "gen_ai.choice" })
	c.choice.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().RemoveIf(func(lr plog.LogRecord) bool { return lr.EventName() != "gen_ai.choice" })
	require.Equal(t, 4, c.inputs.LogRecordCount())
	return c
}

func (c *contentCall) content(ld plog.Logs) {
	c.h.t.Helper()
	cp := plog.NewLogs()
	ld.CopyTo(cp)
	require.NoError(c.h.t, c.h.p.AddContent(context.Background(), cp))
	c.h.p.deliverReady(context.Background(), false)
}

// span sends the call's span, changed by edit (may be nil) first.
func (c *contentCall) span(edit func(ptrace.ScopeSpans, ptrace.Span)) {
	c.h.t.Helper()
	td := golden.ReadTraces(c.h.t, filepath.Join("internal", "genaicontent", "testdata", joinCase, "span.json"))
	ss := td.ResourceSpans().At(0).ScopeSpans().At(0)
	if edit != nil {
		edit(ss, ss.Spans().At(0))
	}
	require.NoError(c.h.t, c.h.proc.ConsumeTraces(context.Background(), td))
	c.h.p.deliverReady(context.Background(), false)
}

// notGenAI makes the span one the filter drops.
func notGenAI(ss ptrace.ScopeSpans, s ptrace.Span) {
	ss.Scope().SetName("net/http")
	s.SetName("GET /orders")
	s.Attributes().Clear()
}

// withOwnContent gives the span its own input and output messages.
func withOwnContent(_ ptrace.ScopeSpans, s ptrace.Span) {
	s.Attributes().PutStr(genaicontent.AttrInputMessages, `[{"role":"user","parts":[{"type":"text","content":"own"}]}]`)
	s.Attributes().PutStr(genaicontent.AttrOutputMessages, `[{"role":"assistant","parts":[{"type":"text","content":"own"}]}]`)
}

// The join's metrics: spans joined, records unmatched by reason, and how long spans waited for their
// content, for each way a call's span and its records can meet (or not).
func TestContentJoinMetrics(t *testing.T) {
	tests := []struct {
		name          string
		run           func(c *contentCall)
		wantJoined    int64
		wantUnmatched []metricdata.DataPoint[int64]
		wantWaits     []float64 // seconds; none: the metric is not recorded
		noSpanLeaves  bool
	}{
		{name: "span first, content 1s and 2s later: joined after a 2s wait", wantJoined: 1, wantWaits: []float64{2}, run: func(c *contentCall) {
			c.span(nil)
			c.h.advance(time.Second)
			c.content(c.inputs)
			c.h.advance(time.Second)
			c.content(c.choice)
		}},
		{name: "content first: joined on arrival, the span never waits", wantJoined: 1, run: func(c *contentCall) {
			c.content(c.inputs)
			c.content(c.choice)
			c.span(nil)
		}},
		{name: "span waits content_join.wait in vain, content comes after it went on: span_gone", wantWaits: []float64{5},
			wantUnmatched: []metricdata.DataPoint[int64]{unmatchedPoint("span_gone", 5)}, run: func(c *contentCall) {
				c.span(nil)
				c.h.advance(5 * time.Second)
				c.content(c.inputs)
				c.content(c.choice)
			}},
		{name: "the filter drops the span: its waiting and its late records are span_dropped", noSpanLeaves: true,
			wantUnmatched: []metricdata.DataPoint[int64]{unmatchedPoint("span_dropped", 5)}, run: func(c *contentCall) {
				c.content(c.inputs)
				c.span(notGenAI)
				c.content(c.choice)
			}},
		{name: "records wait content_join.wait without their span: no_span", noSpanLeaves: true,
			wantUnmatched: []metricdata.DataPoint[int64]{unmatchedPoint("no_span", 4)}, run: func(c *contentCall) {
				c.content(c.inputs)
				c.h.advance(5 * time.Second)
			}},
		{name: "the span carries its own content: span_has_content",
			wantUnmatched: []metricdata.DataPoint[int64]{unmatchedPoint("span_has_content", 5)}, run: func(c *contentCall) {
				c.content(c.inputs)
				c.content(c.choice)
				c.span(withOwnContent)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newContentCall(t)
			tt.run(c)
			wantDelivered := 1
			if tt.noSpanLeaves {
				wantDelivered = 0
			}
			require.Len(t, c.h.delivered(), wantDelivered, "the span leaves once (when it comes and is kept)")
			tel := c.h.telemetry
			if tt.wantJoined > 0 {
				metadatatest.AssertEqualProcessorSvcspanfilterContentJoined(t, tel, []metricdata.DataPoint[int64]{point(tt.wantJoined)}, ignoreTime...)
			} else {
				requireNoMetric(t, tel, "otelcol_processor_svcspanfilter_content_joined")
			}
			if len(tt.wantUnmatched) > 0 {
				metadatatest.AssertEqualProcessorSvcspanfilterContentUnmatched(t, tel, tt.wantUnmatched, ignoreTime...)
			} else {
				requireNoMetric(t, tel, "otelcol_processor_svcspanfilter_content_unmatched")
			}
			if len(tt.wantWaits) > 0 {
				metadatatest.AssertEqualProcessorSvcspanfilterContentWait(t, tel, []metricdata.HistogramDataPoint[float64]{waitPoint(tt.wantWaits...)}, ignoreTime...)
			} else {
				requireNoMetric(t, tel, "otelcol_processor_svcspanfilter_content_wait")
			}
		})
	}
}

func requireNoMetric(t *testing.T, tel *componenttest.Telemetry, name string) {
	t.Helper()
	_, err := tel.GetMetric(name)
	require.Error(t, err, "%s recorded", name)
}

// Content records without a trace id or span id are counted by the logs side (no_span_context).
func TestContentWithoutSpanContextCounted(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	p := newContentLogsProcessorWith(t, metadatatest.NewSettings(tel), true, &recordingSink{}, new(consumertest.LogsSink))
	input := golden.ReadLogs(t, filepath.Join("testdata", "golden", "content_logs", "input.json"))
	require.NoError(t, p.ConsumeLogs(context.Background(), input))
	metadatatest.AssertEqualProcessorSvcspanfilterContentUnmatched(t, tel,
		[]metricdata.DataPoint[int64]{unmatchedPoint("no_span_context", 1)}, ignoreTime...)
}
