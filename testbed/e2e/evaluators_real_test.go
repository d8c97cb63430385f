package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/svc/svc-collector/testbed/collector"
)

// With the evaluators overlay and the real libraries (testbed/instrumentation's packages, which
// `make instrumentation-deps` installs): the Vercel AI SDK's generation answering valid JSON gets
// json_output 1, the one answering invalid JSON 0; a chat call the model refuses, instrumented by
// the official @opentelemetry/instrumentation-openai (its content sent as log records, joined onto
// the span by the gateway as gen_ai.output.messages), gets refusal.
func TestEvaluatorsWithRealLibraries(t *testing.T) {
	dir := instrumentationDir(t)
	g := startGateway(t, gatewayOptions{configs: []string{
		collector.DefaultConfig(),
		filepath.Join(collector.RepoRoot(), "distribution", "examples", "evaluators.yaml"),
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("testdata", "evaluators-real-libraries.mjs"), dir)
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+g.collector.OTLPHTTPEndpoint)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var traces map[string]string
	if err := json.Unmarshal(out, &traces); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}

	want := map[string][]string{
		"vercelValidJSON":   {"json_output=1"},
		"vercelInvalidJSON": {"json_output=0"},
		"openaiRefusal":     {"refusal=1"},
	}
	g.waitForScores(t, 3)
	for name, traceID := range traces {
		var got []string
		for _, sc := range g.readScores(t, url.Values{"traceId": {traceID}}) {
			got = append(got, fmt.Sprintf("%s=%v", sc.Name, sc.Value))
		}
		sort.Strings(got)
		if fmt.Sprint(got) != fmt.Sprint(want[name]) {
			t.Errorf("%s (trace %s): scores %v, want %v", name, traceID, got, want[name])
		}
	}
}
