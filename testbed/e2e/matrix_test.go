package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
)

// Issue 27: real JavaScript instrumentations (testbed/instrumentation, installed by `npm ci`) make
// LLM calls against a mock LLM server, each inside the application's HTTP server span, and export
// plain OTLP to the gateway with the shipped config. For each library: every LLM span reaches the
// platform once and nothing else does; each observation sits below its nearest delivered
// ancestor; each call's input and output show as the platform maps them, masked, with the call's
// own words around the masked data and no other call's content; type, model and usage are what a
// direct export shows (the clients' trace exports also go straight to a second local platform).
// Everything is read from the local platforms' records, never recomputed here; personal data is
// looked for in those records and in the spans as the platform received them (deliveryTap: the
// records keep no span events). The application's HTTP spans come from the real HTTP instrumentations
// (instrumentation-http, instrumentation-undici), and which spans must be kept is the default
// filter's rule computed here (defaultFilterKeeps). The run's coverage table must equal the
// committed one (matrix_coverage_test.go; -update-coverage rewrites it).

// matrixManifest is what `node run.mjs <library> --manifest FILE` writes.
type matrixManifest struct {
	Library  string            `json:"library"`
	Packages map[string]string `json:"packages"`
	Node     string            `json:"node"`
	Calls    []matrixCall      `json:"calls"`
	Spans    []matrixSpan      `json:"spans"`
	Records  int               `json:"records"`
	Resent   bool              `json:"resent"`
	Failures []string          `json:"failures"`
	Errors   []string          `json:"errors"`
}

type matrixCall struct {
	Tag          string `json:"tag"`
	Kind         string `json:"kind"`
	Model        string `json:"model"`
	TraceID      string `json:"traceId"`
	ServerSpanID string `json:"serverSpanId"`
}

type matrixSpan struct {
	TraceID      string         `json:"traceId"`
	SpanID       string         `json:"spanId"`
	ParentSpanID string         `json:"parentSpanId"`
	Name         string         `json:"name"`
	Scope        string         `json:"scope"`
	ScopeVersion string         `json:"scopeVersion"`
	Attributes   map[string]any `json:"attributes"`
	Events       []spanEvent    `json:"events"`
}

// spanEvent is a span event, as the manifest and the delivery tap record it.
type spanEvent struct {
	Name       string         `json:"name"`
	Attributes map[string]any `json:"attributes"`
}

// matrixKnownScopes are the scopes whose spans the gateway's default filter keeps, boundary-aware
// (the scope equals the entry or starts with it followed by "."), written here from the design's
// list rather than taken from the processor, so that a default wider than that list (one that kept
// the HTTP instrumentations' spans, say) fails the matrix.
var matrixKnownScopes = func() []string {
	scopes := []string{"svc-sdk", "agent_framework", "autogen-core", "haystack", "langsmith", "litellm",
		"openinference", "pydantic-ai", "strands-agents", "vllm"}
	for _, lib := range strings.Fields(`agno alephalpha anthropic aws_bedrock bedrock cohere crewai gemini
		google_genai google_generativeai groq haystack langchain llamaindex mistralai ollama openai
		openai_agents openai_v2 replicate sagemaker together transformers vertex_ai vertexai voyageai watsonx writer`) {
		scopes = append(scopes, "opentelemetry.instrumentation."+lib)
	}
	return scopes
}()

// defaultFilterKeeps is the default filter's rule for one span as the client sent it: scope
// `svc-sdk` or a known scope (boundary-aware; the Vercel AI SDK's `ai` exactly), any attribute
// named `gen_ai.*`, and beyond the svc SDKs' filter the OpenInference JS scopes
// (`@arizeai/openinference-instrumentation-*`) and the attribute `openinference.span.kind`.
func defaultFilterKeeps(s matrixSpan) bool {
	if s.Scope == "ai" || strings.HasPrefix(s.Scope, "@arizeai/openinference-instrumentation-") {
		return true
	}
	for _, k := range matrixKnownScopes {
		if s.Scope == k || strings.HasPrefix(s.Scope, k+".") {
			return true
		}
	}
	for k := range s.Attributes {
		if strings.HasPrefix(k, "gen_ai.") || k == "openinference.span.kind" {
			return true
		}
	}
	return false
}

