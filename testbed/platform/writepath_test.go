package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// wpResource is one resourceSpans of a write-path test batch: its telemetry.sdk.language and
// resource attributes, and its scopes, each with one span.
type wpResource struct {
	language string
	attrs    map[string]any
	scopes   []wpScope
}

type wpScope struct {
	name, version string
	env           string // the span's svc.environment, if any
}

// wpBatch builds the batch; every span gets trace id tid and its own span id from 1.
func wpBatch(t *testing.T, tid byte, resources ...wpResource) ptrace.Traces {
	t.Helper()
	td := ptrace.NewTraces()
	var sid byte
	for _, r := range resources {
		rs := td.ResourceSpans().AppendEmpty()
		if err := rs.Resource().Attributes().FromRaw(r.attrs); err != nil {
			t.Fatal(err)
		}
		if r.language != "" {
			rs.Resource().Attributes().PutStr("telemetry.sdk.language", r.language)
		}
		for _, sc := range r.scopes {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(sc.name)
			ss.Scope().SetVersion(sc.version)
			sid++
			span := ss.Spans().AppendEmpty()
			span.SetTraceID(traceID(tid))
			span.SetSpanID(spanID(sid))
			span.SetName("op")
			span.SetStartTimestamp(pcommon.NewTimestampFromTime(testStart))
			span.SetEndTimestamp(pcommon.NewTimestampFromTime(testStart.Add(time.Second)))
			if sc.env != "" {
				span.Attributes().PutStr("svc.environment", sc.env)
			}
		}
	}
	return td
}

func thirdParty(scopes ...wpScope) wpResource {
	if len(scopes) == 0 {
		scopes = []wpScope{{name: "opentelemetry.instrumentation.openai", version: "0.40.0"}}
	}
	return wpResource{language: "python", scopes: scopes}
}

