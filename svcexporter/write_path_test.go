package svcexporter

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// scopeSpec is one scope of a test batch, under a resource of its own, and the path the test
// expects its spans on under write_path auto ("direct" or "staged").
type scopeSpec struct {
	language, name, version string
	spans                   int
	want                    string
}

// The spans of PLATFORM's cases: current svc SDK majors and other instrumentations go direct,
// older majors stay staged.
var (
	jsCurrent = scopeSpec{"nodejs", "svc-sdk", "6.0.0", 3, "direct"}
	pyCurrent = scopeSpec{"python", "svc-sdk", "5.1.0", 3, "direct"}
	openAI    = scopeSpec{"python", "opentelemetry.instrumentation.openai", "0.40.0", 3, "direct"}
	vercelAI  = scopeSpec{"nodejs", "ai", "", 2, "direct"}
	jsOld     = scopeSpec{"nodejs", "svc-sdk", "4.4.0", 3, "staged"}
	pyOld     = scopeSpec{"python", "svc-sdk", "3.9.0", 2, "staged"}
)

// classTraces is a batch of scopes, each under a resource of its own, its spans numbered from
// first on and carrying the path the test expects them on (attribute "want").
func classTraces(first int, scopes ...scopeSpec) ptrace.Traces {
	td := ptrace.NewTraces()
	n := first
	for _, s := range scopes {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("telemetry.sdk.language", s.language)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(s.name)
		ss.Scope().SetVersion(s.version)
		for range s.spans {
			span := ss.Spans().AppendEmpty()
			span.SetName("llm")
			span.SetTraceID(testTraceID(n))
			span.SetSpanID(testSpanID(n))
			span.Attributes().PutStr("want", s.want)
			n++
		}
	}
	return td
}

// pathRequest is one span request the platform accepted, as far as its write path goes.
type pathRequest struct {
	ingestion     []string // x-svc-ingestion-version values
	sdkHeaders    []string // x-svc-sdk-name and x-svc-sdk-version values: must stay empty
	authorization string
	wants         map[string]int // spans by the path the test expects them on
	owners        map[string]bool
	spans         []pcommon.SpanID
}

// pathLog records the span requests a fake platform accepts (413 and outages are answered
// before recording, by fail).
type pathLog struct {
	mu       sync.Mutex
	requests []pathRequest
}

func (l *pathLog) handler(t *testing.T, fail func(w http.ResponseWriter, body []byte, spans []pcommon.SpanID) bool) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		req := ptraceotlp.NewExportRequest()
		if !assert.NoError(t, req.UnmarshalProto(body)) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		pr := pathRequest{
			ingestion:     r.Header.Values("X-Svc-Ingestion-Version"),
			sdkHeaders:    append(r.Header.Values("X-Svc-Sdk-Name"), r.Header.Values("X-Svc-Sdk-Version")...),
			authorization: r.Header.Get("Authorization"),
			wants:         map[string]int{},
			owners:        map[string]bool{},
		}
		rss := req.Traces().ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			if v, ok := rss.At(i).Resource().Attributes().Get("tenant"); ok {
				pr.owners[v.Str()] = true
			}
			for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
				spans := rss.At(i).ScopeSpans().At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					want, _ := spans.At(k).Attributes().Get("want")
					pr.wants[want.Str()]++
					pr.spans = append(pr.spans, spans.At(k).SpanID())
				}
			}
		}
		if fail != nil && fail(w, body, pr.spans) {
			return
		}
		l.mu.Lock()
		l.requests = append(l.requests, pr)
		l.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}
}

func (l *pathLog) all() []pathRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]pathRequest(nil), l.requests...)
}

func (l *pathLog) spanCount() int {
	n := 0
	for _, r := range l.all() {
		n += len(r.spans)
	}
	return n
}

