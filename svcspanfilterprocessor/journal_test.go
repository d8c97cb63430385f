package svcspanfilterprocessor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/journal"
	"github.com/svc/svc-collector/svcspanfilterprocessor/internal/metadata"
)

// A connector span is written ahead with its call and its record removed once it was handed on;
// one the next consumer refuses (retryably) stays journaled until the releaser hands it on.
func TestConnectorRecordRemovedOnceHandedOn(t *testing.T) {
	for _, tc := range []struct {
		name        string
		refuse      bool
		wantRecords int
	}{
		{name: "connector taken at once: record removed"},
		{name: "connector refused: journaled", refuse: true, wantRecords: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			fj := &fakeJournal{}
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
			cfg := createDefaultConfig().(*Config)
			sink := new(consumertest.TracesSink)
			var next consumer.Traces = sink
			refusing := false
			next, _ = consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
				if refusing {
					return errors.New("exporter queue is full")
				}
				return sink.ConsumeTraces(ctx, td)
			})
			p, err := newSpanFilterProcessor(processortest.NewNopSettings(metadata.Type), cfg, next, fj)
			require.NoError(t, err)
			p.now = clock.Now
			_, err = p.processTraces(ctx, batch(testSpan{name: "chat", scope: scopeSDK, parent: "tool http"}))
			require.ErrorIs(t, err, processorhelper.ErrSkipProcessingData)
			clock.Advance(cfg.TraceIntegrity.WaitDuration + time.Second)
			p.mem.Expire()
			p.deliverReady(ctx, false) // chat goes on by rule 1; "tool http" is an open parent
			require.Equal(t, 1, sink.SpanCount())
			before := spanRecords(fj)
			require.Empty(t, before, "chat was handed on: its record is gone")

			refusing = tc.refuse
			appends := fj.appends
			// The open parent ends, dropped, below its kept parent: it goes on as a connector.
			_, err = p.processTraces(ctx, batch(testSpan{name: "agent", scope: scopeSDK},
				testSpan{name: "tool http", scope: scopeHTTPClient, parent: "agent"}))
			require.NoError(t, err, "agent passes")
			assert.Len(t, spanRecords(fj), tc.wantRecords)
			if !tc.refuse {
				// The connector written ahead, and the ids of the dropped span (its trace has open
				// parents: a kept span arriving after a restart below it walks through it).
				assert.Equal(t, appends+2, fj.appends)
				assert.Len(t, kindRecords(fj, journal.KindDropped), 1)
				assert.Equal(t, 2, sink.SpanCount(), "the connector went on")
				return
			}
			refusing = false
			p.deliverReady(ctx, false) // the releaser retries
			assert.Equal(t, 2, sink.SpanCount())
			assert.Empty(t, spanRecords(fj), "removed once handed on")
		})
	}
}

func spanRecords(fj *fakeJournal) []journal.Record {
	var out []journal.Record
	for _, r := range fj.records() {
		if r.Kind != journal.KindOpenParents && r.Kind != journal.KindDropped {
			out = append(out, r)
		}
	}
	return out
}

// A call that holds nothing hands its connector on before its journal write; while the next
// consumer takes its time (a synchronous exporter retrying), eviction and with it every other
// call must not wait for it.
func TestSlowNextConsumerDoesNotHoldEviction(t *testing.T) {
	ctx := context.Background()
	fj := &fakeJournal{}
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	cfg := createDefaultConfig().(*Config)
	cfg.TraceIntegrity.MaxTraces = 1 // the call's second trace gives eviction work to do
	sink := new(consumertest.TracesSink)
	entered, proceed := make(chan struct{}), make(chan struct{})
	slow := false
	next, _ := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		if slow {
			slow = false
			close(entered)
			<-proceed
		}
		return sink.ConsumeTraces(ctx, td)
	})
	p, err := newSpanFilterProcessor(processortest.NewNopSettings(metadata.Type), cfg, next, fj)
	require.NoError(t, err)
	p.now = clock.Now
	_, err = p.processTraces(ctx, batch(testSpan{name: "chat", scope: scopeSDK, parent: "tool http"}))
	require.ErrorIs(t, err, processorhelper.ErrSkipProcessingData)
	clock.Advance(cfg.TraceIntegrity.WaitDuration + time.Second)
	p.mem.Expire()
	p.deliverReady(ctx, false) // chat goes on by rule 1; "tool http" is an open parent

	slow = true
	done := make(chan error, 1)
	go func() {
		// The open parent ends, dropped: it goes on as a connector, to the slow next consumer.
		_, err := p.processTraces(ctx, batch(testSpan{name: "tool http", scope: scopeHTTPClient, parent: "agent"},
			testSpan{name: "health check", scope: scopeHTTPClient, trace: pcommon.TraceID{7}}))
		done <- err
	}()
	<-entered
	evicted := make(chan struct{})
	go func() {
		p.mem.Enforce()
		close(evicted)
	}()
	select {
	case <-evicted:
	case <-time.After(10 * time.Second):
		t.Error("eviction waited for a call blocked in the next consumer")
	}
	close(proceed)
	if err := <-done; !errors.Is(err, processorhelper.ErrSkipProcessingData) {
		t.Fatalf("the call: %v", err)
	}
	<-evicted
	assert.Equal(t, 2, sink.SpanCount(), "chat and the connector")
}
