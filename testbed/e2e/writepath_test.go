package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
)

// When users see their spans (docs/contract.md §17, "Write path"): the platform writes each span
// request at once or stages it (minutes late on the hosted platform). Through the gateway every
// span must be written on the path its direct export takes, or a faster one, and spans of older
// svc SDK majors must stay where their direct export puts them.
//
// Each client below sends the same spans twice, concurrently with the others: once straight to a
// local platform, with the headers it sends there, and once through the gateway (the built binary
// with the shipped distribution/config.yaml) to a second platform on the same deployment setting.

// writePathClient is one application: the SDK or instrumentation that wrote its spans (resource
// language, scope, scope version) and the SDK headers it sends with every export.
type writePathClient struct {
	name                   string
	language, scope, scVer string
	sdkName, sdkVersion    string
	// olderMajor: an svc SDK major whose trace fields live on the staged path's synthetic root.
	olderMajor bool
}

var writePathClients = []writePathClient{
	{name: "svc JS/TS SDK 6", language: "nodejs", scope: "svc-sdk", scVer: "6.0.0", sdkName: "javascript", sdkVersion: "6.0.0"},
	{name: "svc Python SDK 5", language: "python", scope: "svc-sdk", scVer: "5.1.0", sdkName: "python", sdkVersion: "5.1.0"},
	{name: "svc JS SDK 4", language: "nodejs", scope: "svc-sdk", scVer: "4.6.1", sdkName: "javascript", sdkVersion: "4.6.1", olderMajor: true},
	{name: "svc Python SDK 3", language: "python", scope: "svc-sdk", scVer: "3.38.0", sdkName: "python", sdkVersion: "3.38.0", olderMajor: true},
	{name: "Go OpenTelemetry GenAI", language: "go", scope: "go.opentelemetry.io/contrib/instrumentation/openai", scVer: "0.3.0"},
}

// writePathNodeLibraries are real third-party instrumentations (testbed/instrumentation).
var writePathNodeLibraries = []string{"otel-openai", "openinference-openai", "vercel-ai"}

// pathRank orders the paths: a lower rank is seen sooner.
func pathRank(p platform.WritePath) int {
	if p == platform.WritePathDirect {
		return 0
	}
	return 1
}