// checkAutoPaths checks what write_path auto promises of every request: the spans of one class
// only, x-svc-ingestion-version 4 exactly on the Direct ones, never an SDK header; and every span
// of want delivered once.
func checkAutoPaths(t *testing.T, l *pathLog, want ...ptrace.Traces) {
	t.Helper()
	got := map[pcommon.SpanID]int{}
	for i, r := range l.all() {
		assert.Empty(t, r.sdkHeaders, "request %d: the gateway sends no SDK headers", i)
		require.Len(t, r.wants, 1, "request %d mixes paths: %v", i, r.wants)
		for class := range r.wants {
			if class == "direct" {
				assert.Equal(t, []string{"4"}, r.ingestion, "request %d of direct spans", i)
			} else {
				assert.Empty(t, r.ingestion, "request %d of staged spans", i)
			}
		}
		for _, id := range r.spans {
			got[id]++
		}
	}
	wantIDs := map[pcommon.SpanID]int{}
	for _, td := range want {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			spans := rss.At(i).ScopeSpans().At(0).Spans()
			for k := 0; k < spans.Len(); k++ {
				wantIDs[spans.At(k).SpanID()] = 1
			}
		}
	}
	assert.Equal(t, wantIDs, got, "every span exactly once")
}

// unqueued is cfg without a sending queue: ConsumeTraces returns once the platform answered.
func unqueued(cfg *Config) *Config {
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	return cfg
}

func startTraces(t *testing.T, env *testEnv, cfg *Config) exporter.Traces {
	t.Helper()
	require.NoError(t, cfg.Validate())
	exp, err := NewFactory().CreateTraces(context.Background(), env.settings, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	return exp
}

// acceptedByPath reads exporter_svc_span_requests_accepted by its write_path attribute.
func acceptedByPath(t *testing.T, tel *componenttest.Telemetry) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, err := tel.GetMetric("otelcol_exporter_svc_span_requests_accepted")
	if err != nil {
		return out
	}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value("write_path")
		out[v.AsString()] += dp.Value
	}
	return out
}

func TestWritePathModes(t *testing.T) {
	mixed := []scopeSpec{jsCurrent, jsOld, openAI, pyOld, pyCurrent, vercelAI}
	tests := []struct {
		name   string
		mode   WritePath
		scopes []scopeSpec
		// want: per request in order, the x-svc-ingestion-version it carries and its spans' wants.
		want     []pathRequest
		accepted map[string]int64
	}{
		{
			name: "auto, mixed batch: the staged spans in a request of their own, without the header", mode: WritePathAuto, scopes: mixed,
			want: []pathRequest{
				{ingestion: nil, wants: map[string]int{"staged": 5}},
				{ingestion: []string{"4"}, wants: map[string]int{"direct": 11}},
			},
			accepted: map[string]int64{"staged": 1, "direct": 1},
		},
		{
			name: "auto, current SDKs and other instrumentations: one direct request", mode: WritePathAuto, scopes: []scopeSpec{jsCurrent, openAI, pyCurrent},
			want:     []pathRequest{{ingestion: []string{"4"}, wants: map[string]int{"direct": 9}}},
			accepted: map[string]int64{"direct": 1},
		},
		{
			name: "auto, older majors only: one staged request", mode: WritePathAuto, scopes: []scopeSpec{jsOld, pyOld},
			want:     []pathRequest{{ingestion: nil, wants: map[string]int{"staged": 5}}},
			accepted: map[string]int64{"staged": 1},
		},
		{
			name: "always: one request, all of it direct", mode: WritePathAlways, scopes: mixed,
			want:     []pathRequest{{ingestion: []string{"4"}, wants: map[string]int{"staged": 5, "direct": 11}}},
			accepted: map[string]int64{"direct": 1},
		},
		{
			name: "never: one request without the header", mode: WritePathNever, scopes: mixed,
			want:     []pathRequest{{ingestion: nil, wants: map[string]int{"staged": 5, "direct": 11}}},
			accepted: map[string]int64{"platform": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearCompressionEnv(t)
			p := newFakePlatform(t)
			log := &pathLog{}
			p.setTraces(log.handler(t, nil))
			cfg := unqueued(testConfig(p.srv.URL))
			cfg.WritePath = tt.mode
			env := newTestEnv(t)
			exp := startTraces(t, env, cfg)
			td := classTraces(1, tt.scopes...)
			require.NoError(t, exp.ConsumeTraces(context.Background(), td))
			require.NoError(t, exp.Shutdown(context.Background()))

			got := log.all()
			require.Len(t, got, len(tt.want))
			for i, w := range tt.want {
				assert.Equal(t, w.ingestion, got[i].ingestion, "request %d", i)
				assert.Equal(t, w.wants, got[i].wants, "request %d", i)
				assert.Empty(t, got[i].sdkHeaders, "request %d", i)
			}
			assert.Equal(t, tt.accepted, acceptedByPath(t, env.telemetry))
			if tt.mode == WritePathAuto {
				checkAutoPaths(t, log, td)
			}
		})
	}
}