// The platform's write path (README.md, "Write path"), first match, on each deployment: the path recorded on the
// request, on every observation it stored, and when each becomes visible.
func TestWritePathRules(t *testing.T) {
	type want struct {
		path WritePath
		rule int
	}
	direct := func(rule int) want { return want{WritePathDirect, rule} }
	dual := want{WritePathDual, RuleDefault}
	pySDK := func(version, env string) wpResource {
		return wpResource{language: "python", scopes: []wpScope{{name: "svc-sdk", version: version, env: env}}}
	}
	jsSDK := func(lang, version, env string) wpResource {
		return wpResource{language: lang, scopes: []wpScope{{name: "svc-sdk", version: version, env: env}}}
	}
	tests := []struct {
		name      string
		headers   map[string]string
		resources []wpResource
		// on SelfHosted, HostedNewOrg, HostedOldOrg
		want [3]want
	}{
		// Rule 1: headers.
		{"ingestion version 4", map[string]string{HeaderIngestionVersion: "4"}, []wpResource{thirdParty()},
			[3]want{direct(1), direct(1), direct(1)}},
		{"ingestion version 4 on an older SDK's batch", map[string]string{HeaderIngestionVersion: "4"}, []wpResource{jsSDK("javascript", "4.2.0", "")},
			[3]want{direct(1), direct(1), direct(1)}},
		{"ingestion version 04 is 4", map[string]string{HeaderIngestionVersion: "04"}, []wpResource{thirdParty()},
			[3]want{direct(1), direct(1), direct(1)}},
		{"ingestion version 3", map[string]string{HeaderIngestionVersion: "3"}, []wpResource{thirdParty()},
			[3]want{direct(2), direct(4), dual}},
		{"x_svc_ingestion_version with underscores", map[string]string{"x_svc_ingestion_version": "4"}, []wpResource{thirdParty()},
			[3]want{direct(1), direct(1), direct(1)}},
		{"an empty hyphenated header hides the underscored one", map[string]string{HeaderIngestionVersion: "\x00empty", "x_svc_ingestion_version": "4"}, []wpResource{thirdParty()},
			[3]want{direct(2), direct(4), dual}},
		{"python 5.0.0", map[string]string{HeaderSDKName: "python", HeaderSDKVersion: "5.0.0"}, []wpResource{pySDK("5.0.0", "")},
			[3]want{direct(1), direct(1), direct(1)}},
		{"python 4.0.0", map[string]string{HeaderSDKName: "python", HeaderSDKVersion: "4.0.0"}, []wpResource{pySDK("4.0.0", "")},
			[3]want{direct(1), direct(1), direct(1)}},
		{"python 4.0.0-rc.1 counts as 4.0.0", map[string]string{HeaderSDKName: "python", HeaderSDKVersion: "4.0.0-rc.1"}, []wpResource{pySDK("4.0.0-rc.1", "")},
			[3]want{direct(1), direct(1), direct(1)}},
		{"python 3.9.9", map[string]string{HeaderSDKName: "python", HeaderSDKVersion: "3.9.9"}, []wpResource{pySDK("3.9.9", "")},
			[3]want{direct(2), dual, dual}},
		{"python SDK headers with underscores", map[string]string{"x_svc_sdk_name": "python", "x_svc_sdk_version": "5.1.0"}, []wpResource{pySDK("5.1.0", "")},
			[3]want{direct(1), direct(1), direct(1)}},
		{"sdk name compared as sent: Python", map[string]string{HeaderSDKName: "Python", HeaderSDKVersion: "5.0.0"}, []wpResource{pySDK("5.0.0", "")},
			[3]want{direct(2), dual, dual}},
		{"python header version not a number", map[string]string{HeaderSDKName: "python", HeaderSDKVersion: "latest"}, []wpResource{thirdParty()},
			[3]want{direct(2), dual, dual}},
		{"javascript 5.0.0", map[string]string{HeaderSDKName: "javascript", HeaderSDKVersion: "5.0.0"}, []wpResource{jsSDK("js", "5.0.0", "")},
			[3]want{direct(1), direct(1), direct(1)}},
		{"javascript 6.1.0+build.7", map[string]string{HeaderSDKName: "javascript", HeaderSDKVersion: "6.1.0+build.7"}, []wpResource{jsSDK("js", "6.1.0", "")},
			[3]want{direct(1), direct(1), direct(1)}},
		{"javascript 4.9", map[string]string{HeaderSDKName: "javascript", HeaderSDKVersion: "4.9"}, []wpResource{jsSDK("js", "4.9.0", "")},
			[3]want{direct(2), dual, dual}},
		{"old python SDK headers decide, not a js 5 scope", map[string]string{HeaderSDKName: "python", HeaderSDKVersion: "3.2.0"}, []wpResource{jsSDK("js", "5.0.0", "")},
			[3]want{direct(2), dual, dual}},

		// Rule 4: non-SDK traffic, hosted new organization only.
		{"third-party spans without headers", nil, []wpResource{thirdParty()},
			[3]want{direct(2), direct(4), dual}},
		{"sdk name unknown is none", map[string]string{HeaderSDKName: "unknown", HeaderSDKVersion: "1.0.0"}, []wpResource{thirdParty()},
			[3]want{direct(2), direct(4), dual}},
		{"unknown with underscores", map[string]string{"x_svc_sdk_name": "unknown"}, []wpResource{thirdParty()},
			[3]want{direct(2), direct(4), dual}},
		{"a gateway's own sdk name makes SDK traffic", map[string]string{HeaderSDKName: "svc-otelcol", HeaderSDKVersion: "0.1.0"}, []wpResource{thirdParty()},
			[3]want{direct(2), dual, dual}},
		{"svc scope in the second resource only", nil, []wpResource{thirdParty(), pySDK("3.2.0", "")},
			[3]want{direct(2), dual, dual}},
		{"svc scope in the second scopeSpans of the first resource", nil,
			[]wpResource{thirdParty(wpScope{name: "openinference.instrumentation.langchain", version: "0.1.0"}, wpScope{name: "my-SVC-wrapper", version: "1.0.0"})},
			[3]want{direct(2), dual, dual}},
		{"svc scope of an older SDK major", nil, []wpResource{jsSDK("js", "4.2.0", "")},
			[3]want{direct(2), dual, dual}},

		// Rule 3: the first scope of the first resource, sdk-experiment batches only.
		{"python SDK 3.9.0 in sdk-experiment", nil, []wpResource{pySDK("3.9.0", "sdk-experiment")},
			[3]want{direct(2), direct(3), direct(3)}},
		{"python SDK 3.9.0 in production", nil, []wpResource{pySDK("3.9.0", "production")},
			[3]want{direct(2), dual, dual}},
		{"python SDK 3.8.9 in sdk-experiment", nil, []wpResource{pySDK("3.8.9", "sdk-experiment")},
			[3]want{direct(2), dual, dual}},
		{"python SDK 3.9.0-rc.1 in sdk-experiment (numbers compared)", nil, []wpResource{pySDK("3.9.0-rc.1", "sdk-experiment")},
			[3]want{direct(2), direct(3), direct(3)}},
		{"environment svc-sdk-experiment loses its svc- prefix", nil, []wpResource{pySDK("3.9.0", "svc-sdk-experiment")},
			[3]want{direct(2), direct(3), direct(3)}},
		{"environment SDK-Experiment is lower-cased", nil, []wpResource{pySDK("3.9.0", "SDK-Experiment")},
			[3]want{direct(2), direct(3), direct(3)}},
		{"environment from the resource", nil,
			[]wpResource{{language: "python", attrs: map[string]any{"deployment.environment.name": "sdk-experiment"}, scopes: []wpScope{{name: "svc-sdk", version: "3.10.0"}}}},
			[3]want{direct(2), direct(3), direct(3)}},
		{"js SDK 4.4.0 in sdk-experiment", nil, []wpResource{jsSDK("js", "4.4.0", "sdk-experiment")},
			[3]want{direct(2), direct(3), direct(3)}},
		{"javascript SDK 4.5.1 in sdk-experiment", nil, []wpResource{jsSDK("javascript", "4.5.1", "sdk-experiment")},
			[3]want{direct(2), direct(3), direct(3)}},
		{"js SDK 4.3.9 in sdk-experiment", nil, []wpResource{jsSDK("js", "4.3.9", "sdk-experiment")},
			[3]want{direct(2), dual, dual}},
		{"nodejs is not a language the rule knows", nil, []wpResource{jsSDK("nodejs", "4.5.0", "sdk-experiment")},
			[3]want{direct(2), dual, dual}},
		{"no telemetry.sdk.language", nil, []wpResource{jsSDK("", "4.5.0", "sdk-experiment")},
			[3]want{direct(2), dual, dual}},
		{"no scope version", nil, []wpResource{pySDK("", "sdk-experiment")},
			[3]want{direct(2), dual, dual}},
		{"a third-party first scope: rule 3 reads no further", nil,
			[]wpResource{thirdParty(wpScope{name: "openai", version: "1.0.0", env: "sdk-experiment"}), pySDK("3.9.0", "sdk-experiment")},
			[3]want{direct(2), dual, dual}},
		{"the batch is sdk-experiment if any span is", nil,
			[]wpResource{pySDK("3.9.0", ""), thirdParty(wpScope{name: "openai", version: "1.0.0", env: "sdk-experiment"})},
			[3]want{direct(2), direct(3), direct(3)}},
		{"old SDK headers, scope rule qualifies", map[string]string{HeaderSDKName: "python", HeaderSDKVersion: "3.9.0"}, []wpResource{pySDK("3.9.0", "sdk-experiment")},
			[3]want{direct(2), direct(3), direct(3)}},
	}
	const delay = time.Hour // a dual span is visible exactly an hour after it arrived
	for di, dep := range []Deployment{SelfHosted, HostedNewOrg, HostedOldOrg} {
		t.Run(dep.String(), func(t *testing.T) {
			p := startPlatform(t, func(o *Options) { o.Deployment = dep; o.StagedDelay = delay })
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					tid := byte(i + 1)
					headers := map[string]string{"Content-Type": "application/x-protobuf"}
					for k, v := range tt.headers {
						headers[k] = v
					}
					resp := sendWithHeaders(t, p, headers, protoBody(t, wpBatch(t, tid, tt.resources...)))
					if resp.status != http.StatusOK {
						t.Fatalf("status %d: %s", resp.status, resp.body)
					}
					reqs := p.Requests(EndpointTraces)
					rec := reqs[len(reqs)-1]
					w := tt.want[di]
					if rec.WritePath != w.path || rec.WritePathRule != w.rule {
						t.Errorf("request written %s by rule %d, want %s by rule %d", rec.WritePath, rec.WritePathRule, w.path, w.rule)
					}
					obs := p.ObservationsByTrace(hexTrace(tid))
					if len(obs) == 0 {
						t.Fatal("nothing stored")
					}
					for _, o := range obs {
						sw, _ := p.SpanWrite(o.TraceID, o.ID)
						wantVisible := sw.FirstArrival
						if w.path == WritePathDual {
							wantVisible = wantVisible.Add(delay)
						}
						if o.WritePath != w.path || o.WritePathRule != w.rule || !o.VisibleAt.Equal(wantVisible) || !sw.VisibleAt.Equal(wantVisible) {
							t.Errorf("span %s: %s by rule %d visible at %v (span write %+v), want %s by rule %d visible at %v",
								o.ID, o.WritePath, o.WritePathRule, o.VisibleAt, sw, w.path, w.rule, wantVisible)
						}
						if !rec.VisibleAt.Equal(wantVisible) {
							t.Errorf("request visible at %v, want %v", rec.VisibleAt, wantVisible)
						}
					}
				})
			}
		})
	}
}

