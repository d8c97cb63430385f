package svcspanfilterprocessor

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/svc/svc-collector/pkg/golden"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
)

// The trace memory starts (recovery, releaser) and drains with the TRACES processor's own
// Start and Shutdown, whatever the logs processor of the same ID does; the logs side's content is
// refused, retryably, while the traces side is not running.
func TestTracesProcessorOwnsTheMemoryLifecycle(t *testing.T) {
	tests := []struct {
		name string
		// order of lifecycle steps: "tp+", "lp+", "tp-", "lp-"; after each, the checks run.
		steps []string
		// wantContentOK per step: whether content is taken after that step (nil: not checked).
		wantContentOK []*bool
		// wantDrainedAfter: step index after which the held span must have reached the sink.
		wantDrainedAfter int
	}{
		{name: "logs started first, traces stopped first", steps: []string{"lp+", "tp+", "tp-", "lp-"},
			wantContentOK: []*bool{ptr(false), ptr(true), ptr(false), nil}, wantDrainedAfter: 2},
		{name: "traces started first, logs stopped first", steps: []string{"tp+", "lp+", "lp-", "tp-"},
			wantContentOK: []*bool{nil, ptr(true), nil, nil}, wantDrainedAfter: 3},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFactory()
			cfg := f.CreateDefaultConfig()
			set := processortest.NewNopSettings(metadata.Type)
			set.ID = component.MustNewIDWithName("svcspanfilter", "lifecycle_"+string(rune('a'+i)))
			ctx, host := context.Background(), componenttest.NewNopHost()
			sink := new(consumertest.TracesSink)
			tp, err := f.CreateTraces(ctx, set, cfg, sink)
			require.NoError(t, err)
			lp, err := f.CreateLogs(ctx, set, cfg, consumertest.NewNop())
			require.NoError(t, err)
			sent := false
			for s, step := range tt.steps {
				switch step {
				case "tp+":
					require.NoError(t, tp.Start(ctx, host))
					require.NoError(t, tp.ConsumeTraces(ctx, batch(testSpan{name: "root", scope: scopeSDK}, testSpan{name: "child", scope: scopeSDK, parent: "agent"})))
					sent = true
				case "lp+":
					require.NoError(t, lp.Start(ctx, host))
				case "tp-":
					require.NoError(t, tp.Shutdown(ctx))
				case "lp-":
					require.NoError(t, lp.Shutdown(ctx))
				}
				if want := tt.wantContentOK[s]; want != nil {
					ld := golden.ReadLogs(t, filepath.Join("testdata", "golden", "content_logs", "input.json"))
					err := lp.ConsumeLogs(ctx, ld)
					if *want {
						require.NoError(t, err, "after %s", step)
					} else {
						require.Error(t, err, "after %s", step)
						assert.False(t, consumererror.IsPermanent(err), "retryable")
					}
				}
				if sent {
					child := 0
					for _, td := range sink.AllTraces() {
						forEachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, sp ptrace.Span) {
							if sp.Name() == "child" {
								child++
							}
						})
					}
					want := 0
					if s >= tt.wantDrainedAfter {
						want = 1
					}
					assert.Equal(t, want, child, "held child delivered after %s", step)
				}
			}
		})
	}
}