// The SDK headers a client sent (client metadata, with the receiver's include_metadata) decide the
// class of all its spans, as they decided its direct export; they are never forwarded.
func TestWritePathClientHeaders(t *testing.T) {
	headers := func(kv ...string) context.Context {
		md := map[string][]string{}
		for i := 0; i < len(kv); i += 2 {
			md[kv[i]] = []string{kv[i+1]}
		}
		return client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(md)})
	}
	third := openAI
	tests := []struct {
		name      string
		ctx       context.Context
		scope     scopeSpec
		ingestion []string
	}{
		{name: "no headers: other instrumentations go direct", ctx: context.Background(), scope: third, ingestion: []string{"4"}},
		{name: "Python SDK 3 sent them: staged, as its direct export", ctx: headers("x-svc-sdk-name", "python", "x-svc-sdk-version", "3.12.0"), scope: third},
		{name: "underscore header names, as the platform reads them", ctx: headers("x_svc_sdk_name", "javascript", "x_svc_sdk_version", "4.4.0"), scope: third},
		{name: "JS SDK 6 headers over a scope of unknown version: direct", ctx: headers("x-svc-sdk-name", "javascript", "x-svc-sdk-version", "6.0.0"),
			scope: scopeSpec{"nodejs", "svc-sdk", "", 2, "direct"}, ingestion: []string{"4"}},
		{name: "the client asked for ingestion version 4", ctx: headers("x-svc-ingestion-version", "4"), scope: pyOld, ingestion: []string{"4"}},
		{name: "another gateway's name decides nothing", ctx: headers("x-svc-sdk-name", "svc-otelcol", "x-svc-sdk-version", "0.9.0"), scope: third, ingestion: []string{"4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearCompressionEnv(t)
			p := newFakePlatform(t)
			log := &pathLog{}
			p.setTraces(log.handler(t, nil))
			exp := startTraces(t, newTestEnv(t), unqueued(testConfig(p.srv.URL)))
			require.NoError(t, exp.ConsumeTraces(tt.ctx, classTraces(1, tt.scope)))
			require.NoError(t, exp.Shutdown(context.Background()))
			got := log.all()
			require.Len(t, got, 1)
			assert.Equal(t, tt.ingestion, got[0].ingestion)
			assert.Empty(t, got[0].sdkHeaders, "the client's SDK headers are never forwarded")
		})
	}
}

// batchingConfig is cfg with a queue that batches: every batch is a flush of what came within
// 50 ms, so that batches of both classes meet in the batcher.
func batchingConfig(cfg *Config) *Config {
	q := exporterhelper.NewDefaultQueueConfig()
	b := exporterhelper.NewDefaultBatchConfig()
	b.FlushTimeout = 50 * time.Millisecond
	b.MinSize = 1000
	q.Batch = configoptional.Some(b)
	cfg.QueueConfig = configoptional.Some(q)
	return cfg
}