func TestWritePathThroughTheGatewayEqualsOrBeatsDirectExport(t *testing.T) {
	collectorBinary(t) // skips where no binary was built (the unit-test pass)
	deployments := []platform.Deployment{platform.SelfHosted, platform.HostedNewOrg, platform.HostedOldOrg}
	nodeDir := os.Getenv("SVC_INSTRUMENTATION_DIR")
	if nodeDir == "" {
		nodeDir = filepath.Join(collector.RepoRoot(), "testbed", "instrumentation")
	}
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules")); err != nil {
		t.Fatalf("no real JavaScript instrumentations: %s has no node_modules (make instrumentation-deps)", nodeDir)
	}
	for _, d := range deployments {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			// Staged data shows 4 s after it arrived: long beside the gateway's own delay (its
			// span filter and batching), short enough for a test.
			opts := platform.Options{PublicKey: testPublicKey, SecretKey: testSecretKey, Deployment: d, StagedDelay: 4 * time.Second}
			direct := startPlatformWith(t, opts)
			viaGW := startPlatformWith(t, opts)
			g := startGateway(t, gatewayOptions{platform: viaGW})
			basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(testPublicKey+":"+testSecretKey))

			var wg sync.WaitGroup
			sent := make([][]spanSent, len(writePathClients))
			nodeSent := make(map[string][2]viewTraffic, len(writePathNodeLibraries))
			var nodeMu sync.Mutex
			for i, c := range writePathClients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sent[i] = c.send(t, uint64(i+1), []string{direct.URL() + platform.PathTraces, "http://" + g.collector.OTLPHTTPEndpoint + "/v1/traces"}, basic)
				}()
			}
			for i, lib := range writePathNodeLibraries {
				wg.Add(1)
				go func() {
					defer wg.Done()
					send := nodeTraffic(nodeDir, lib)
					base := time.Now().UTC().Truncate(time.Second)
					dt := send(t, viewTarget{endpoint: direct.URL() + platform.PathTraces, headers: map[string]string{"Authorization": basic}, seed: uint64(100 + i), base: base})
					gt := send(t, viewTarget{endpoint: "http://" + g.collector.OTLPHTTPEndpoint + "/v1/traces", logsEndpoint: "http://" + g.collector.OTLPHTTPEndpoint + "/v1/logs", seed: uint64(100 + i), base: base})
					nodeMu.Lock()
					nodeSent[lib] = [2]viewTraffic{dt, gt}
					nodeMu.Unlock()
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}

			// Every span of the svc SDKs and of the Go client is GenAI: the gateway forwards each.
			var all []spanSent
			for _, s := range sent {
				all = append(all, s...)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for _, p := range []*platform.Platform{direct, viaGW} {
				if err := p.WaitUntil(ctx, func() bool { return allStored(p, all) }); err != nil {
					t.Fatalf("spans not stored: %v", err)
				}
			}

			var rows []string
			for i, c := range writePathClients {
				var dLat, gLat []time.Duration
				dPath, gPath := platform.WritePath(""), platform.WritePath("")
				for _, s := range sent[i] {
					do, _ := direct.Observation(s.traceID, s.spanID)
					gob, _ := viaGW.Observation(s.traceID, s.spanID)
					if pathRank(gob.WritePath) > pathRank(do.WritePath) {
						t.Errorf("%s: span %s/%s written %s through the gateway, %s when exported directly", c.name, s.traceID, s.spanID, gob.WritePath, do.WritePath)
					}
					if c.olderMajor && gob.WritePath != do.WritePath {
						t.Errorf("%s (older major): span %s/%s written %s through the gateway, %s when exported directly: its path must not move",
							c.name, s.traceID, s.spanID, gob.WritePath, do.WritePath)
					}
					dPath, gPath = do.WritePath, gob.WritePath
					dLat = append(dLat, do.VisibleAt.Sub(s.end))
					gLat = append(gLat, gob.VisibleAt.Sub(s.end))
				}
				rows = append(rows, fmt.Sprintf("%-26s direct %-6s %6s   gateway %-6s %6s", c.name, dPath, medianRounded(dLat), gPath, medianRounded(gLat)))
			}

			// Real JavaScript instrumentations: their own ids, so compared client by client: each
			// span through the gateway against the path its direct export took.
			for _, lib := range writePathNodeLibraries {
				tr := nodeSent[lib]
				dPaths := pathsOf(t, direct, tr[0].traceIDs)
				gPaths := pathsOf(t, viaGW, tr[1].traceIDs)
				if len(dPaths) == 0 || len(gPaths) == 0 {
					t.Errorf("%s: nothing stored (direct %d, gateway %d spans)", lib, len(dPaths), len(gPaths))
					continue
				}
				// A client's direct exports all go with the same headers and scopes: they take one
				// path. Through the gateway each span must take it or a faster one.
				bestDirect := platform.WritePathDual
				for _, p := range dPaths {
					if pathRank(p) < pathRank(bestDirect) {
						bestDirect = p
					}
				}
				gPath := platform.WritePathDirect
				for key, p := range gPaths {
					if pathRank(p) > pathRank(bestDirect) {
						t.Errorf("%s: span %s written %s through the gateway, %s when exported directly", lib, key, p, bestDirect)
					}
					if pathRank(p) > pathRank(gPath) {
						gPath = p
					}
				}
				rows = append(rows, fmt.Sprintf("%-26s direct %-6s          gateway %-6s", "node "+lib, bestDirect, gPath))
			}
			t.Logf("deployment %s: path and median time from a span's end to the platform showing it\n  %s", d, strings.Join(rows, "\n  "))

			// The exporter counts its span requests by path class.
			metrics := scrapeMetrics(t, g.collector)
			for _, class := range []string{`write_path="direct"`, `write_path="staged"`} {
				if !strings.Contains(metrics, class) {
					t.Errorf("no span requests counted with %s in the collector's metrics", class)
				}
			}
		})
	}
}

// spanSent is one span a client sent, with the time it ended.
type spanSent struct {
	traceID, spanID string
	end             time.Time
}

