package e2e

import (
	"strings"
	"testing"
	"time"
)

// Issue 25, item 4, with the real @opentelemetry/instrumentation-openai (content as log records):
// the client exports the same spans and log records a second time, seconds after the first (as an
// SDK does when an export timed out although the gateway had it). The platform keeps the last copy
// of a span id, so that copy must still show the input and output joined onto the first. The two
// exporters retry on their own: the resent log records may arrive before the resent spans or after.
func TestResentSpansKeepTheirJoinedContent(t *testing.T) {
	dir := instrumentationDir(t)
	for _, order := range []string{"logs-first", "spans-first"} {
		t.Run(order, func(t *testing.T) { checkResend(t, dir, order) })
	}
}

func checkResend(t *testing.T, dir, order string) {
	g := startGateway(t, gatewayOptions{})
	m, err := runClient(t, dir, g.collector.OTLPHTTPEndpoint, "otel-openai", "--resend-after-ms", "8000", "--resend-order", order)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Resent || m.Records == 0 {
		t.Fatalf("the client did not resend spans and log records: %+v", m)
	}
	var chats []matrixSpan
	for _, s := range m.Spans {
		if defaultFilterKeeps(s) {
			chats = append(chats, s)
		}
	}
	g.waitForSpans(t, len(chats))
	// The second copies, when the gateway forwards them (it may also keep them back: then the first
	// copies are the last ones), arrive after the content join's wait at most.
	eventually(20*time.Second, func() bool { return g.platform.Stats().SpansReceived >= 2*len(chats) })
	time.Sleep(time.Second)
	t.Logf("the platform received %d copies of %d chat spans", g.platform.Stats().SpansReceived, len(chats))

	tags := map[string]string{}
	for _, c := range m.Calls {
		tags[c.TraceID] = c.Tag
	}
	for _, s := range chats {
		o, ok := g.platform.Observation(s.TraceID, s.SpanID)
		if !ok {
			t.Errorf("%s: %q never reached the platform", tags[s.TraceID], s.Name)
			continue
		}
		tag := tags[s.TraceID]
		if !containsAll(o.Input, maskedPrompt(tag)) || !containsAll(o.Output, maskedAnswer(tag)) {
			t.Errorf("%s: the platform's last copy of %q (delivered %d times) shows input %.160q and output %.160q; want the call's masked prompt and answer",
				tag, s.Name, o.Deliveries, o.Input, o.Output)
		}
		for _, pii := range matrixPII {
			if strings.Contains(jsonOf(o.Attributes), pii) {
				t.Errorf("%s: %q carries %q", tag, s.Name, pii)
			}
		}
	}
}