// With sending_queue.batch, the batcher merges requests: never those of two classes, also beside
// metadata keys of the config (pass-through credentials), and never two tenants'.
func TestWritePathBatchingNeverMergesClasses(t *testing.T) {
	tests := []struct {
		name        string
		passThrough bool
	}{
		{name: "own keys"},
		{name: "pass-through: partitioned by credentials and class"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearCompressionEnv(t)
			p := newFakePlatform(t)
			log := &pathLog{}
			p.setTraces(log.handler(t, nil))
			cfg := batchingConfig(testConfig(p.srv.URL))
			if tt.passThrough {
				cfg = batchingConfig(passThroughConfig(p.srv.URL))
			}
			exp := startTraces(t, newTestEnv(t), cfg)

			// An older Python SDK's third-party spans, staged by its headers, as its direct export.
			oldSDKOpenAI := openAI
			oldSDKOpenAI.want = "staged"
			oldSDKHeaders := map[string][]string{"x-svc-sdk-name": {"python"}, "x-svc-sdk-version": {"3.12.0"}}
			batches := []struct {
				scopes  []scopeSpec
				headers map[string][]string
			}{
				{scopes: []scopeSpec{jsCurrent, openAI}},
				{scopes: []scopeSpec{jsOld}},
				{scopes: []scopeSpec{pyCurrent, pyOld, vercelAI}},
				{scopes: []scopeSpec{oldSDKOpenAI}, headers: oldSDKHeaders},
			}
			var mu sync.Mutex
			var sent []ptrace.Traces
			var wg sync.WaitGroup
			pushes := 0
			for g, tn := range []tenant{tenantA, tenantB} {
				for b, batch := range batches {
					pushes += 10
					wg.Go(func() {
						for i := range 10 {
							td := classTraces(1+((g*len(batches)+b)*10+i)*20, batch.scopes...)
							md := map[string][]string{}
							for k, v := range batch.headers {
								md[k] = v
							}
							if tt.passThrough {
								md["authorization"] = []string{tn.authorization()}
								for r := 0; r < td.ResourceSpans().Len(); r++ {
									td.ResourceSpans().At(r).Resource().Attributes().PutStr("tenant", tn.publicKey)
								}
							}
							ctx := client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(md)})
							mu.Lock()
							sent = append(sent, td)
							mu.Unlock()
							assert.NoError(t, exp.ConsumeTraces(ctx, td))
						}
					})
				}
			}
			wg.Wait()
			require.NoError(t, exp.Shutdown(context.Background())) // flushes the batches
			checkAutoPaths(t, log, sent...)
			for i, r := range log.all() {
				if tt.passThrough {
					require.Len(t, r.owners, 1, "request %d mixes tenants", i)
					for owner := range r.owners {
						assert.Equal(t, owner, tenantOf(r.authorization), "request %d", i)
					}
				}
			}
			assert.Less(t, len(log.all()), pushes, "spans were batched (fewer requests than pushes)")
		})
	}
}

// The class of a queued batch survives a restart on the persistent queue; batches stored by the
// release before (no class) go staged, the path they would have taken then.
func TestWritePathPersistentQueueKeepsTheClass(t *testing.T) {
	clearCompressionEnv(t)
	ctx := context.Background()
	p := newFakePlatform(t)
	var down atomic.Bool
	log := &pathLog{}
	p.setTraces(log.handler(t, func(w http.ResponseWriter, _ []byte, _ []pcommon.SpanID) bool {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	}))
	cfg := withPersistentQueue(testConfig(p.srv.URL))
	env := newTestEnv(t)
	writer, err := NewFactory().CreateTraces(ctx, env.settings, cfg)
	require.NoError(t, err)
	reader, err := NewFactory().CreateTraces(ctx, env.settings, cfg)
	require.NoError(t, err)
	batches := []ptrace.Traces{
		classTraces(1, jsCurrent, openAI),
		classTraces(100, jsOld, pyOld),
		classTraces(200, pyCurrent, jsOld, vercelAI, pyOld),
	}
	total := 0
	for _, td := range batches {
		total += td.SpanCount()
	}
	throughRestart(t, queueRestart{
		env: env, platform: p, down: &down, path: tracesPath, signal: "traces", magic: spansQueueMagic,
		writer: writer, reader: reader,
		push: func() {
			for _, td := range batches {
				require.NoError(t, writer.ConsumeTraces(ctx, td))
			}
		},
		delivered: log.spanCount,
		toDeliver: total,
	})
	checkAutoPaths(t, log, batches...)
}