// sendWithHeaders posts a traces body with exactly these headers (and the test credentials). A
// value "\x00empty" sends the header with an empty value.
func sendWithHeaders(t *testing.T, p *Platform, headers map[string]string, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.URL()+PathTraces, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", basicAuth(testPublicKey, testSecretKey))
	for k, v := range headers {
		if v == "\x00empty" {
			v = ""
		}
		req.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// The ingestion version header is checked with either spelling before anything is stored.
func TestIngestionVersionHeaderCheck(t *testing.T) {
	p := startPlatform(t)
	tests := []struct {
		name, header, value string
		status              int
	}{
		{"4", HeaderIngestionVersion, "4", http.StatusOK},
		{"3", HeaderIngestionVersion, "3", http.StatusOK},
		{"5", HeaderIngestionVersion, "5", http.StatusBadRequest},
		{"quoted 4", HeaderIngestionVersion, `"4"`, http.StatusBadRequest},
		{"not a number", HeaderIngestionVersion, "four", http.StatusBadRequest},
		{"underscores 5", "x_svc_ingestion_version", "5", http.StatusBadRequest},
		{"underscores 4", "x_svc_ingestion_version", "4", http.StatusOK},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := sendWithHeaders(t, p, map[string]string{"Content-Type": "application/x-protobuf", tt.header: tt.value},
				protoBody(t, wpBatch(t, byte(i+1), thirdParty())))
			if resp.status != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tt.status, resp.body)
			}
			rec := p.Requests(EndpointTraces)[i]
			if stored := len(p.ObservationsByTrace(hexTrace(byte(i+1)))) > 0; stored != (tt.status == http.StatusOK) || (rec.WritePath != "") != stored {
				t.Errorf("stored %v, write path %q after status %d", stored, rec.WritePath, tt.status)
			}
		})
	}
}

