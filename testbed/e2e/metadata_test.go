package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Tests of the svcmetadata processor in the built distribution (issue 4): metadata that a
// third-party instrumentation sets with plain OTLP types arrives at the platform typed, as the
// new SDKs' metadata does, and the default config's masking keeps e-mail addresses away from it.

const e2eEmail = "jane.doe@example.com"

// thirdPartySpan sends one GenAI span of a Go service (no svc SDK) with typed metadata, a nested
// object (as a bare JSON metadata object: OpenTelemetry Go has no map attributes), propagated
// metadata over and under the limit, and an e-mail address in input, output and metadata.
func thirdPartySpan(t *testing.T, g *gateway) string {
	t.Helper()
	tp := g.tracerProvider(t, "checkout")
	_, span := tp.Tracer("checkout/llm").Start(context.Background(), "chat gpt-4o", trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.request.model", "gpt-4o"),
		attribute.String("svc.observation.input", `[{"role":"user","content":"Mail the receipt to `+e2eEmail+`"}]`),
		attribute.String("svc.observation.output", "Sent to "+e2eEmail+"."),
		attribute.String("svc.observation.metadata.env", "prod"),
		attribute.Int("svc.observation.metadata.count", 5),
		attribute.Bool("svc.observation.metadata.enabled", true),
		attribute.Float64("svc.observation.metadata.temperature", 0.25),
		attribute.StringSlice("svc.observation.metadata.tags", []string{"a", "b"}),
		attribute.String("svc.observation.metadata.contact", e2eEmail),
		attribute.String("svc.observation.metadata", `{"plan": {"tier": "gold", "seats": 3, "trial": false}}`),
		attribute.String("svc.trace.metadata.tenant", "acme"),
		attribute.String("svc.trace.metadata.too_long", strings.Repeat("x", 199)),
	))
	span.End()
	flush(t, tp)
	g.waitForSpans(t, 1)
	id := span.SpanContext().TraceID()
	return hex.EncodeToString(id[:])
}

func TestMetadataArrivesTyped(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	traceID := thirdPartySpan(t, g)

	obs := g.observations(t, traceID)
	if len(obs) != 1 {
		t.Fatalf("platform has %d observations of the trace, want 1", len(obs))
	}
	md := obs[0].Metadata
	want := map[string]any{
		"env":         "prod", // the string itself, not "\"prod\"": the platform decoded it
		"count":       float64(5),
		"enabled":     true,
		"temperature": 0.25,
		"tags":        []any{"a", "b"},
		"contact":     "[EMAIL]",
		"plan":        map[string]any{"tier": "gold", "seats": float64(3), "trial": false},
	}
	for key, w := range want {
		if got, ok := md[key]; !ok || fmt.Sprint(got) != fmt.Sprint(w) || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", w) {
			t.Errorf("metadata[%q] = %#v (%T), want %#v (%T)", key, got, got, w, w)
		}
	}
	if len(md) != len(want) {
		t.Errorf("metadata has keys %v, want exactly %d", metadataKeys(md), len(want))
	}

	// Typed filters of the v2 API match the values as numbers and booleans, nested by path.
	for _, f := range []string{
		`[{"type":"number","column":"metadata.count","operator":">=","value":5}]`,
		`[{"type":"boolean","column":"metadata.enabled","operator":"=","value":true}]`,
		`[{"type":"number","column":"metadata.plan.seats","operator":"=","value":3}]`,
		`[{"type":"string","column":"metadata.env","operator":"=","value":"prod"}]`,
	} {
		if n := countFiltered(t, g, traceID, f); n != 1 {
			t.Errorf("filter %s matched %d observations, want 1", f, n)
		}
	}

	// Propagated metadata: within the limit it arrives, over it (199 characters) it is dropped.
	stored, ok := g.platform.Observation(traceID, obs[0].ID)
	if !ok {
		t.Fatal("observation not stored")
	}
	if got := stored.TraceMetadata["tenant"]; got != "acme" {
		t.Errorf("trace metadata tenant = %#v, want \"acme\"", got)
	}
	if _, ok := stored.TraceMetadata["too_long"]; ok {
		t.Error("propagated metadata over 200 characters of JSON reached the platform")
	}
}

func TestMaskedEmailNeverReachesThePlatform(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	traceID := thirdPartySpan(t, g)

	obs := g.observations(t, traceID)
	if len(obs) != 1 {
		t.Fatalf("platform has %d observations of the trace, want 1", len(obs))
	}
	if in := derefOrEmpty(obs[0].Input); in != `[{"role":"user","content":"Mail the receipt to [EMAIL]"}]` {
		t.Errorf("input = %q, want the messages with the address masked", in)
	}
	if out := derefOrEmpty(obs[0].Output); out != "Sent to [EMAIL]." {
		t.Errorf("output = %q, want the address masked", out)
	}
	// Nothing the platform stored, in any attribute or resource attribute, holds the address.
	stored, _ := g.platform.Observation(traceID, obs[0].ID)
	if dump := fmt.Sprintf("%#v", stored); strings.Contains(dump, e2eEmail) {
		t.Errorf("the e-mail address reached the platform: %s", dump)
	}
}

// countFiltered asks the v2 observations API for the trace's observations matching filter.
func countFiltered(t *testing.T, g *gateway, traceID, filter string) int {
	t.Helper()
	q := url.Values{"traceId": {traceID}, "fields": {"core"}, "filter": {filter}}
	req, err := http.NewRequest(http.MethodGet, g.platform.URL()+"/api/public/v2/observations?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(testPublicKey+":"+testSecretKey)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("filter %s: HTTP %d", filter, resp.StatusCode)
	}
	var page struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	return len(page.Data)
}

func metadataKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
