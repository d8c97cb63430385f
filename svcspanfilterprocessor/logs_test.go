package svcspanfilterprocessor

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/golden"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
)

// recordingSink is a contentSink that keeps what it is given, or refuses with err.
type recordingSink struct {
	got []plog.Logs
	err error
}

func (s *recordingSink) AddContent(_ context.Context, content plog.Logs) error {
	if s.err != nil {
		return s.err
	}
	s.got = append(s.got, content)
	return nil
}

func newContentLogsProcessor(t *testing.T, enabled bool, sink contentSink, next consumer.Logs) processor.Logs {
	t.Helper()
	return newContentLogsProcessorWith(t, processortest.NewNopSettings(metadata.Type), enabled, sink, next)
}

func newContentLogsProcessorWith(t *testing.T, set processor.Settings, enabled bool, sink contentSink, next consumer.Logs) processor.Logs {
	t.Helper()
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	require.NoError(t, err)
	lp := &logsProcessor{logger: zap.NewNop(), enabled: enabled, sink: func() contentSink { return sink }, telemetry: tb}
	if sink == nil {
		lp.sink = func() contentSink { return nil }
	}
	cfg := createDefaultConfig()
	p, err := processorhelper.NewLogs(context.Background(), set, cfg, next, lp.processLogs,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
	require.NoError(t, err)
	return p
}

// The golden batch mixes content records (JS: named by the event.name attribute; Python: by the
// event name field), a content record without span context, an evaluation result and an application
// log. The evaluation and the application log go on unchanged; the content records with a span go to
// the trace memory under their own resource and scope; the one without a span is discarded.
func TestContentLogsGolden(t *testing.T) {
	dir := filepath.Join("testdata", "golden", "content_logs")
	next := new(consumertest.LogsSink)
	sink := &recordingSink{}
	p := newContentLogsProcessor(t, true, sink, next)

	require.NoError(t, p.ConsumeLogs(context.Background(), golden.ReadLogs(t, filepath.Join(dir, "input.json"))))

	require.Len(t, next.AllLogs(), 1)
	golden.CheckLogs(t, filepath.Join(dir, "output_next.json"), next.AllLogs()[0])
	require.Len(t, sink.got, 1, "one hand-over per logs call")
	golden.CheckLogs(t, filepath.Join(dir, "output_content.json"), sink.got[0])
	assert.Equal(t, 4, sink.got[0].LogRecordCount())
}

func TestContentLogs(t *testing.T) {
	input := func(t *testing.T) plog.Logs {
		return golden.ReadLogs(t, filepath.Join("testdata", "golden", "content_logs", "input.json"))
	}
	onlyContent := func(t *testing.T) plog.Logs {
		ld := input(t)
		ld.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
			v, _ := rl.Resource().Attributes().Get("service.name")
			return v.Str() != "only-content"
		})
		return ld
	}
	retryable := errors.New("trace memory over budget")

	tests := []struct {
		name        string
		enabled     bool
		noSink      bool
		sinkErr     error
		input       func(*testing.T) plog.Logs
		wantErr     error
		wantNext    int // records the next consumer receives
		wantContent int // records handed to the memory
	}{
		{name: "join on", enabled: true, input: input, wantNext: 2, wantContent: 4},
		{name: "join off: everything goes on", enabled: false, input: input, wantNext: 7},
		{name: "only content: the next consumer is not called", enabled: true, input: onlyContent, wantContent: 1},
		{name: "no traces pipeline for this ID: content discarded", enabled: true, noSink: true, input: input, wantNext: 2},
		{name: "memory refuses: the call fails, nothing goes on", enabled: true, sinkErr: retryable, input: input, wantErr: retryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := new(consumertest.LogsSink)
			sink := &recordingSink{err: tt.sinkErr}
			var s contentSink = sink
			if tt.noSink {
				s = nil
			}
			p := newContentLogsProcessor(t, tt.enabled, s, next)
			err := p.ConsumeLogs(context.Background(), tt.input(t))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantNext, next.LogRecordCount())
			got := 0
			for _, ld := range sink.got {
				got += ld.LogRecordCount()
			}
			assert.Equal(t, tt.wantContent, got)
		})
	}
}

// The traces and the logs processor of one component ID are one instance: started once, shut down
// with the last of them; another ID is another instance.
func TestFactorySharesOneInstancePerID(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig()
	set := processortest.NewNopSettings(metadata.Type)
	set.ID = component.MustNewIDWithName("svcspanfilter", "shared_test")
	ctx, host := context.Background(), componenttest.NewNopHost()

	tp, err := f.CreateTraces(ctx, set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	lp, err := f.CreateLogs(ctx, set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	instances.Lock()
	inst := instances.m[set.ID]
	instances.Unlock()
	require.NotNil(t, inst)
	assert.Equal(t, 2, inst.refs)
	require.NotNil(t, inst.contentSink(), "the logs side sees the traces processor of its ID")

	_, err = f.CreateTraces(ctx, set, cfg, consumertest.NewNop())
	require.ErrorContains(t, err, "used in more than one traces pipeline")
	assert.Equal(t, 2, inst.refs, "the refused traces processor gave its reference back")

	require.NoError(t, tp.Start(ctx, host))
	require.NoError(t, lp.Start(ctx, host))
	require.NoError(t, tp.Shutdown(ctx))
	instances.Lock()
	_, still := instances.m[set.ID]
	instances.Unlock()
	assert.True(t, still, "the logs processor still uses the instance")
	require.NoError(t, lp.Shutdown(ctx))
	instances.Lock()
	_, still = instances.m[set.ID]
	instances.Unlock()
	assert.False(t, still, "forgotten after the last shutdown")
}

// A logs-only use of the component (no traces pipeline with its ID) starts and stops cleanly, and
// discards the content records it takes out (no span can receive them) while the rest goes on.
func TestFactoryLogsOnly(t *testing.T) {
	f := NewFactory()
	set := processortest.NewNopSettings(metadata.Type)
	set.ID = component.MustNewIDWithName("svcspanfilter", "logs_only")
	next := new(consumertest.LogsSink)
	lp, err := f.CreateLogs(context.Background(), set, f.CreateDefaultConfig(), next)
	require.NoError(t, err)
	require.NoError(t, lp.Start(context.Background(), componenttest.NewNopHost()))
	ld := golden.ReadLogs(t, filepath.Join("testdata", "golden", "content_logs", "input.json"))
	require.NoError(t, lp.ConsumeLogs(context.Background(), ld))
	assert.Equal(t, 2, next.LogRecordCount(), "the evaluation and the application log go on")
	require.NoError(t, lp.Shutdown(context.Background()))
}