// send exports three traces of an agent span and its LLM call to every endpoint, each span in
// the request of its own as SDKs export a span when it ends: the child first, its parent half a
// second later. The same bytes go to every endpoint, with the client's headers (and the
// credentials to the platform, the first endpoint).
func (c writePathClient) send(t *testing.T, seed uint64, endpoints []string, authorization string) []spanSent {
	var out []spanSent
	for n := range 3 {
		var tid [16]byte
		binary.BigEndian.PutUint64(tid[:8], seed)
		binary.BigEndian.PutUint64(tid[8:], uint64(n+1)*0x9e3779b97f4a7c15)
		var parent, child [8]byte
		binary.BigEndian.PutUint64(parent[:], seed<<32|uint64(n)<<8|1)
		binary.BigEndian.PutUint64(child[:], seed<<32|uint64(n)<<8|2)
		start := time.Now().UTC()
		childEnd := start.Add(200 * time.Millisecond)
		time.Sleep(200 * time.Millisecond)
		c.post(t, endpoints, authorization, c.span(tid, child, parent, "chat gpt-4o", start, childEnd, true))
		time.Sleep(500 * time.Millisecond)
		parentEnd := time.Now().UTC()
		c.post(t, endpoints, authorization, c.span(tid, parent, [8]byte{}, "agent", start, parentEnd, false))
		out = append(out,
			spanSent{pcommon.TraceID(tid).String(), pcommon.SpanID(child).String(), childEnd},
			spanSent{pcommon.TraceID(tid).String(), pcommon.SpanID(parent).String(), parentEnd})
	}
	return out
}

// span is one span as the client's SDK writes it: GenAI attributes on the LLM call, the svc SDK's
// observation type on the agent (the Go client's agent is a GenAI agent span).
func (c writePathClient) span(tid [16]byte, id, parent [8]byte, name string, start, end time.Time, llm bool) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "writepath-"+strings.ReplaceAll(strings.ToLower(c.name), " ", "-"))
	rs.Resource().Attributes().PutStr("telemetry.sdk.language", c.language)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(c.scope)
	ss.Scope().SetVersion(c.scVer)
	s := ss.Spans().AppendEmpty()
	s.SetTraceID(tid)
	s.SetSpanID(id)
	if parent != [8]byte{} {
		s.SetParentSpanID(parent)
	}
	s.SetName(name)
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
	a := s.Attributes()
	if llm {
		a.PutStr("gen_ai.operation.name", "chat")
		a.PutStr("gen_ai.request.model", "gpt-4o")
		a.PutInt("gen_ai.usage.input_tokens", 12)
		a.PutInt("gen_ai.usage.output_tokens", 7)
	} else {
		a.PutStr("gen_ai.operation.name", "invoke_agent")
		a.PutStr("gen_ai.agent.name", "support")
	}
	if c.scope == "svc-sdk" {
		a.PutStr("svc.observation.type", map[bool]string{true: "generation", false: "agent"}[llm])
	}
	return td
}

// post sends td as OTLP/protobuf to every endpoint with the client's headers.
func (c writePathClient) post(t *testing.T, endpoints []string, authorization string, td ptrace.Traces) {
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Error(err)
		return
	}
	for i, url := range endpoints {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		if c.sdkName != "" {
			req.Header.Set("x-svc-sdk-name", c.sdkName)
			req.Header.Set("x-svc-sdk-version", c.sdkVersion)
		}
		if i == 0 {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s answered %s", c.name, url, resp.Status)
		}
	}
}

func allStored(p *platform.Platform, spans []spanSent) bool {
	for _, s := range spans {
		if _, ok := p.Observation(s.traceID, s.spanID); !ok {
			return false
		}
	}
	return true
}

// pathsOf is the write path of every stored span of the traces, by trace/span id.
func pathsOf(t *testing.T, p *platform.Platform, traceIDs []string) map[string]platform.WritePath {
	out := map[string]platform.WritePath{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = p.WaitUntil(ctx, func() bool {
		for _, id := range traceIDs {
			if len(p.ObservationsByTrace(id)) == 0 {
				return false
			}
		}
		return true
	})
	for _, id := range traceIDs {
		for _, o := range p.ObservationsByTrace(id) {
			out[o.TraceID+"/"+o.ID] = o.WritePath
		}
	}
	return out
}

func startPlatformWith(t *testing.T, o platform.Options) *platform.Platform {
	t.Helper()
	p, err := platform.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func medianRounded(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return median(ds).Round(10 * time.Millisecond)
}