// matrixPII is what run.mjs puts in every prompt (and the mock in every answer), and
// maskedPrompt/maskedAnswer are the words a user must see instead.
var matrixPII = []string{"jane.doe@example.com", "+44 20 7946 0958", "7946 0958", "4111 1111 1111 1111",
	"DE89 3704 0044 0532 0130 00", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"}

func maskedPrompt(tag string) []string {
	return []string{"Ticket " + tag + ": I am [EMAIL], call me on [PHONE].", "Refund card [CARD] to IBAN [IBAN]; my key is [API_KEY]."}
}

func maskedAnswer(tag string) []string {
	return []string{"Ticket " + tag + " done: refund to card [CARD] confirmed, receipt sent to [EMAIL]."}
}

// matrixLibrary is one row of the matrix: the node client's name and what the table says of it.
type matrixLibrary struct {
	name string
	// label is the library as users know it.
	label string
	// note is what a user of the library should know, in the table.
	note string
}

var matrixLibraries = []matrixLibrary{
	{name: "openinference-openai", label: "OpenInference OpenAI (JS)"},
	{name: "openinference-langchain", label: "OpenInference LangChain (JS), a chain",
		note: "needs `LANGCHAIN_CALLBACKS_BACKGROUND=false`: with LangChain's default background callbacks, a later call's spans land in the first request's trace (client side, before any export)"},
	{name: "traceloop-openai", label: "Traceloop (OpenLLMetry JS) OpenAI"},
	{name: "traceloop-anthropic", label: "Traceloop (OpenLLMetry JS) Anthropic",
		note: "the Anthropic SDK also writes its own `anthropic.messages.create` span (scope `com.anthropic.sdk.typescript`, gen_ai.* without content): kept, a second generation per call, as in a direct export"},
	{name: "otel-openai", label: "OpenTelemetry OpenAI (JS contrib), content as log events",
		note: "content arrives as log records; a direct export shows no input/output, the gateway joins it"},
	{name: "elastic-openai", label: "Elastic OpenAI (EDOT JS), content as log events",
		note: "instruments openai 4.x only (openai 4.104.0 from testbed/instrumentation/openai-v4); content as log records, joined by the gateway"},
	{name: "vercel-ai", label: "Vercel AI SDK (`ai` + `@ai-sdk/openai`), experimental_telemetry"},
	{name: "langsmith", label: "LangSmith OpenTelemetry mode (`traceable` + `wrapOpenAI`)"},
	{name: "svc-sdk-v3", label: "svc JS SDK shape, old major (hand-written, scope `svc-sdk` 3.38.0)"},
	{name: "svc-sdk-v6", label: "svc JS SDK shape, new major (hand-written, scope `svc-sdk` 6.0.0)"},
}

// instrumentationDir is testbed/instrumentation, whose node_modules `make e2e-test` installs with npm ci.
func instrumentationDir(t *testing.T) string {
	t.Helper()
	if os.Getenv("SVC_OTELCOL_BIN") == "" { // as every end-to-end test: `make e2e-test` sets both up
		t.Skip("SVC_OTELCOL_BIN is not set: no collector binary to test (run `make e2e-test`)")
	}
	dir := filepath.Join(collector.RepoRoot(), "testbed", "instrumentation")
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		t.Fatalf("%s has no node_modules: run `make instrumentation-deps` (npm ci) first", dir)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed: the instrumentation matrix runs the real JavaScript libraries")
	}
	return dir
}

// runClient runs `node run.mjs <library>` against the gateway's OTLP/HTTP endpoint and reads its manifest.
func runClient(t *testing.T, dir, otlpHTTP, library string, extraArgs ...string) (matrixManifest, error) {
	manifestPath := filepath.Join(t.TempDir(), library+".json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := append([]string{"run.mjs", library, "--manifest", manifestPath}, extraArgs...)
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+otlpHTTP,
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=", "OTEL_EXPORTER_OTLP_HEADERS=", "MOCK_LLM_URL=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return matrixManifest{}, fmt.Errorf("node run.mjs %s: %v\n%s", library, err, out)
	}
	raw, err := os.ReadFile(manifestPath)
	if err != nil {
		return matrixManifest{}, fmt.Errorf("node run.mjs %s wrote no manifest: %v\n%s", library, err, out)
	}
	var m matrixManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return matrixManifest{}, fmt.Errorf("manifest of %s: %v", library, err)
	}
	return m, nil
}

// coverageRow is one line of the coverage table.
type coverageRow struct {
	library, versions, scopes, kept, source, masked, tree string
}

