package e2e

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/workload"
)

// TestFaultKillBetweenWholeTraceAndLateSpan: a trace arrives whole in one request (its dropped
// HTTP root, the kept agent span, and a dropped producer span `publish job` below the agent: nothing
// in it waits for a parent); then a background worker of another service exports a kept
// `execute_tool` span below `publish job`. One gateway on the default config places it below
// invoke_agent, the nearest kept ancestor (subtest "no kill"). SIGKILLed and restarted on its
// storage between the two requests, it must place it there too (issue 25: a kill never turns a
// kept span into an orphan, also when its dropped ancestors arrived before the kill). A dropped
// span of a whole trace that is neither a client nor a producer span is not remembered across a
// kill (svcspanfilterprocessor/README.md, "Crash safety"): its late children are not tested here.
func TestFaultKillBetweenWholeTraceAndLateSpan(t *testing.T) {
	for _, kill := range []bool{false, true} {
		name := map[bool]string{false: "no kill", true: "kill"}[kill]
		t.Run(name, func(t *testing.T) {
			bin := collectorBinary(t)
			p := startPlatform(t, "")
			ports, err := collector.FreePorts(1)
			if err != nil {
				t.Fatal(err)
			}
			gw := startRestartable(t, bin, p, "gateway", collector.Options{Configs: []string{collector.DefaultConfig()},
				OTLPHTTPEndpoint: fmt.Sprintf("127.0.0.1:%d", ports[0]), StorageDir: t.TempDir()})
			senders := newTierSenders(t, gw.current(), 1)

			tid := pcommon.TraceID{0x25, 0x1a, 0x7e, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
			id := func(b byte) pcommon.SpanID { return pcommon.SpanID{0x25, 0, 0, 0, 0, 0, 0, b} }
			const root, agent, publish, tool = 1, 2, 3, 4
			whole := ptrace.NewTraces()
			addLateSpanTestSpan(whole, "agent-runner", workload.ScopeHTTPServer, "POST /agent", ptrace.SpanKindServer, tid, id(root), pcommon.SpanID{}, false)
			addLateSpanTestSpan(whole, "agent-runner", workload.ScopeApp, workload.SpanAgent, ptrace.SpanKindInternal, tid, id(agent), id(root), true)
			addLateSpanTestSpan(whole, "agent-runner", "example.com/jobs", "publish job", ptrace.SpanKindProducer, tid, id(publish), id(agent), false)
			senders.sendUntilAcknowledged(t, 0, false, mustMarshal(t, whole))
			g := &gateway{platform: p, collector: gw.current()}
			g.waitForSpans(t, 1)

			if kill {
				if k := gw.killAndRestart(0); k.err != nil {
					t.Fatal(k.err)
				}
			}
			late := ptrace.NewTraces()
			addLateSpanTestSpan(late, "agent-worker", "example.com/jobs", "execute_tool lookup_order", ptrace.SpanKindInternal, tid, id(tool), id(publish), true)
			senders.sendUntilAcknowledged(t, 0, false, mustMarshal(t, late))
			g.waitForSpans(t, 2)
			// A span held for an unknown parent goes on when its wait ends: wait until none is held.
			if !eventually(time.Minute, func() bool {
				v, err := scrapeSum("http://"+gw.current().MetricsEndpoint+"/metrics", "otelcol_processor_svcspanfilter_spans_held")
				return err == nil && v == 0
			}) {
				t.Fatal("the gateway still holds spans a minute after the last request")
			}
			o, ok := p.Observation(tid.String(), id(tool).String())
			if !ok {
				t.Fatal("execute_tool is not on the platform")
			}
			if want := id(agent).String(); o.ParentObservationID != want {
				t.Errorf("execute_tool hangs from %q (publish job, dropped: %s), want invoke_agent %s", o.ParentObservationID, id(publish), want)
			}
		})
	}
}

// addLateSpanTestSpan appends to td a span of service in scope; kept spans carry a gen_ai attribute.
func addLateSpanTestSpan(td ptrace.Traces, service, scope, name string, kind ptrace.SpanKind, tid pcommon.TraceID, sid, parent pcommon.SpanID, kept bool) {
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(scope)
	s := ss.Spans().AppendEmpty()
	s.SetTraceID(tid)
	s.SetSpanID(sid)
	s.SetParentSpanID(parent)
	s.SetName(name)
	s.SetKind(kind)
	now := time.Now()
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Second)))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
	if kept {
		s.Attributes().PutStr("gen_ai.operation.name", "invoke_agent")
	}
}
