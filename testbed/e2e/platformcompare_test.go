package e2e

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
	"github.com/svc/svc-collector/testbed/readapi"
	"github.com/svc/svc-collector/testbed/workload"
)

// What users see in the platform, direct against through the gateway (docs/platform-view.md).
// Every instrumentation case sends the same client traffic twice: once straight to a local
// platform's OTLP endpoint (Basic auth), once through the gateway (the built binary with the
// shipped distribution/config.yaml) to a second local platform. The two platforms' records are
// compared field by field through their read APIs: every field must be equal, or differ in one
// of the ways the gateway exists for (viewDifferences, the table of docs/platform-view.md).

// viewTarget is where a case sends: an OTLP/HTTP traces endpoint, the headers it needs, and what
// makes the two runs of a case send the same records: the id seed and the base time of its spans.
type viewTarget struct {
	endpoint string // full URL of the OTLP/HTTP traces endpoint
	// logsEndpoint is the OTLP/HTTP logs endpoint, empty when the target takes no logs (the
	// platform reads none).
	logsEndpoint string
	headers      map[string]string
	seed         uint64
	base         time.Time
}

// viewTraffic is what a case sent.
type viewTraffic struct {
	traceIDs []string
	spans    int // spans sent
	plain    int // of which ordinary (non-GenAI) spans, which the gateway does not forward
	// legacyTraceIO are the values sent as svc.trace.input / svc.trace.output.
	legacyTraceIO []string
	// logContent: the case sends content as log events, which only the gateway joins.
	logContent bool
	// byStructure: the case's ids and times are its own (a real library's program), so records
	// pair up by trace order and, within a trace, by name and start order; times and whatever
	// differs between two direct runs are not compared.
	byStructure bool
}

// viewCase is one instrumentation: a function that sends its client traffic to an OTLP
// endpoint. A case in another language (the Node libraries of testbed/instrumentation) is a
// function that runs its program with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / _HEADERS set from the
// target and makes its ids and times depend only on target.seed and target.base.
type viewCase struct {
	name string
	send func(t *testing.T, to viewTarget) viewTraffic
}

// The documented differences: the only ways the gateway's records may differ from a direct
// export's (docs/platform-view.md has the same table).
const (
	diffEqual      = "equal"
	diffMasked     = "masked personal data"
	diffJoined     = "content joined from log events"
	diffReparented = "parents of spans whose ancestors were dropped"
	diffLegacyIO   = "root input/output from legacy trace IO"
	diffPromoted   = "metadata promoted from other conventions, beside the originals"
	diffFiltered   = "ordinary (non-GenAI) spans not forwarded"
	diffOtherwise  = "differing otherwise"
	// diffVaries: differs between two direct runs of the same program too (not compared).
	diffVaries = "differing between two direct runs too (not compared)"
)

var viewDifferences = []string{diffMasked, diffJoined, diffReparented, diffLegacyIO, diffPromoted, diffFiltered}

// viewEmail is the personal data the clients send; the default config masks it.
const viewEmail = "jane.doe@example.com"