func TestInstrumentationMatrix(t *testing.T) {
	dir := instrumentationDir(t)
	// The gateway delivers through the tap, which keeps what the platform accepted, events included.
	p := startPlatform(t, "")
	tap := startDeliveryTap(t, p)
	g := startGateway(t, gatewayOptions{platform: p, env: []string{"SVC_ENDPOINT=" + tap.url}})
	// A second platform receives the clients' spans straight, as a direct export: the judge of
	// what the gateway's user must see at least.
	direct := startPlatform(t, "")
	clientOTLP := strings.TrimPrefix(startDirectExport(t, g.collector.OTLPHTTPEndpoint, direct), "http://")
	start := time.Now()

	// The clients run three at a time; each makes its calls and exports once.
	manifests := make([]matrixManifest, len(matrixLibraries))
	errs := make([]error, len(matrixLibraries))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 3)
	for i, lib := range matrixLibraries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			manifests[i], errs[i] = runClient(t, dir, clientOTLP, lib.name)
		}()
	}
	wg.Wait()
	want, dropped := 0, 0
	for i, m := range manifests {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		for _, s := range m.Spans {
			if defaultFilterKeeps(s) {
				want++
			} else {
				dropped++
			}
		}
	}
	// A span that never comes is named by the library's checks below.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if err := g.platform.WaitForSpans(ctx, want); err != nil {
		t.Errorf("%v: %d of the %d LLM spans arrived", err, g.platform.Stats().UniqueSpans, want)
	}
	// Nothing more comes: the platform holds exactly the LLM spans.
	time.Sleep(time.Second)
	if got := g.platform.Stats(); got.UniqueSpans != want || got.SpansReceived != want {
		t.Errorf("the platform received %d spans (%d distinct), want the %d LLM spans of the clients once each", got.SpansReceived, got.UniqueSpans, want)
	}

	rows := make([]coverageRow, len(matrixLibraries))
	for i, lib := range matrixLibraries {
		t.Run(lib.name, func(t *testing.T) {
			rows[i] = checkLibrary(t, g.platform, direct, tap, lib, manifests[i])
		})
	}
	tapped, events := tap.counts()
	t.Logf("matrix: %d libraries, %d LLM spans kept, %d HTTP spans dropped (%d spans with %d span events delivered), %.1fs from the first client to the last check",
		len(matrixLibraries), want, dropped, tapped, events, time.Since(start).Seconds())
	checkCoverage(t, rows)
}

// checkLibrary makes every check of one library and returns its row of the coverage table. p is
// the platform behind the gateway, direct the one the clients exported to straight.
func checkLibrary(t *testing.T, p, direct *platform.Platform, tap *deliveryTap, lib matrixLibrary, m matrixManifest) coverageRow {
	require := func(cond bool, format string, args ...any) {
		t.Helper()
		if !cond {
			t.Errorf(format, args...)
		}
	}
	require(len(m.Calls) > 0, "%s made no call", lib.name)
	sent := map[string]matrixSpan{}
	for _, s := range m.Spans {
		sent[s.SpanID] = s
	}

	row := coverageRow{library: lib.label, versions: versionsOf(m), masked: "yes", tree: "yes"}
	scopes := map[string]bool{}
	keptNames := map[string]int{}
	droppedNames := map[string]int{}
	sources := map[string]bool{}
	// Every span the default filter keeps reaches the platform once; no other span does, whichever
	// trace it is in.
	for _, s := range m.Spans {
		o, ok := p.Observation(s.TraceID, s.SpanID)
		switch {
		case !defaultFilterKeeps(s):
			require(!ok, "%s: the span %q (scope %s, no GenAI attribute) reached the platform", lib.name, s.Name, s.Scope)
			droppedNames[fmt.Sprintf("`%s` `%s`", s.Scope, s.Name)]++
		case !ok:
			require(false, "%s: the LLM span %q (scope %s) did not reach the platform", lib.name, s.Name, s.Scope)
		default:
			require(o.Deliveries == 1, "%s: %q delivered %d times", lib.name, s.Name, o.Deliveries)
			scopes[s.Scope+" "+s.ScopeVersion] = true
		}
	}
	for _, call := range m.Calls {
		delivered := p.ObservationsByTrace(call.TraceID)
		for _, o := range delivered {
			s, ok := sent[o.ID]
			require(ok, "%s: the platform holds a span the client did not send: %q", call.Tag, o.Name)
			d, tapped := tap.span(o.TraceID, o.ID)
			require(tapped, "%s: the platform holds %q, the tap saw no delivery of it", call.Tag, o.Name)
			if !ok || !tapped {
				continue
			}
			// Below its nearest delivered ancestor.
			wantParent := s.ParentSpanID
			for wantParent != "" {
				if a, ok := sent[wantParent]; !ok || defaultFilterKeeps(a) {
					break
				}
				wantParent = sent[wantParent].ParentSpanID
			}
			if o.ParentObservationID != wantParent {
				row.tree = "no"
				t.Errorf("%s: %q has parent %q, want its nearest delivered ancestor %q", call.Tag, o.Name, o.ParentObservationID, wantParent)
			}
			// Nothing personal, anywhere: the span as delivered (attributes, events, resource,
			// links) and the platform's record of it.
			all := d.Text + jsonOf(o)
			for _, pii := range matrixPII {
				if strings.Contains(all, pii) {
					row.masked = "no"
					t.Errorf("%s: %q carries %q", call.Tag, o.Name, pii)
				}
			}
			// Type, model and usage as the direct export shows them; input and output at least as much.
			want, ok := direct.Observation(o.TraceID, o.ID)
			if !ok {
				t.Errorf("%s: %q is not on the platform the client exported to directly", call.Tag, o.Name)
				continue
			}
			require(o.Type == want.Type, "%s: %q type %s, a direct export shows %s", call.Tag, o.Name, o.Type, want.Type)
			require(o.Model == want.Model, "%s: %q model %q, a direct export shows %q", call.Tag, o.Name, o.Model, want.Model)
			require(jsonOf(o.Usage) == jsonOf(want.Usage), "%s: %q usage %v, a direct export shows %v", call.Tag, o.Name, o.Usage, want.Usage)
			require(want.Input == "" || o.Input != "", "%s: %q lost its input", call.Tag, o.Name)
			require(want.Output == "" || o.Output != "", "%s: %q lost its output", call.Tag, o.Name)
			keptNames[fmt.Sprintf("%s `%s`", strings.ToLower(o.Type), o.Name)]++
			// No other call's content.
			for _, other := range m.Calls {
				if other.Tag != call.Tag && (strings.Contains(o.Input, other.Tag+":") || strings.Contains(o.Output, other.Tag+" ")) {
					t.Errorf("%s: %q shows the content of %s", call.Tag, o.Name, other.Tag)
				}
			}
		}
		// The call's generation shows its input and output, masked, with its own words.
		var shown bool
		var gens []string
		for _, o := range delivered {
			if o.Type != platform.TypeGeneration {
				continue
			}
			gens = append(gens, fmt.Sprintf("%q model=%q usage=%v in=%.120q out=%.120q", o.Name, o.Model, o.Usage, o.Input, o.Output))
			if containsAll(o.Input, maskedPrompt(call.Tag)) && containsAll(o.Output, maskedAnswer(call.Tag)) {
				shown = true
				require(o.Model == call.Model, "%s: %q shows model %q, the call used %q", call.Tag, o.Name, o.Model, call.Model)
				d, _ := tap.span(o.TraceID, o.ID)
				sources[contentKeys(d, maskedPrompt(call.Tag)[0])+" / "+contentKeys(d, maskedAnswer(call.Tag)[0])] = true
			}
		}
		if !shown {
			sources[fmt.Sprintf("(%s: no generation shows its masked input and output)", call.Kind)] = true
			t.Errorf("%s (%s): no generation shows the call's masked input %q and output %q; generations: %s",
				call.Tag, call.Kind, maskedPrompt(call.Tag), maskedAnswer(call.Tag), strings.Join(gens, "; "))
		}
	}
	row.scopes = joinSorted(scopes, "`", ", ")
	row.source = joinSorted(sources, "", "; ")
	if m.Records > 0 {
		row.source += fmt.Sprintf(" (joined from %d log records)", m.Records)
	}
	row.kept = fmt.Sprintf("%d call(s) (%s): %s; dropped: %s", len(m.Calls), callKinds(m), countedList(keptNames), countedList(droppedNames))
	if lib.note != "" {
		row.kept += "; " + lib.note
	}
	return row
}