// observationIDsRead is what GET /api/public/v2/observations shows of a trace.
func observationIDsRead(t *testing.T, p *Platform, tid byte) []string {
	t.Helper()
	resp := send(t, p, http.MethodGet, PathObservations+"?traceId="+hexTrace(tid), nil, nil)
	if resp.status != http.StatusOK {
		t.Fatalf("observations: %d %s", resp.status, resp.body)
	}
	var body struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(resp.body, &body); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range body.Data {
		ids = append(ids, d.ID)
	}
	return ids
}

// Staged spans are hidden from the observations API until their delay has passed; direct ones
// show at once; the library's view of storage sees both at once.
func TestReadAPIHidesStagedSpans(t *testing.T) {
	const delay = 400 * time.Millisecond
	p := startPlatform(t, func(o *Options) { o.Deployment = HostedOldOrg; o.StagedDelay = delay })
	sent := time.Now()
	sendSpans(t, p, testResource{scopeName: "openai"}, testSpan{traceID: 1, spanID: 1, name: "staged"})
	resp := sendWithHeaders(t, p, map[string]string{"Content-Type": "application/x-protobuf", HeaderIngestionVersion: "4"},
		protoBody(t, makeTraces(t, testResource{scopeName: "openai"}, testSpan{traceID: 2, spanID: 1, name: "direct"})))
	if resp.status != http.StatusOK {
		t.Fatalf("status %d", resp.status)
	}

	if ids := observationIDsRead(t, p, 1); len(ids) != 0 && time.Since(sent) < delay {
		t.Errorf("staged span shown before its delay: %v", ids)
	}
	if ids := observationIDsRead(t, p, 2); len(ids) != 1 {
		t.Errorf("direct span not shown at once: %v", ids)
	}
	if n := len(p.ObservationsByTrace(hexTrace(1))); n != 1 {
		t.Errorf("ObservationsByTrace sees %d staged spans, want 1 at once", n)
	}
	// The trace record is the legacy table's, written on both paths at once (README.md, "Write path").
	if resp := send(t, p, http.MethodGet, PathTraceRead+hexTrace(1), nil, nil); resp.status != http.StatusOK {
		t.Errorf("trace record of the staged trace: %d, want 200", resp.status)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.WaitVisible(ctx, hexTrace(1), 1); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(sent); waited < delay {
		t.Errorf("WaitVisible returned after %v, before the %v delay", waited, delay)
	}
	if ids := observationIDsRead(t, p, 1); len(ids) != 1 || ids[0] != hexSpan(1) {
		t.Errorf("staged span after its delay: %v, want [%s]", ids, hexSpan(1))
	}
	sw, ok := p.SpanWrite(hexTrace(1), hexSpan(1))
	if !ok || sw.WritePath != WritePathDual || sw.VisibleAt.Sub(sw.FirstArrival) != delay {
		t.Errorf("span write %+v, want dual visible %v after arrival", sw, delay)
	}
	if want := sw.VisibleAt.Sub(testStart.Add(1500 * time.Millisecond)); sw.EndToVisible() != want {
		t.Errorf("EndToVisible %v, want %v", sw.EndToVisible(), want)
	}
}

// A redelivered span keeps the first moment any delivery made it visible.
func TestRedeliveryKeepsFirstVisible(t *testing.T) {
	tests := []struct {
		name        string
		first, then string // ingestion version header of each delivery: "4" direct, "" dual
		want        WritePath
		wantFrom    int // the delivery whose VisibleAt is kept
	}{
		{"staged, then direct before the delay", "", "4", WritePathDirect, 1},
		{"direct, then staged", "4", "", WritePathDirect, 0},
		{"staged twice", "", "", WritePathDual, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startPlatform(t, func(o *Options) { o.Deployment = HostedOldOrg; o.StagedDelay = time.Hour })
			body := protoBody(t, makeTraces(t, testResource{scopeName: "openai"}, testSpan{traceID: 1, spanID: 1, name: "x"}))
			for _, v := range []string{tt.first, tt.then} {
				h := map[string]string{"Content-Type": "application/x-protobuf"}
				if v != "" {
					h[HeaderIngestionVersion] = v
				}
				if resp := sendWithHeaders(t, p, h, body); resp.status != http.StatusOK {
					t.Fatalf("status %d", resp.status)
				}
			}
			reqs := p.Requests(EndpointTraces)
			sw, _ := p.SpanWrite(hexTrace(1), hexSpan(1))
			o, _ := p.Observation(hexTrace(1), hexSpan(1))
			if sw.Deliveries != 2 || sw.WritePath != tt.want || !sw.VisibleAt.Equal(reqs[tt.wantFrom].VisibleAt) {
				t.Errorf("span write %+v, want %s visible at %v", sw, tt.want, reqs[tt.wantFrom].VisibleAt)
			}
			if o.WritePath != sw.WritePath || !o.VisibleAt.Equal(sw.VisibleAt) {
				t.Errorf("observation %s at %v, span write %s at %v", o.WritePath, o.VisibleAt, sw.WritePath, sw.VisibleAt)
			}
		})
	}
}

