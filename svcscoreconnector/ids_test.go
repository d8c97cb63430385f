package svcscoreconnector

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/svc/svc-collector/pkg/scorerecord"
)

// scoringLogRecord is one gen_ai.evaluation.result log record without an id of its own.
type scoringLogRecord struct {
	name  string
	value float64
	span  byte
	time  pcommon.Timestamp // 0: none, the observed time counts
}

func (r scoringLogRecord) appendTo(lrs plog.LogRecordSlice) {
	lr := lrs.AppendEmpty()
	lr.SetEventName(scorerecord.GenAIEvaluationEvent)
	lr.SetTraceID(testTraceID)
	lr.SetSpanID(pcommon.SpanID{0, 0, 0, 0, 0, 0, 0, r.span})
	lr.SetTimestamp(r.time)
	lr.SetObservedTimestamp(1_700_000_000_000_000_000 + pcommon.Timestamp(r.span))
	lr.Attributes().PutStr(scorerecord.GenAIEvaluationName, r.name)
	lr.Attributes().PutDouble(scorerecord.GenAIEvaluationScoreValue, r.value)
}

// appendNoise appends a log record that is not a score.
func appendNoise(lrs plog.LogRecordSlice, body string) {
	lrs.AppendEmpty().Body().SetStr(body)
}

// A client may batch the same evaluation log events however it likes (a retry, another batch
// size, other records around them): each event keeps its score id, so a resend replaces the
// score at the platform instead of duplicating it.
func TestLogRecordScoreIDsDoNotDependOnBatching(t *testing.T) {
	events := []scoringLogRecord{
		{"relevance", 0.75, 1, 1_700_000_000_000_000_000},
		{"toxicity", 0.1, 1, 1_700_000_000_000_000_000},
		{"relevance", 0.5, 2, 1_700_000_001_000_000_000},
		{"coherence", 0.9, 3, 0},
	}
	oneScope := func(order []int, noise bool) []plog.Logs {
		ld := plog.NewLogs()
		lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
		for _, i := range order {
			if noise {
				appendNoise(lrs, "before")
			}
			events[i].appendTo(lrs)
		}
		return []plog.Logs{ld}
	}
	shapes := []struct {
		name    string
		batches func() []plog.Logs
	}{
		{"one request", func() []plog.Logs { return oneScope([]int{0, 1, 2, 3}, false) }},
		{"reversed order", func() []plog.Logs { return oneScope([]int{3, 2, 1, 0}, false) }},
		{"other records around", func() []plog.Logs { return oneScope([]int{0, 1, 2, 3}, true) }},
		{"one request per event", func() []plog.Logs {
			var out []plog.Logs
			for i := len(events) - 1; i >= 0; i-- {
				out = append(out, oneScope([]int{i}, false)...)
			}
			return out
		}},
		{"split over scopes and resources", func() []plog.Logs {
			ld := plog.NewLogs()
			first := ld.ResourceLogs().AppendEmpty()
			appendNoise(first.ScopeLogs().AppendEmpty().LogRecords(), "other scope")
			events[2].appendTo(first.ScopeLogs().AppendEmpty().LogRecords())
			second := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
			events[1].appendTo(second)
			events[3].appendTo(second)
			events[0].appendTo(second)
			return []plog.Logs{ld}
		}},
	}
	idsOf := func(batches []plog.Logs) map[string]string {
		sink := &consumertest.LogsSink{}
		c := newTestConnector(t, 1, sink, nil)
		for _, ld := range batches {
			require.NoError(t, c.ConsumeLogs(context.Background(), ld))
		}
		ids := map[string]string{}
		for _, r := range records(sink) {
			ids[r.Name+"@"+r.ObservationID] = r.ID
		}
		return ids
	}
	want := idsOf(shapes[0].batches())
	require.Len(t, want, len(events))
	for _, shape := range shapes[1:] {
		t.Run(shape.name, func(t *testing.T) {
			assert.Equal(t, want, idsOf(shape.batches()))
		})
	}
}