// contentKeys names the attributes and events of the delivered span whose values hold phrase
// (indexes written N), for the table's "input / output from" column: the platform's records say
// what input and output are, not which attribute they came from.
func contentKeys(d deliveredSpan, phrase string) string {
	keys := map[string]bool{}
	for k, v := range d.Attributes {
		if strings.Contains(jsonOf(v), phrase) {
			keys["`"+attributeIndex.ReplaceAllString(k, ".N.")+"`"] = true
		}
	}
	for _, e := range d.Events {
		if strings.Contains(jsonOf(e.Attributes), phrase) {
			keys["event `"+e.Name+"`"] = true
		}
	}
	if len(keys) == 0 {
		return "(none)"
	}
	return joinSorted(keys, "", ", ")
}

// attributeIndex is the index in an indexed attribute name (llm.input_messages.0.message.content).
var attributeIndex = regexp.MustCompile(`\.\d+\.`)

// countedList is "2× a, 1× b", sorted.
func countedList(counts map[string]int) string {
	parts := make([]string, 0, len(counts))
	for n, c := range counts {
		parts = append(parts, fmt.Sprintf("%d× %s", c, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func callKinds(m matrixManifest) string {
	var kinds []string
	for _, c := range m.Calls {
		kinds = append(kinds, c.Kind)
	}
	return strings.Join(kinds, ", ")
}

func versionsOf(m matrixManifest) string {
	var out []string
	for name, v := range m.Packages {
		out = append(out, fmt.Sprintf("`%s` %s", name, v))
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "(no package: spans written with `@opentelemetry/api`)"
	}
	return strings.Join(out, ", ")
}

func joinSorted(set map[string]bool, quote, sep string) string {
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, quote+strings.TrimSpace(s)+quote)
	}
	sort.Strings(out)
	return strings.Join(out, sep)
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