// The settings: defaults, run-time changes through the library and the control API, Reset.
func TestWritePathSettings(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		p := startPlatform(t)
		if p.Deployment() != SelfHosted || p.StagedDelay() != DefaultStagedDelay {
			t.Errorf("defaults %s %v, want self-hosted %v", p.Deployment(), p.StagedDelay(), DefaultStagedDelay)
		}
	})
	t.Run("no delay", func(t *testing.T) {
		p := startPlatform(t, func(o *Options) { o.Deployment = HostedOldOrg; o.StagedDelay = NoStagedDelay })
		sendSpans(t, p, testResource{scopeName: "openai"}, testSpan{traceID: 1, spanID: 1, name: "x"})
		if ids := observationIDsRead(t, p, 1); len(ids) != 1 {
			t.Errorf("staged span with no delay not shown at once: %v", ids)
		}
		if sw, _ := p.SpanWrite(hexTrace(1), hexSpan(1)); sw.WritePath != WritePathDual || !sw.VisibleAt.Equal(sw.FirstArrival) {
			t.Errorf("span write %+v, want dual visible on arrival", sw)
		}
	})
	t.Run("unknown deployment", func(t *testing.T) {
		if _, err := Start(Options{PublicKey: "pk", SecretKey: "sk", Deployment: Deployment(7)}); err == nil {
			t.Error("Start accepted deployment 7")
		}
	})
	t.Run("control API and Reset", func(t *testing.T) {
		p := startPlatform(t, func(o *Options) { o.StagedDelay = 3 * time.Second })
		post := func(body string) response {
			return send(t, p, http.MethodPost, PathControlWritePath, map[string]string{"Content-Type": "application/json"}, []byte(body))
		}
		for _, tt := range []struct {
			body, deployment, delay string
			status                  int
		}{
			{`{"deployment":"hosted-new-org"}`, "hosted-new-org", "3s", http.StatusOK},
			{`{"stagedDelay":"250ms"}`, "hosted-new-org", "250ms", http.StatusOK},
			{`{"deployment":"hosted-old-org","stagedDelay":"0s"}`, "hosted-old-org", "2s", http.StatusOK},
			{`{"stagedDelay":"-1s"}`, "hosted-old-org", "0s", http.StatusOK},
			{`{"deployment":"cloud"}`, "", "", http.StatusBadRequest},
			{`{"stagedDelay":"soon"}`, "", "", http.StatusBadRequest},
			{`{"delay":"1s"}`, "", "", http.StatusBadRequest},
			{`{}`, "", "", http.StatusBadRequest},
		} {
			resp := post(tt.body)
			if resp.status != tt.status {
				t.Fatalf("%s: status %d, want %d: %s", tt.body, resp.status, tt.status, resp.body)
			}
			if tt.status != http.StatusOK {
				continue
			}
			got := resp.jsonBody(t)
			if got["deployment"] != tt.deployment || got["stagedDelay"] != tt.delay {
				t.Errorf("%s: state %v, want %s %s", tt.body, got, tt.deployment, tt.delay)
			}
		}
		if p.Deployment() != HostedOldOrg || p.StagedDelay() != 0 {
			t.Errorf("library sees %s %v", p.Deployment(), p.StagedDelay())
		}
		p.Reset()
		if p.Deployment() != SelfHosted || p.StagedDelay() != 3*time.Second {
			t.Errorf("after Reset %s %v, want the configured self-hosted 3s", p.Deployment(), p.StagedDelay())
		}
	})
}

