package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// Tests of the svcmetadata processor in the built distribution (issues 4 and 16): metadata reaches
// the platform in the encoding the platform decodes for that span (docs/contract.md §5),
// and the default config's masking keeps e-mail addresses away from it.

const e2eEmail = "jane.doe@example.com"

// thirdPartySpan sends one GenAI span of a Go service (no svc SDK) with typed metadata, a nested
// object (as a bare JSON metadata object: OpenTelemetry Go has no map attributes), propagated
// metadata (one value of 199 characters), and an e-mail address in input, output and metadata.
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
		attribute.String("svc.trace.metadata.notes", strings.Repeat("x", 199)),
	))
	span.End()
	flush(t, tp)
	g.waitForSpans(t, 1)
	id := span.SpanContext().TraceID()
	return hex.EncodeToString(id[:])
}

// A third-party span's metadata is stored by the platform as it arrives, so the gateway passes
// its OTLP values and types on: `prod` reads back as `prod` (not `"prod"`), 5 as the number 5,
// and a 199-character propagated value is not dropped (the 200-character limit is measured on
// the new SDKs' JSON text only).
func TestThirdPartyMetadataArrivesAsSent(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	traceID := thirdPartySpan(t, g)

	obs, err := g.readAPI().Observations(context.Background(), traceID, "core,basic,metadata,trace_context")
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 1 {
		t.Fatalf("platform has %d observations of the trace, want 1", len(obs))
	}
	assertMetadata(t, "metadata", obs[0].Metadata, map[string]any{
		"env":         "prod",
		"count":       float64(5), // an OTLP int, written by the read API as the JSON number 5
		"enabled":     true,
		"temperature": 0.25,
		"tags":        []any{"a", "b"},
		"contact":     "[EMAIL]",
		// The bare JSON object, flattened per key into raw OTLP values (a map of typed values).
		"plan": map[string]any{"tier": "gold", "seats": float64(3), "trial": false},
	})
	assertMetadata(t, "trace metadata", obs[0].TraceMetadata, map[string]any{
		"tenant": "acme",
		"notes":  strings.Repeat("x", 199),
	})

	// The stored values keep their types, so the typed filters of the v2 API match them.
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
}

// metadataSDK is one sender of TestMetadataEncodingFollowsThePlatformRule.
type metadataSDK struct {
	name           string
	language       string // telemetry.sdk.language; empty for a Go service
	scope          string
	version        string
	attrs          []attribute.KeyValue // the metadata, in the form this SDK writes it
	want           map[string]any       // observation metadata read back through the v2 API
	wantPropagated map[string]any       // trace metadata read back
}