func TestPlatformViewDirectAndThroughTheGateway(t *testing.T) {
	direct := startPlatform(t, "")
	g := startGateway(t, gatewayOptions{})
	directRead := readapi.Client{BaseURL: direct.URL(), PublicKey: testPublicKey, SecretKey: testSecretKey}
	gatewayRead := g.readAPI()
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(testPublicKey+":"+testSecretKey))
	base := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)

	sentDirect, sentGateway := 0, 0
	for i, c := range append(viewCases(), nodeViewCases(t)...) {
		t.Run(c.name, func(t *testing.T) {
			seed := uint64(i+1) * 1_000_003
			caseBase := base.Add(time.Duration(i) * time.Second)
			directTarget := viewTarget{endpoint: direct.URL() + platform.PathTraces, headers: map[string]string{"Authorization": basic},
				seed: seed, base: caseBase}
			d := c.send(t, directTarget)
			sentDirect += d.spans
			waitSpans(t, "direct platform", direct, sentDirect)
			var again viewTraffic // a second direct run says what differs from run to run
			if d.byStructure {
				again = c.send(t, directTarget)
				sentDirect += again.spans
				waitSpans(t, "direct platform", direct, sentDirect)
			}
			gw := c.send(t, viewTarget{endpoint: "http://" + g.collector.OTLPHTTPEndpoint + "/v1/traces",
				logsEndpoint: "http://" + g.collector.OTLPHTTPEndpoint + "/v1/logs", seed: seed, base: caseBase})
			if len(d.traceIDs) != len(gw.traceIDs) || (!d.byStructure && !reflect.DeepEqual(d.traceIDs, gw.traceIDs)) {
				t.Fatalf("the two runs sent different traces: %v and %v", d.traceIDs, gw.traceIDs)
			}
			if d.byStructure {
				// Which of a program's spans go on is for the comparison to judge: wait until the
				// gateway has delivered something of every call and then nothing more for a while.
				sentGateway = waitQuiet(t, g.platform, sentGateway)
			} else {
				sentGateway += gw.spans - gw.plain
				waitSpans(t, "gateway's platform", g.platform, sentGateway)
			}

			cmp := comparison{traffic: gw}
			var varies map[string]bool
			if d.byStructure {
				runs := comparison{traffic: d}
				for n := range d.traceIDs {
					first, second := alignedViews(readView(t, directRead, d.traceIDs[n]), readView(t, directRead, again.traceIDs[n]))
					runs.trace(fmt.Sprintf("call %d", n+1), first, second)
				}
				varies = map[string]bool{}
				for _, r := range runs.results {
					if r.class != diffEqual {
						varies[r.path] = true
					}
				}
			}
			for n, id := range d.traceIDs {
				dv, gv := readView(t, directRead, id), readView(t, gatewayRead, gw.traceIDs[n])
				if d.byStructure {
					dv, gv = alignedViews(dv, gv)
					cmp.trace(fmt.Sprintf("call %d", n+1), dv, gv)
				} else {
					cmp.trace("trace "+id[:8], dv, gv)
				}
			}
			for i, r := range cmp.results {
				if varies[r.path] && r.class != diffEqual {
					cmp.results[i].class = diffVaries
				}
			}
			t.Logf("\n%s", cmp.table(c.name))
			for _, r := range cmp.results {
				if r.class == diffOtherwise {
					t.Errorf("%s: direct %s, through the gateway %s", r.path, show(r.direct), show(r.gateway))
				}
			}
		})
	}
}

// waitQuiet waits until p holds more than n spans (at most 30 seconds: the gateway may rightly
// forward none of a program's spans, which the comparison then judges), then until no more
// arrive for 3 seconds (the gateway's content join holds a span up to its wait), and returns how
// many p holds.
func waitQuiet(t *testing.T, p *platform.Platform, n int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = p.WaitForSpans(ctx, n+1)
	last, since := p.Stats().UniqueSpans, time.Now()
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if now := p.Stats().UniqueSpans; now != last {
			last, since = now, time.Now()
		} else if time.Since(since) >= 3*time.Second {
			break
		}
	}
	return last
}

func waitSpans(t *testing.T, what string, p *platform.Platform, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := p.WaitForSpans(ctx, n); err != nil {
		t.Fatalf("%s: %v (stats %+v)", what, err, p.Stats())
	}
}

// viewCases are every instrumentation shape we test: the six of workload.Shapes, content sent as
// log events, and the svc SDK's old and new majors. (The real Node libraries of testbed/instrumentation are added as
// cases of the same kind: see docs/platform-view.md.)
func viewCases() []viewCase {
	var cases []viewCase
	for _, s := range workload.Shapes {
		cases = append(cases, viewCase{name: s.Name, send: shapeTraffic(s)})
	}
	return append(cases,
		viewCase{name: "genai-semconv-log-events", send: logContentTraffic},
		viewCase{name: "svc-sdk-js-v5", send: svcSDKTraffic("nodejs", "5.4.0", false)},
		viewCase{name: "svc-sdk-python-v4", send: svcSDKTraffic("python", "4.3.0", false)},
		viewCase{name: "svc-sdk-js-v6", send: svcSDKTraffic("nodejs", "6.1.0", true)},
	)
}

// nodeViewCases are the real JavaScript libraries of testbed/instrumentation (issue 27), one
// case per library, when their packages are installed (make instrumentation-deps); none
// otherwise. SVC_INSTRUMENTATION_DIR points at another checkout's installed project.
func nodeViewCases(t *testing.T) []viewCase {
	dir := os.Getenv("SVC_INSTRUMENTATION_DIR")
	if dir == "" {
		dir = filepath.Join(collector.RepoRoot(), "testbed", "instrumentation")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		t.Logf("no real JavaScript libraries to compare: %s has no node_modules (make instrumentation-deps)", dir)
		return nil
	}
	out, err := exec.Command("node", filepath.Join(dir, "run.mjs"), "list").Output()
	if err != nil {
		t.Fatalf("node run.mjs list: %v", err)
	}
	var cases []viewCase
	for _, library := range strings.Fields(string(out)) {
		cases = append(cases, viewCase{name: "node-" + library, send: nodeTraffic(dir, library)})
	}
	return cases
}