func TestWritePathQueuedWithoutAClassGoesStaged(t *testing.T) {
	enc := spansQueueEncoding{codec: testCodec(t, configcompression.TypeGzip)}
	td := classTraces(1, jsCurrent)
	body, protoSize, err := enc.codec.encode(td)
	require.NoError(t, err)
	reqCtx, err := marshalRequestContext(context.Background())
	require.NoError(t, err)
	// An item of format version 1, as the release before write_path stored it.
	item := appendQueueHeader(nil, spansQueueMagic, spansQueueVersionNoClass, queuedGzip, reqCtx, uint64(td.SpanCount()), uint64(protoSize))
	item = appendQueueChecksum(append(item, body...))
	_, got, err := enc.Unmarshal(item)
	require.NoError(t, err)
	assert.Equal(t, classStaged, got.(*spansRequest).class)
	gotTD, err := got.(*spansRequest).traces()
	require.NoError(t, err)
	assert.Equal(t, td.SpanCount(), gotTD.SpanCount())

	// exporterhelper's own encoding (the releases before this exporter's format).
	stock, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	_, got, err = enc.Unmarshal(stock)
	require.NoError(t, err)
	assert.Equal(t, classStaged, got.(*spansRequest).class)

	// This release's items keep their class.
	for _, class := range []requestClass{classNone, classDirect, classStaged, classMixed} {
		r := newSpansRequest(td, enc.codec)
		r.class = class
		item, err := enc.Marshal(context.Background(), r)
		require.NoError(t, err)
		_, got, err := enc.Unmarshal(item)
		require.NoError(t, err)
		assert.Equal(t, class, got.(*spansRequest).class)
	}
}

// A 413 splits a mixed batch within each class: every half keeps its class's header; the rest of a
// batch met by an outage is retried in its classes too.
func TestWritePath413SplitAndRetryKeepTheHeader(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		name := "in-memory queue"
		if persistent {
			name = "persistent queue"
		}
		t.Run(name, func(t *testing.T) {
			clearCompressionEnv(t)
			ctx := context.Background()
			p := newFakePlatform(t)
			log := &pathLog{}
			var outages atomic.Int32
			p.setTraces(log.handler(t, func(w http.ResponseWriter, _ []byte, spans []pcommon.SpanID) bool {
				if len(spans) > 4 {
					w.WriteHeader(http.StatusRequestEntityTooLarge)
					return true
				}
				for _, id := range spans {
					if id == testSpanID(12) && outages.Add(1) == 1 {
						w.WriteHeader(http.StatusServiceUnavailable)
						return true
					}
				}
				return false
			}))
			cfg := testConfig(p.srv.URL)
			cfg.RetryConfig.InitialInterval = 10 * time.Millisecond
			host := componenttest.NewNopHost()
			if persistent {
				withPersistentQueue(cfg)
				h, ext := startFileStorage(t, t.TempDir())
				defer func() { require.NoError(t, ext.Shutdown(ctx)) }()
				host = h
			}
			exp, err := NewFactory().CreateTraces(ctx, newTestEnv(t).settings, cfg)
			require.NoError(t, err)
			require.NoError(t, exp.Start(ctx, host))
			td := classTraces(1, jsCurrent, jsOld, openAI, pyOld, pyCurrent, jsOld, vercelAI)
			require.NoError(t, exp.ConsumeTraces(ctx, td))
			require.Eventually(t, func() bool { return log.spanCount() >= td.SpanCount() }, 10*time.Second, 10*time.Millisecond)
			require.NoError(t, exp.Shutdown(ctx))
			checkAutoPaths(t, log, td)
			assert.Equal(t, int32(2), outages.Load(), "span 12 met the outage once and was retried once")
			var sizes []int
			for _, r := range log.all() {
				sizes = append(sizes, len(r.spans))
			}
			sort.Ints(sizes)
			assert.LessOrEqual(t, sizes[len(sizes)-1], 4, "split below the limit")
		})
	}
}

// BenchmarkClassOf is what write_path auto adds to a push of one class: reading the client's
// headers and each scope once; nothing per span.
func BenchmarkClassOf(b *testing.B) {
	batches := map[string]ptrace.Traces{
		"other_instrumentations": makeTraces(4, 5, benchSpansPerPush/20, 0),
		"svc_sdk_6":              svcSDKTraces(makeTraces(4, 5, benchSpansPerPush/20, 0)),
	}
	ctx := tenantA.ctx()
	for name, td := range batches {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if classOf(ctx, td) != classDirect {
					b.Fatal("not direct")
				}
			}
		})
	}
}