// StatsOnly keeps no observation, but still decides the path (the scope rule's environment
// included) and keeps each span's write.
func TestWritePathStatsOnly(t *testing.T) {
	p := startPlatform(t, func(o *Options) { o.StatsOnly = true; o.Deployment = HostedOldOrg; o.StagedDelay = time.Hour })
	for i, r := range []wpResource{
		{language: "python", scopes: []wpScope{{name: "svc-sdk", version: "3.9.0", env: "sdk-experiment"}}},
		{language: "python", scopes: []wpScope{{name: "svc-sdk", version: "3.9.0", env: "production"}}},
	} {
		if resp := sendWithHeaders(t, p, map[string]string{"Content-Type": "application/x-protobuf"}, protoBody(t, wpBatch(t, byte(i+1), r))); resp.status != http.StatusOK {
			t.Fatalf("status %d", resp.status)
		}
	}
	writes := p.SpanWrites("")
	if len(writes) != 2 || writes[0].WritePath != WritePathDirect || writes[0].WritePathRule != RuleScope ||
		writes[1].WritePath != WritePathDual || !writes[0].EndTime.Equal(testStart.Add(time.Second)) {
		t.Errorf("span writes %+v, want direct by rule 3 then dual, ending at %v", writes, testStart.Add(time.Second))
	}
	if st := p.Stats(); st.SpanRequestsByWritePath[WritePathDirect] != 1 || st.SpanRequestsByWritePath[WritePathDual] != 1 {
		t.Errorf("requests by write path %v", st.SpanRequestsByWritePath)
	}
}

func TestVersionAtLeast(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"4.0.0", true}, {"4", true}, {"4.0", true}, {"v4.0.0", true}, {"4.0.1", true}, {"10.0.0", true},
		{"4.0.0.9", true}, {"3.99.99", false}, {"", false}, {"x", false}, {"4.x", false}, {"-4.0.0", false},
	}
	for _, tt := range tests {
		if got := versionAtLeast(tt.v, 4, 0, 0); got != tt.want {
			t.Errorf("versionAtLeast(%q, 4.0.0) = %v, want %v", tt.v, got, tt.want)
		}
	}
}