// End to end with the default config: a third-party span, an old-SDK span (JS v5) and a new-SDK
// span (JS v6), each with string, number, boolean and array metadata, read back through the v2
// observations API exactly as the platform's rule says. Only the v6 span's metadata is JSON text,
// which the platform decodes; the others are stored as they arrive. No resource reaches the
// platform with an attribute its SDK did not send (in particular no svc.metadata.encoding).
func TestMetadataEncodingFollowsThePlatformRule(t *testing.T) {
	raw := []attribute.KeyValue{
		attribute.String("svc.observation.metadata.env", "prod"),
		attribute.Int("svc.observation.metadata.count", 5),
		attribute.Bool("svc.observation.metadata.enabled", true),
		attribute.StringSlice("svc.observation.metadata.tags", []string{"a", "b"}),
		attribute.String("svc.trace.metadata.tenant", "acme"),
		attribute.String("svc.trace.metadata.notes", strings.Repeat("n", 199)),
	}
	asSent := map[string]any{"env": "prod", "count": float64(5), "enabled": true, "tags": []any{"a", "b"}}
	sdks := []metadataSDK{
		{
			name: "third-party", scope: "checkout/llm", version: "1.4.0", attrs: raw,
			want:           asSent,
			wantPropagated: map[string]any{"tenant": "acme", "notes": strings.Repeat("n", 199)},
		},
		{
			name: "svc JS SDK v5", language: "nodejs", scope: "svc-sdk", version: "5.9.0", attrs: raw,
			want:           asSent,
			wantPropagated: map[string]any{"tenant": "acme", "notes": strings.Repeat("n", 199)},
		},
		{
			name: "svc JS SDK v6", language: "nodejs", scope: "svc-sdk", version: "6.0.0",
			attrs: []attribute.KeyValue{
				attribute.String("svc.observation.metadata.env", `"prod"`),
				attribute.String("svc.observation.metadata.count", "5"),
				attribute.String("svc.observation.metadata.enabled", "true"),
				attribute.String("svc.observation.metadata.tags", `["a","b"]`),
				attribute.String("svc.trace.metadata.tenant", `"acme"`),
				// 201 characters of JSON: over the platform's limit, dropped by the gateway.
				attribute.String("svc.trace.metadata.notes", `"`+strings.Repeat("n", 199)+`"`),
			},
			want:           map[string]any{"env": "prod", "count": float64(5), "enabled": true, "tags": []any{"a", "b"}},
			wantPropagated: map[string]any{"tenant": "acme"},
		},
	}

	g := startGateway(t, gatewayOptions{})
	traceIDs := make([]string, len(sdks))
	sentResources := make([]map[string]any, len(sdks))
	for i, sdk := range sdks {
		resAttrs := []attribute.KeyValue{semconv.ServiceName("metadata-" + strings.ReplaceAll(sdk.name, " ", "-"))}
		if sdk.language != "" {
			resAttrs = append(resAttrs, semconv.TelemetrySDKLanguageKey.String(sdk.language))
		}
		sentResources[i] = map[string]any{}
		for _, kv := range resAttrs {
			sentResources[i][string(kv.Key)] = kv.Value.AsInterface()
		}
		tp := g.tracerProviderFor(t, resource.NewWithAttributes(semconv.SchemaURL, resAttrs...))
		attrs := append([]attribute.KeyValue{
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.request.model", "gpt-4o"),
		}, sdk.attrs...)
		_, span := tp.Tracer(sdk.scope, trace.WithInstrumentationVersion(sdk.version)).
			Start(context.Background(), "chat gpt-4o", trace.WithAttributes(attrs...))
		span.End()
		flush(t, tp)
		id := span.SpanContext().TraceID()
		traceIDs[i] = hex.EncodeToString(id[:])
	}
	g.waitForSpans(t, len(sdks))

	for i, sdk := range sdks {
		t.Run(sdk.name, func(t *testing.T) {
			obs, err := g.readAPI().Observations(context.Background(), traceIDs[i], "core,metadata,trace_context")
			if err != nil {
				t.Fatal(err)
			}
			if len(obs) != 1 {
				t.Fatalf("platform has %d observations of the trace, want 1", len(obs))
			}
			assertMetadata(t, "metadata", obs[0].Metadata, sdk.want)
			assertMetadata(t, "trace metadata", obs[0].TraceMetadata, sdk.wantPropagated)

			stored, ok := g.platform.Observation(traceIDs[i], obs[0].ID)
			if !ok {
				t.Fatal("observation not stored")
			}
			if !reflect.DeepEqual(stored.ResourceAttributes, sentResources[i]) {
				t.Errorf("resource attributes at the platform %v, want exactly what the SDK sent %v",
					stored.ResourceAttributes, sentResources[i])
			}
		})
	}
}

// assertMetadata compares metadata read back through the API with want, values and JSON types.
func assertMetadata(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	for key, w := range want {
		if g, ok := got[key]; !ok || !reflect.DeepEqual(g, w) {
			t.Errorf("%s[%q] = %#v (%T), want %#v (%T)", what, key, g, g, w, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s has keys %v, want exactly %d", what, metadataKeys(got), len(want))
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