// nodeTraffic runs `node run.mjs <library>` with the standard OTLP environment pointing at the
// target, and reads what it sent from its manifest. The platform takes no logs: a direct run
// exports none.
func nodeTraffic(dir, library string) func(t *testing.T, to viewTarget) viewTraffic {
	return func(t *testing.T, to viewTarget) viewTraffic {
		manifestPath := filepath.Join(t.TempDir(), "manifest.json")
		cmd := exec.Command("node", "run.mjs", library, "--manifest", manifestPath)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="+to.endpoint)
		var headers []string
		for k, v := range to.headers {
			headers = append(headers, k+"="+v)
		}
		if len(headers) > 0 {
			cmd.Env = append(cmd.Env, "OTEL_EXPORTER_OTLP_HEADERS="+strings.Join(headers, ","))
		}
		if to.logsEndpoint != "" {
			cmd.Env = append(cmd.Env, "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT="+to.logsEndpoint)
		} else {
			cmd.Env = append(cmd.Env, "OTEL_LOGS_EXPORTER=none")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("node run.mjs %s: %v\n%s", library, err, out)
		}
		raw, err := os.ReadFile(manifestPath)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Calls []struct {
				TraceID string `json:"traceId"`
			} `json:"calls"`
			Spans   []json.RawMessage `json:"spans"`
			Records int               `json:"records"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		tr := viewTraffic{spans: len(m.Spans), byStructure: true, logContent: m.Records > 0}
		for _, c := range m.Calls {
			tr.traceIDs = append(tr.traceIDs, c.TraceID)
		}
		return tr
	}
}

// viewCall is the LLM call every case records.
func viewCall() workload.LLMCall {
	return workload.LLMCall{
		Model: "gpt-4o", Provider: "openai",
		System: "You are a support agent.", Prompt: "Where is my order? Reach me at " + viewEmail + ".",
		Answer: "It ships tomorrow.", InputTokens: 42, OutputTokens: 7,
		Metadata: []attribute.KeyValue{
			attribute.String("userId", "user-42"), attribute.String("sessionId", "session-7"),
			attribute.StringSlice("tags", []string{"checkout", "beta"}),
			attribute.String("team", "search"), attribute.Int("attempt", 2), attribute.Bool("cached", false),
		},
	}
}

// shapeTraffic sends, as an application instrumented with the shape would: an HTTP request span
// (ordinary) with the LLM call under it and a tool call under that; and one LLM call alone.
func shapeTraffic(shape workload.Shape) func(t *testing.T, to viewTarget) viewTraffic {
	return func(t *testing.T, to viewTarget) viewTraffic {
		lang := shape.SDKLanguage
		if lang == "" {
			lang = "go"
		}
		tp := viewProvider(t, to, "view-"+shape.Name, lang)
		call := viewCall()
		at := func(ms int) trace.SpanEventOption {
			return trace.WithTimestamp(to.base.Add(time.Duration(ms) * time.Millisecond))
		}
		llmTracer := tp.Tracer(shape.Scope, trace.WithInstrumentationVersion(shape.ScopeVersion))
		llmSpan := func(ctx context.Context, start int) (context.Context, trace.Span) {
			ctx, s := llmTracer.Start(ctx, "chat "+call.Model, at(start), trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(shape.Attributes(call)...))
			for i, e := range shape.Events(call) {
				s.AddEvent(e.Name, trace.WithAttributes(e.Attrs...), trace.WithTimestamp(to.base.Add(time.Duration(start+i+1)*time.Millisecond)))
			}
			return ctx, s
		}

		ctx, root := tp.Tracer(workload.ScopeHTTPServer).Start(context.Background(), "POST /chat", at(0),
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("http.request.method", "POST"), attribute.String("url.path", "/chat")))
		lctx, llm := llmSpan(ctx, 10)
		_, tool := llmTracer.Start(lctx, "execute_tool lookup_order", at(20), trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", "lookup_order"),
			attribute.String("gen_ai.tool.call.id", "call_1"), attribute.String("gen_ai.tool.call.arguments", `{"order":"A-1"}`),
			attribute.String("gen_ai.tool.call.result", `{"status":"shipped"}`)))
		tool.End(at(30))
		llm.End(at(40))
		root.End(at(50))
		_, alone := llmSpan(context.Background(), 100)
		alone.End(at(140))
		flush(t, tp)
		return viewTraffic{traceIDs: []string{traceHex(root), traceHex(alone)}, spans: 4, plain: 1}
	}
}

// logContentTraffic sends as the OpenTelemetry JS openai instrumentation does: the chat span
// without content, its messages and choice as log events (to a target that takes logs).
func logContentTraffic(t *testing.T, to viewTarget) viewTraffic {
	tp := viewProvider(t, to, "view-log-events", "nodejs")
	at := func(ms int) trace.SpanEventOption {
		return trace.WithTimestamp(to.base.Add(time.Duration(ms) * time.Millisecond))
	}
	ctx, span := tp.Tracer(scopeJSOpenAI, trace.WithInstrumentationVersion("0.5.0")).Start(context.Background(), "chat gpt-4o-mini", at(0),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.system", "openai"),
			attribute.String("gen_ai.request.model", "gpt-4o-mini"), attribute.String("gen_ai.response.model", "gpt-4o-mini-2024-07-18"),
			attribute.Int("gen_ai.usage.input_tokens", 12), attribute.Int("gen_ai.usage.output_tokens", 9)))
	if to.logsEndpoint != "" {
		exp, err := otlploghttp.New(context.Background(), otlploghttp.WithEndpointURL(to.logsEndpoint))
		if err != nil {
			t.Fatal(err)
		}
		lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(exp, sdklog.WithExportInterval(time.Hour))))
		t.Cleanup(func() { _ = lp.Shutdown(context.Background()) })
		logger := lp.Logger(scopeJSOpenAI)
		for _, rec := range []otellog.Record{
			olderEvent("gen_ai.user.message", true, attribute.MapValue(attribute.String("content", "Reset my password, my e-mail is "+viewEmail))),
			olderEvent("gen_ai.choice", true, attribute.MapValue(attribute.String("finish_reason", "stop"), attribute.Int("index", 0),
				attribute.Map("message", attribute.String("content", "I sent the reset link.")))),
		} {
			logger.Emit(ctx, rec)
		}
		flush(t, lp)
		time.Sleep(time.Second) // the content waits at the gateway when the span arrives
	}
	span.End(at(30))
	flush(t, tp)
	return viewTraffic{traceIDs: []string{traceHex(span)}, spans: 1, logContent: true}
}

// svcSDKTraffic sends as the svc SDK would: an agent observation with a generation under it,
// trace attributes propagated to both. The new majors JSON-encode metadata values; the old ones
// send them as they are and set trace IO on a child (setTraceIO, removed in the new majors).
func svcSDKTraffic(language, version string, newMajor bool) func(t *testing.T, to viewTarget) viewTraffic {
	return func(t *testing.T, to viewTarget) viewTraffic {
		tp := viewProvider(t, to, "view-svc-sdk-"+language, language)
		tracer := tp.Tracer("svc-sdk", trace.WithInstrumentationVersion(version))
		at := func(ms int) trace.SpanEventOption {
			return trace.WithTimestamp(to.base.Add(time.Duration(ms) * time.Millisecond))
		}
		meta := func(prefix string, kvs ...attribute.KeyValue) []attribute.KeyValue {
			var out []attribute.KeyValue
			for _, kv := range kvs {
				v := kv.Value
				if newMajor {
					b, _ := json.Marshal(v.AsInterface())
					v = attribute.StringValue(string(b))
				}
				out = append(out, attribute.KeyValue{Key: attribute.Key(prefix + string(kv.Key)), Value: v})
			}
			return out
		}
		propagated := append([]attribute.KeyValue{
			attribute.String("user.id", "user-42"), attribute.String("session.id", "session-7"),
			attribute.StringSlice("svc.trace.tags", []string{"checkout", "beta"}), attribute.String("svc.trace.name", "support-run"),
		}, meta("svc.trace.metadata.", attribute.String("tenant", "acme"))...)
		question := "Where is my order? Reach me at " + viewEmail + "."

		rootAttrs := append([]attribute.KeyValue{
			attribute.String("svc.observation.type", "agent"),
			attribute.String("svc.observation.input", `{"question":`+jsonString(question)+`}`),
			attribute.String("svc.observation.output", `{"answer":"It ships tomorrow."}`),
		}, propagated...)
		rootAttrs = append(rootAttrs, meta("svc.observation.metadata.", attribute.String("team", "search"), attribute.Int("attempt", 2))...)
		ctx, root := tracer.Start(context.Background(), "support-agent", at(0), trace.WithAttributes(rootAttrs...))

		genAttrs := append([]attribute.KeyValue{
			attribute.String("svc.observation.type", "generation"),
			attribute.String("svc.observation.model.name", "gpt-4o"),
			attribute.String("svc.observation.model.parameters", `{"temperature":0.2,"max_tokens":256}`),
			attribute.String("svc.observation.usage_details", `{"input":42,"output":7,"total":49}`),
			attribute.String("svc.observation.input", `[{"role":"user","content":`+jsonString(question)+`}]`),
			attribute.String("svc.observation.output", `{"role":"assistant","content":"It ships tomorrow."}`),
			attribute.String("svc.observation.completion_start_time", jsonString(to.base.Add(15*time.Millisecond).Format(time.RFC3339Nano))),
			attribute.String("svc.observation.prompt.name", "support"), attribute.Int("svc.observation.prompt.version", 3),
		}, propagated...)
		genAttrs = append(genAttrs, meta("svc.observation.metadata.", attribute.Bool("cached", false), attribute.String("contact", viewEmail))...)
		var legacy []string
		if !newMajor {
			legacy = []string{`{"question":"where is my order?"}`, `{"answer":"tomorrow"}`}
			genAttrs = append(genAttrs, attribute.String("svc.trace.input", legacy[0]), attribute.String("svc.trace.output", legacy[1]))
		}
		_, gen := tracer.Start(ctx, "llm-call", at(10), trace.WithAttributes(genAttrs...))
		gen.End(at(40))
		root.End(at(50))
		traces := []string{traceHex(root)}
		spans := 2
		if !newMajor {
			// setTraceIO on a root with no input or output of its own.
			legacy = append(legacy, `{"ticket":"T-9"}`, `{"resolved":true}`)
			_, io := tracer.Start(context.Background(), "triage", at(100), trace.WithAttributes(append([]attribute.KeyValue{
				attribute.String("svc.observation.type", "span"),
				attribute.String("svc.trace.input", legacy[2]), attribute.String("svc.trace.output", legacy[3]),
			}, propagated...)...))
			io.End(at(120))
			traces = append(traces, traceHex(io))
			spans++
		}
		flush(t, tp)
		return viewTraffic{traceIDs: traces, spans: spans, legacyTraceIO: legacy}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func traceHex(s trace.Span) string {
	id := s.SpanContext().TraceID()
	return hex.EncodeToString(id[:])
}

// viewProvider is an OpenTelemetry SDK exporting to the target over OTLP/HTTP, with ids drawn
// from the target's seed.
func viewProvider(t *testing.T, to viewTarget, service, language string) *sdktrace.TracerProvider {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(to.endpoint), otlptracehttp.WithHeaders(to.headers))
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service), semconv.TelemetrySDKLanguageKey.String(language))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithIDGenerator(newSeededIDs(to.seed)),
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Hour)))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// seededIDs gives the same trace and span ids for the same seed: both runs of a case send the
// same ids, so that records pair up.
type seededIDs struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newSeededIDs(seed uint64) *seededIDs {
	return &seededIDs{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (g *seededIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var tid trace.TraceID
	binary.BigEndian.PutUint64(tid[:8], g.rng.Uint64())
	binary.BigEndian.PutUint64(tid[8:], g.rng.Uint64())
	return tid, g.spanIDLocked()
}

func (g *seededIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.spanIDLocked()
}

func (g *seededIDs) spanIDLocked() trace.SpanID {
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], g.rng.Uint64()|1)
	return sid
}

// comparison holds the field results of one case.
type comparison struct {
	traffic viewTraffic
	results []fieldResult
}

type fieldResult struct {
	path            string
	class           string
	direct, gateway any
}

// traceView is one trace as a platform's read APIs return it.
type traceView struct {
	obs   []map[string]any
	trace map[string]any
}

func readView(t *testing.T, c readapi.Client, traceID string) traceView {
	t.Helper()
	obs, err := c.ObservationRecords(context.Background(), traceID, "")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := c.Trace(context.Background(), traceID)
	var status *readapi.StatusError
	if errors.As(err, &status) && status.Code == http.StatusNotFound {
		return traceView{obs: obs, trace: map[string]any{}} // nothing of the trace arrived
	}
	if err != nil {
		t.Fatalf("trace %s: %v", traceID, err)
	}
	return traceView{obs: obs, trace: tr}
}

// runTimes are the fields that depend on when a run happened.
var runTimes = []string{"startTime", "endTime", "latency", "timeToFirstToken", "completionStartTime", "createdAt", "timestamp"}

// measuredTimeAttribute names the span attributes that carry a time a library measured (such as
// gen_ai.response.time_to_first_chunk): like runTimes they depend on the run, and two direct runs
// agree on them only by chance, so they are left out of both sides.
var measuredTimeAttribute = regexp.MustCompile(`^attributes\..*(time_to_first|duration|latency)`)

// alignedViews pairs the observations of two runs of a program whose ids and times are its own:
// by name and start order. The second view's ids (and parents) are replaced by their partners'
// in the first; times are left out of both.
func alignedViews(d, g traceView) (traceView, traceView) {
	key := func(obs []map[string]any) map[string]string {
		sorted := append([]map[string]any(nil), obs...)
		sort.SliceStable(sorted, func(i, j int) bool { return show(sorted[i]["startTime"]) < show(sorted[j]["startTime"]) })
		seen := map[string]int{}
		out := map[string]string{}
		for _, o := range sorted {
			name := show(o["name"])
			seen[name]++
			out[o["id"].(string)] = fmt.Sprintf("%s#%d", name, seen[name])
		}
		return out
	}
	dKeys, gKeys := key(d.obs), key(g.obs)
	byKey := map[string]string{}
	for id, k := range dKeys {
		byKey[k] = id
	}
	strip := func(m map[string]any) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[k] = v
		}
		for _, k := range runTimes {
			delete(out, k)
		}
		if md, ok := out["metadata"].(map[string]any); ok { // keys are flat: "attributes.<key>"
			kept := make(map[string]any, len(md))
			for k, v := range md {
				if !measuredTimeAttribute.MatchString(k) {
					kept[k] = v
				}
			}
			out["metadata"] = kept
		}
		return out
	}
	rekey := func(id any) any {
		s, ok := id.(string)
		if !ok {
			return id
		}
		if partner, ok := byKey[gKeys[s]]; ok {
			return partner
		}
		return "unpaired " + gKeys[s]
	}
	var dObs, gObs []map[string]any
	traceID := d.trace["id"]
	for _, o := range d.obs {
		dObs = append(dObs, strip(o))
	}
	for _, o := range g.obs {
		o = strip(o)
		o["id"], o["traceId"] = rekey(o["id"]), traceID
		if o["parentObservationId"] != nil {
			o["parentObservationId"] = rekey(o["parentObservationId"])
		}
		gObs = append(gObs, o)
	}
	gTrace := strip(g.trace)
	gTrace["id"] = traceID
	return traceView{obs: dObs, trace: strip(d.trace)}, traceView{obs: gObs, trace: gTrace}
}

// trace compares one trace: its observations by id, field by field (metadata key by key), then
// its trace record.
func (c *comparison) trace(label string, dv, gv traceView) {
	dObs, gObs := dv.obs, gv.obs
	dByID, gByID := byID(dObs), byID(gObs)
	// The direct trace's root is not forwarded: the gateway's trace has another root, whose
	// fields make the trace's (name, input and output, metadata).
	rerooted := false
	for _, o := range dObs {
		if o["parentObservationId"] == nil && gByID[o["id"].(string)] == nil {
			rerooted = true
		}
	}
	for _, d := range dObs {
		id := d["id"].(string)
		where := fmt.Sprintf("%s observation %q", label, d["name"])
		g := gByID[id]
		if g == nil {
			class := diffOtherwise
			if ordinarySpan(d) {
				class = diffFiltered
			}
			c.add(where, class, d["name"], nil)
			continue
		}
		for _, key := range unionKeys(d, g) {
			switch key {
			case "createdAt":
				continue // arrival time
			case "metadata", "traceMetadata":
				// An observation's own metadata does not depend on which span is the root.
				c.compareMaps(where+" "+key, asMap(d[key]), asMap(g[key]), d, false)
				continue
			}
			path := where + " " + key
			dv, gv := d[key], g[key]
			class := c.classify(dv, gv)
			switch {
			case class != diffOtherwise:
			case key == "parentObservationId" && gv == nearestKept(dByID, gByID, dv):
				class = diffReparented
			case key == "traceName" && rerooted:
				class = diffReparented
			case (key == "input" || key == "output") && c.traffic.logContent && holdsAllOf(gv, dv):
				class = diffJoined // more content than the span alone carries
			case (key == "input" || key == "output") && isEmpty(dv) && c.isLegacyIO(gv):
				class = diffLegacyIO
			}
			c.add(path, class, dv, gv)
		}
	}
	for _, g := range gObs {
		if dByID[g["id"].(string)] == nil {
			c.add(fmt.Sprintf("%s observation %q", label, g["name"]), diffOtherwise, nil, g["name"])
		}
	}

	dTrace, gTrace := dv.trace, gv.trace
	where := label
	for _, key := range unionKeys(dTrace, gTrace) {
		dv, gv := dTrace[key], gTrace[key]
		if key == "metadata" {
			c.compareMaps(where+" metadata", asMap(dv), asMap(gv), dTrace, rerooted)
			continue
		}
		class := c.classify(dv, gv)
		switch {
		case class != diffOtherwise:
		case rerooted && (key == "name" || key == "input" || key == "output" || key == "timestamp" || key == "environment" ||
			key == "release" || key == "version"):
			class = diffReparented
		case (key == "input" || key == "output") && c.isLegacyIO(gv):
			class = diffLegacyIO
		case (key == "input" || key == "output") && c.traffic.logContent && holdsAllOf(gv, dv):
			class = diffJoined // a root's content is its trace's
		}
		c.add(where+" "+key, class, dv, gv)
	}
}

// compareMaps compares metadata key by key. from is the direct record, where a promoted key's
// original is looked for; rerooted says every key may come from another root (the trace record
// of a trace whose root was not forwarded: its LLM-only sibling trace checks the same keys
// strictly).
func (c *comparison) compareMaps(where string, d, g, from map[string]any, rerooted bool) {
	for _, key := range unionKeys(d, g) {
		dv, gv := d[key], g[key]
		class := c.classify(dv, gv)
		switch {
		case class != diffOtherwise:
		case dv == nil && key == "attributes.svc.original_parent_span_id":
			class = diffReparented
		case dv == nil && c.promotedFrom(from, key, gv):
			class = diffPromoted
		case rerooted:
			class = diffReparented
		}
		c.add(where+"."+key, class, dv, gv)
	}
}

// classify is equal, masked or otherwise (the caller knows the other documented differences).
func (c *comparison) classify(dv, gv any) string {
	if reflect.DeepEqual(dv, gv) {
		return diffEqual
	}
	if dv != nil && gv != nil && maskedForm(show(dv)).MatchString(show(gv)) {
		return diffMasked
	}
	return diffOtherwise
}

// promotedFrom: the direct record holds the same value (or its masked form) under another
// convention's name for key: a field or nested key whose last name is key (or, for tags, the
// trace's tags), at any depth, lists compared as sets.
func (c *comparison) promotedFrom(from map[string]any, key string, gv any) bool {
	found := false
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok {
			for k, child := range m {
				walk(prefix+"."+k, child)
			}
		}
		last := prefix[strings.LastIndex(prefix, ".")+1:]
		if (last == key || strings.EqualFold(strings.TrimPrefix(last, "trace"), key)) && sameValue(v, gv) {
			found = true
		}
	}
	for k, v := range from {
		walk(k, v)
	}
	return found
}

// sameValue: equal, equal once masked, or lists with the same elements.
func sameValue(dv, gv any) bool {
	if reflect.DeepEqual(dv, gv) || maskedText(show(dv)) == show(gv) {
		return true
	}
	dl, ok1 := dv.([]any)
	gl, ok2 := gv.([]any)
	if !ok1 || !ok2 || len(dl) != len(gl) {
		return false
	}
	ds, gs := make([]string, len(dl)), make([]string, len(gl))
	for i := range dl {
		ds[i], gs[i] = show(dl[i]), show(gl[i])
	}
	sort.Strings(ds)
	sort.Strings(gs)
	return reflect.DeepEqual(ds, gs)
}

func (c *comparison) isLegacyIO(v any) bool {
	s, _ := v.(string)
	for _, l := range c.traffic.legacyTraceIO {
		if s == l {
			return true
		}
	}
	return false
}

func (c *comparison) add(path, class string, dv, gv any) {
	c.results = append(c.results, fieldResult{path: path, class: class, direct: dv, gateway: gv})
}

// table is the case's summary: fields equal, differing as documented (by row), differing otherwise.
func (c *comparison) table(name string) string {
	counts := map[string]int{}
	for _, r := range c.results {
		counts[r.class]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "platform view of %s: %d fields compared\n", name, len(c.results))
	fmt.Fprintf(&b, "  %-66s %4d\n", "fields equal", counts[diffEqual])
	documented := 0
	for _, d := range viewDifferences {
		documented += counts[d]
	}
	fmt.Fprintf(&b, "  %-66s %4d\n", "differing as documented", documented)
	for _, d := range viewDifferences {
		if counts[d] > 0 {
			fmt.Fprintf(&b, "    %-64s %4d\n", d, counts[d])
		}
	}
	if counts[diffVaries] > 0 {
		fmt.Fprintf(&b, "  %-66s %4d\n", diffVaries, counts[diffVaries])
	}
	fmt.Fprintf(&b, "  %-66s %4d\n", "differing otherwise (must be none)", counts[diffOtherwise])
	for _, r := range c.results {
		if r.class == diffOtherwise || (os.Getenv("SVC_VIEW_ALL") != "" && r.class != diffEqual) {
			fmt.Fprintf(&b, "    [%s] %s: direct %s, gateway %s\n", r.class, r.path, show(r.direct), show(r.gateway))
		}
	}
	return b.String()
}

// nearestKept is the nearest ancestor (through the direct records) of a parent id that the
// gateway's platform holds; nil when none is (the span became a root).
func nearestKept(direct, gateway map[string]map[string]any, parent any) any {
	for parent != nil {
		id, _ := parent.(string)
		if gateway[id] != nil {
			return id
		}
		p := direct[id]
		if p == nil {
			return nil
		}
		parent = p["parentObservationId"]
	}
	return nil
}

// ordinarySpan: an observation without anything GenAI, as the span filter judges it.
func ordinarySpan(o map[string]any) bool {
	md := asMap(o["metadata"])
	if name, _ := md["scope.name"].(string); name == "svc-sdk" || strings.HasPrefix(name, "svc-sdk.") {
		return false
	}
	for k := range md {
		if strings.HasPrefix(k, "attributes.gen_ai.") {
			return false
		}
	}
	return o["type"] == platform.TypeSpan
}

func byID(obs []map[string]any) map[string]map[string]any {
	out := make(map[string]map[string]any, len(obs))
	for _, o := range obs {
		out[o["id"].(string)] = o
	}
	return out
}

func unionKeys(a, b map[string]any) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range []map[string]any{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func isEmpty(v any) bool { return v == nil || v == "" }

// holdsAllOf: every text of the direct value (a string, or the strings in its JSON) is in the
// gateway's value, masked where it held personal data; an empty direct value is held by any.
func holdsAllOf(gv, dv any) bool {
	if isEmpty(gv) {
		return false
	}
	var texts []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if parsed, ok := parseJSONText(x); ok {
				walk(parsed)
			} else if x != "" {
				texts = append(texts, x)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(dv)
	g := show(gv)
	for _, text := range texts {
		if !strings.Contains(g, text) && !maskedIn(g, text) {
			return false
		}
	}
	return true
}

func parseJSONText(s string) (any, bool) {
	if !strings.HasPrefix(s, "[") && !strings.HasPrefix(s, "{") {
		return nil, false
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, false
	}
	return v, true
}

func maskedText(s string) string { return strings.ReplaceAll(s, viewEmail, "[EMAIL]") }

// viewPII is the personal data the cases send (the Node programs send all of it), which the
// shipped config masks.
var viewPII = []string{viewEmail, "+44 20 7946 0958", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00",
	"sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"}

// maskedPattern is the direct value with each piece of personal data it holds replaced by a mask
// such as [EMAIL], as a pattern; false when the value holds none.
func maskedPattern(direct string) (string, bool) {
	pattern := regexp.QuoteMeta(direct)
	found := false
	for _, pii := range viewPII {
		if q := regexp.QuoteMeta(pii); strings.Contains(pattern, q) {
			pattern = strings.ReplaceAll(pattern, q, `\[[A-Z_]+\]`)
			found = true
		}
	}
	return pattern, found
}

// maskedForm matches the whole gateway value that is the direct value masked; nothing when the
// direct value holds no personal data.
func maskedForm(direct string) *regexp.Regexp {
	pattern, ok := maskedPattern(direct)
	if !ok {
		return regexp.MustCompile(`\A\z.`) // never matches
	}
	return regexp.MustCompile(`\A` + pattern + `\z`)
}

// maskedIn: text, masked, appears in g.
func maskedIn(g, text string) bool {
	pattern, ok := maskedPattern(text)
	return ok && regexp.MustCompile(pattern).MatchString(g)
}

// show is a value as JSON text, for messages and for comparing masked values.
func show(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
