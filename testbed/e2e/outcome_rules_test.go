package e2e

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/sampling"
	"github.com/svc/svc-collector/testbed/collector"
)

// outcomeTokensFilterOverlay keeps, beside SVC_SAMPLE_RATE of the rest, every trace whose calls
// used over 5,000 tokens (a tokens rule) and every trace of the user "vip" (a v2 filter rule).
const outcomeTokensFilterOverlay = `yaml:
extensions:
  svcsampling:
    outcome:
      settle_duration: 2s
      rules:
        - {name: wordy, kind: tokens, tokens_over: 5000}
        - name: vip
          kind: filter
          filter: '[{"type":"string","column":"userId","operator":"=","value":"vip"}]'
`

// TestOutcomeSamplingTokensAndFilterRules: the two rule kinds the outcome workload does not
// exercise, with the built gateway. Traces of an agent and its call (children first, the root
// later, as SDKs export them): a quarter used 6,500 tokens, a quarter belong to the user "vip"
// (Vercel AI SDK telemetry metadata), the rest 300 tokens of other users. Every wordy and every
// vip trace reaches the platform whole with its rule as sampling_reason; of the rest exactly the
// traces the 25% trace-id rule keeps, whole, and no other span.
func TestOutcomeSamplingTokensAndFilterRules(t *testing.T) {
	const rate, n = 0.25, 40
	g := startGateway(t, gatewayOptions{
		configs: []string{collector.DefaultConfig(), outcomeTokensFilterOverlay},
		env:     []string{fmt.Sprintf("SVC_SAMPLE_RATE=%v", rate)},
	})
	children, roots := ptrace.NewTraces(), ptrace.NewTraces()
	type sent struct {
		id     pcommon.TraceID
		reason string // the rule that must keep it; "" for the rate
	}
	traces := make([]sent, n)
	start := time.Now().Add(-time.Minute)
	for i := range traces {
		sum := sha256.Sum256(fmt.Appendf(nil, "tokens-filter trace %d", i))
		var tid pcommon.TraceID
		copy(tid[:], sum[:])
		spanID := func(role string) pcommon.SpanID {
			h := fnv.New64a()
			_, _ = h.Write(tid[:])
			_, _ = h.Write([]byte(role))
			var sid pcommon.SpanID
			binary.BigEndian.PutUint64(sid[:], h.Sum64()|1)
			return sid
		}
		root, call := spanID("agent"), spanID("call")
		addLateSpanTestSpan(children, "assistant", "ai", "ai.generateText.doGenerate", ptrace.SpanKindClient, tid, call, root, false)
		s := children.ResourceSpans().At(children.ResourceSpans().Len() - 1).ScopeSpans().At(0).Spans().At(0)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Second)))
		attrs := s.Attributes()
		attrs.PutStr("gen_ai.request.model", "gpt-4o")
		input, output, user := int64(250), int64(50), fmt.Sprintf("user-%d", i)
		switch i % 4 {
		case 0:
			input, output = 6000, 500
			traces[i].reason = "wordy"
		case 1:
			user = "vip"
			traces[i].reason = "vip"
		}
		attrs.PutInt("gen_ai.usage.input_tokens", input)
		attrs.PutInt("gen_ai.usage.output_tokens", output)
		attrs.PutStr("ai.telemetry.metadata.userId", user)
		addLateSpanTestSpan(roots, "assistant", "ai", "ai.generateText", ptrace.SpanKindInternal, tid, root, pcommon.SpanID{}, true)
		traces[i].id = tid
	}
	senders := newTierSenders(t, g.collector, 1)
	senders.sendUntilAcknowledged(t, 0, false, mustMarshal(t, children))
	senders.sendUntilAcknowledged(t, 0, false, mustMarshal(t, roots))

	ratio := sampling.NewRatio(rate)
	want := 0
	for _, tr := range traces {
		if tr.reason != "" || ratio.Keep(tr.id) {
			want += 2
		}
	}
	g.waitForSpans(t, want)
	time.Sleep(4 * time.Second) // settle_duration twice: what a wrong decision delivers arrives too

	var ruled, rest, restKept int
	for _, tr := range traces {
		id := tr.id.String()
		got := len(spanIDs(g.platform.ObservationsByTrace(id)))
		keep := tr.reason != "" || ratio.Keep(tr.id)
		reason := tr.reason
		if reason == "" {
			reason = "sample"
			rest++
		}
		switch {
		case keep && got != 2:
			t.Errorf("trace %s (%s): %d of its 2 spans delivered", id, reason, got)
		case !keep && got != 0:
			t.Errorf("trace %s: no rule keeps it and the rate drops it, yet %d spans delivered", id, got)
		case keep && tr.reason != "":
			ruled++
		case keep:
			restKept++
		}
		if keep {
			if trace, ok := g.platform.Trace(id); !ok || trace.Metadata["sampling_reason"] != reason {
				t.Errorf("trace %s: metadata sampling_reason %v, want %q", id, trace.Metadata["sampling_reason"], reason)
			}
		}
	}
	t.Logf("%d traces: %d kept by the tokens and filter rules, %d of the other %d by the rate (%v)", n, ruled, restKept, rest, rate)
	if ruled != n/2 || restKept == 0 || restKept == rest {
		t.Errorf("no mix to test: %d ruled (want %d), %d of %d kept by the rate", ruled, n/2, restKept, rest)
	}
}
