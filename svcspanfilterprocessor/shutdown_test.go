package svcspanfilterprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
)

// on_shutdown: keep (with a journal) does not cut an agent tree whose parent is still open: the
// held child stays journaled and, after the restart, hangs below its parent. on_shutdown: release
// (the default) delivers it by rule 1, journal or not, so that an instance that never starts again
// leaves no span behind; the journal then holds only the open parent.
func TestShutdownReleasesOrKeepsHeldSpans(t *testing.T) {
	for _, tc := range []struct {
		name           string
		journaled      bool
		onShutdown     string
		wantAtShutdown int
	}{
		{name: "no journal, release: drained by rule 1", onShutdown: onShutdownRelease, wantAtShutdown: 1},
		{name: "journal, release: drained by rule 1, journal emptied", journaled: true, onShutdown: onShutdownRelease, wantAtShutdown: 1},
		{name: "journal, keep: kept for the next start", journaled: true, onShutdown: onShutdownKeep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := journal.Nop
			fj := &fakeJournal{}
			if tc.journaled {
				j = fj
			}
			ctx := context.Background()
			sink := new(consumertest.TracesSink)
			cfg := createDefaultConfig().(*Config)
			cfg.TraceIntegrity.OnShutdown = tc.onShutdown
			p, err := newSpanFilterProcessor(processortest.NewNopSettings(metadata.Type), cfg, sink, j)
			require.NoError(t, err)
			_, err = p.processTraces(ctx, batch(testSpan{name: "root", scope: scopeSDK}, testSpan{name: "child", scope: scopeSDK, parent: "agent"}))
			require.NoError(t, err)
			require.NoError(t, p.shutdown(ctx))
			assert.Equal(t, tc.wantAtShutdown, sink.SpanCount())
			if tc.journaled && tc.onShutdown == onShutdownRelease {
				// Only the open parent the released child points at stays (KindOpen): after a
				// restart a dropped agent span ending late is still bridged.
				for _, r := range fj.records() {
					assert.Equal(t, journal.KindOpenParents, r.Kind, "everything released was handed on")
				}
			}
			if !tc.journaled || tc.onShutdown == onShutdownRelease {
				return
			}
			require.Len(t, fj.records(), 1, "the held child is still journaled")

			sink2 := new(consumertest.TracesSink)
			p2, err := newSpanFilterProcessor(processortest.NewNopSettings(metadata.Type), cfg, sink2, fj)
			require.NoError(t, err)
			require.NoError(t, p2.recoverJournal(fj.records()))
			_, err = p2.processTraces(ctx, batch(testSpan{name: "agent", scope: scopeSDK}))
			require.NoError(t, err)
			byName := map[string]ptrace.Span{}
			for _, td := range sink2.AllTraces() {
				forEachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, s ptrace.Span) { byName[s.Name()] = s })
			}
			require.Contains(t, byName, "child")
			assert.Equal(t, idOf("agent"), byName["child"].ParentSpanID(), "the child hangs below its parent")
			require.NoError(t, p2.shutdown(ctx))
			assert.Empty(t, fj.records())
		})
	}
}

// After a SIGKILL the restarted processor still knows the open parent a delivered span points at:
// the dropped parent ending after the restart goes on as a connector span below its own kept
// ancestor, instead of leaving the delivered span's parent id dangling.
func TestOpenParentBridgedAfterKill(t *testing.T) {
	ctx := context.Background()
	fj := &fakeJournal{}
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	cfg := createDefaultConfig().(*Config)
	sink := new(consumertest.TracesSink)
	p, err := newSpanFilterProcessor(processortest.NewNopSettings(metadata.Type), cfg, sink, fj)
	require.NoError(t, err)
	p.now = clock.Now
	_, err = p.processTraces(ctx, batch(testSpan{name: "chat", scope: scopeSDK, parent: "tool http"}))
	require.ErrorIs(t, err, processorhelper.ErrSkipProcessingData, "chat is held: nothing passes")
	clock.Advance(cfg.TraceIntegrity.WaitDuration + time.Second)
	p.mem.Expire()
	p.deliverReady(ctx, false)
	require.Equal(t, 1, sink.SpanCount(), "chat went on by rule 1, pointing at the open parent")

	// SIGKILL: p is gone without a shutdown; a new process recovers the journal.
	sink2 := new(consumertest.TracesSink)
	p2, err := newSpanFilterProcessor(processortest.NewNopSettings(metadata.Type), cfg, sink2, fj)
	require.NoError(t, err)
	p2.now = clock.Now
	require.NoError(t, p2.recoverJournal(fj.records()))
	td, err := p2.processTraces(ctx, batch(testSpan{name: "agent", scope: scopeSDK},
		testSpan{name: "tool http", scope: scopeHTTPClient, parent: "agent"}))
	require.NoError(t, err)
	require.NoError(t, sink2.ConsumeTraces(ctx, td)) // what passes goes on with the call
	p2.deliverReady(ctx, false)
	var conn ptrace.Span
	for _, td := range sink2.AllTraces() {
		forEachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, s ptrace.Span) {
			if s.SpanID() == idOf("tool http") {
				conn = s
			}
		})
	}
	require.NotEqual(t, ptrace.Span{}, conn, "the dropped parent went on as a connector")
	_, isConn := conn.Attributes().Get("svc.gateway.connector")
	assert.True(t, isConn)
	assert.Equal(t, idOf("agent"), conn.ParentSpanID())
}
