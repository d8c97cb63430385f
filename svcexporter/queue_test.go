package svcexporter

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// storageHost is a collector host with a file_storage extension (bbolt, as in the distribution).
type storageHost struct {
	exts map[component.ID]component.Component
}

func (h storageHost) GetExtensions() map[component.ID]component.Component { return h.exts }

var fileStorageID = component.MustNewID("file_storage")

// startFileStorage starts a file_storage on dir; one per collector start, as after a restart.
func startFileStorage(t testing.TB, dir string) (storageHost, storage.Extension) {
	t.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	return storageHost{exts: map[component.ID]component.Component{fileStorageID: ext}}, ext.(storage.Extension)
}

// withPersistentQueue puts cfg's sending_queue on file_storage, with quick retries.
func withPersistentQueue(cfg *Config) *Config {
	q := exporterhelper.NewDefaultQueueConfig()
	id := fileStorageID
	q.StorageID = &id
	q.Sizer = exporterhelper.RequestSizerTypeItems
	q.QueueSize = 100000
	cfg.QueueConfig = configoptional.Some(q)
	cfg.RetryConfig.InitialInterval = 10 * time.Millisecond
	cfg.RetryConfig.MaxInterval = 50 * time.Millisecond
	return cfg
}

// previousReleaseTraces is the traces exporter as the release before this one built it:
// exporterhelper's own traces request, whose persistent queue stores its own encoding.
func previousReleaseTraces(t testing.TB, set exporter.Settings, cfg *Config) exporter.Traces {
	t.Helper()
	exp, err := newSvcExporter(cfg, set)
	require.NoError(t, err)
	tr, err := exporterhelper.NewTraces(context.Background(), set, cfg, exp.pushTraces,
		append(helperOptions(exp), exporterhelper.WithQueue(queueConfig(cfg)))...)
	require.NoError(t, err)
	return tr
}

// numberedTraces are n spans of tenant tn with span ids first, first+1, ...
func numberedTraces(tn tenant, first, n int) ptrace.Traces {
	td := tenantTraces(tn, n)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < spans.Len(); i++ {
		spans.At(i).SetSpanID(testSpanID(first + i))
	}
	return td
}

// deliveryLog is what a platform accepted (answered 2xx), request by request.
type deliveryLog struct {
	mu       sync.Mutex
	requests []delivered
}

type delivered struct {
	encoding      string
	authorization string
	owner         string // the tenant attribute of the spans' resource
	ingestion     string // x-svc-ingestion-version
	spans         []pcommon.SpanID
	err           error
}

func (l *deliveryLog) add(d delivered) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests = append(l.requests, d)
}

func (l *deliveryLog) all() []delivered {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]delivered(nil), l.requests...)
}

func (l *deliveryLog) spanCount() int {
	n := 0
	for _, d := range l.all() {
		n += len(d.spans)
	}
	return n
}

// decodeDelivered reads a body the fake platform decompressed, as the platform does.
func decodeDelivered(r *http.Request, body []byte) delivered {
	d := delivered{encoding: r.Header.Get("Content-Encoding"), authorization: r.Header.Get("Authorization"),
		ingestion: r.Header.Get("X-Svc-Ingestion-Version")}
	req := ptraceotlp.NewExportRequest()
	if d.err = req.UnmarshalProto(body); d.err != nil {
		return d
	}
	td := req.Traces()
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		if v, ok := rs.Resource().Attributes().Get("tenant"); ok {
			d.owner = v.Str()
		}
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			for k := 0; k < rs.ScopeSpans().At(j).Spans().Len(); k++ {
				d.spans = append(d.spans, rs.ScopeSpans().At(j).Spans().At(k).SpanID())
			}
		}
	}
	return d
}

// TestPersistentQueueDeliversAfterRestart queues span batches while the platform is down,
// stops the exporter, starts a new one on the same file_storage directory (a restart, or the
// upgrade from the release before) and checks what the platform gets: every span once, in
// OTLP/protobuf it decodes, compressed once as configured, each batch with its own tenant's
// credentials in pass-through mode.
func TestPersistentQueueDeliversAfterRestart(t *testing.T) {
	tests := []struct {
		name        string
		writer      string // "this release" or "release before"
		passThrough bool
		compression configcompression.Type
	}{
		{name: "restart, gzip", writer: "this release", compression: configcompression.TypeGzip},
		{name: "restart, pass-through, gzip", writer: "this release", passThrough: true, compression: configcompression.TypeGzip},
		{name: "restart, pass-through, no compression", writer: "this release", passThrough: true, compression: compressionNone},
		{name: "upgrade, gzip", writer: "release before", compression: configcompression.TypeGzip},
		{name: "upgrade, pass-through, gzip", writer: "release before", passThrough: true, compression: configcompression.TypeGzip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearCompressionEnv(t)
			ctx := context.Background()
			p := newFakePlatform(t)
			var down atomic.Bool
			log := &deliveryLog{}
			p.setTraces(func(w http.ResponseWriter, r *http.Request, body []byte) {
				if down.Load() {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				log.add(decodeDelivered(r, body))
				w.WriteHeader(http.StatusOK)
			})
			cfg := testConfig(p.srv.URL)
			if tt.passThrough {
				cfg = passThroughConfig(p.srv.URL)
			}
			cfg.ClientConfig.Compression = tt.compression
			withPersistentQueue(cfg)
			env := newTestEnv(t)

			var writer exporter.Traces
			if tt.writer == "this release" {
				var err error
				writer, err = NewFactory().CreateTraces(ctx, env.settings, cfg)
				require.NoError(t, err)
			} else {
				writer = previousReleaseTraces(t, env.settings, cfg)
			}
			const pushes, perPush = 6, 10
			tenants := map[pcommon.SpanID]tenant{}
			push := func() {
				for i := range pushes {
					tn := []tenant{tenantA, tenantB}[i%2]
					td := numberedTraces(tn, 1+i*perPush, perPush)
					for _, id := range spanIDs(t, td) {
						tenants[id] = tn
					}
					pushCtx := ctx
					if tt.passThrough {
						pushCtx = tn.ctx()
					}
					require.NoError(t, writer.ConsumeTraces(pushCtx, td))
				}
			}
			var magic []byte
			if tt.writer == "this release" {
				magic = spansQueueMagic
			}
			reader, err := NewFactory().CreateTraces(ctx, env.settings, cfg)
			require.NoError(t, err)
			throughRestart(t, queueRestart{
				env: env, platform: p, down: &down, path: tracesPath, signal: "traces", magic: magic,
				writer: writer, push: push, reader: reader,
				delivered: func() int { return log.spanCount() },
				toDeliver: pushes * perPush,
			})

			got := map[pcommon.SpanID]int{}
			for i, d := range log.all() {
				require.NoError(t, d.err, "request %d decodes as OTLP/protobuf", i)
				if tt.compression == configcompression.TypeGzip {
					assert.Equal(t, "gzip", d.encoding, "request %d: gzip on the wire, once", i)
				} else {
					assert.Empty(t, d.encoding, "request %d", i)
				}
				for _, id := range d.spans {
					got[id]++
					if tt.passThrough {
						assert.Equal(t, tenants[id].authorization(), d.authorization, "span %s goes with its own tenant's credentials", id)
					}
				}
				if tt.writer == "this release" {
					assert.Equal(t, "4", d.ingestion, "request %d: spans of other instrumentations than the svc SDKs go direct", i)
				} else {
					assert.Empty(t, d.ingestion, "request %d: queued before write_path: staged, as it would have been sent then", i)
				}
				if tt.passThrough {
					assert.Equal(t, tenantOf(d.authorization), d.owner, "request %d", i)
				} else {
					assert.Equal(t, tenant{testPublicKey, testSecretKey}.authorization(), d.authorization)
				}
			}
			want := map[pcommon.SpanID]int{}
			for id := range tenants {
				want[id] = 1
			}
			assert.Equal(t, want, got, "every span exactly once")
		})
	}
}

// queueRestart is a restart of a collector with a persistent queue: what writer queues (push)
// while the platform is down, reader delivers after the restart.
type queueRestart struct {
	env      *testEnv
	platform *fakePlatform
	down     *atomic.Bool
	path     string // where the platform takes the signal
	signal   string // the signal's name in the storage ("traces", "logs")
	// magic is the format writer stores its items in; nil: not checked (exporterhelper's).
	magic     []byte
	writer    component.Component
	push      func()
	reader    component.Component
	delivered func() int // how many items the platform accepted
	toDeliver int
}

// throughRestart starts writer on a file_storage in a new directory, pushes while the platform
// is down, stops both once the platform was tried and checks the format of the first item; then
// starts reader on a new file_storage of the same directory (a restart, or an upgrade from the
// release before), brings the platform up and waits until everything queued was delivered.
func throughRestart(t *testing.T, r queueRestart) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	r.down.Store(true)
	host, ext := startFileStorage(t, dir)
	require.NoError(t, r.writer.Start(ctx, host))
	r.push()
	require.Eventually(t, func() bool { return len(r.platform.received(r.path)) > 0 }, 5*time.Second, 5*time.Millisecond,
		"the exporter tried to send")
	require.NoError(t, r.writer.Shutdown(ctx))
	if r.magic != nil {
		c, err := ext.GetClient(ctx, component.KindExporter, r.env.settings.ID, r.signal)
		require.NoError(t, err)
		item, err := c.Get(ctx, "0")
		require.NoError(t, err)
		require.NotEmpty(t, item)
		assert.Equal(t, r.magic, item[:len(r.magic)], "stored in the exporter's own format")
		require.NoError(t, c.Close(ctx))
	}
	require.NoError(t, ext.Shutdown(ctx))
	assert.Zero(t, r.delivered(), "nothing is delivered while the platform is down")

	r.down.Store(false)
	host, ext = startFileStorage(t, dir)
	require.NoError(t, r.reader.Start(ctx, host))
	require.Eventually(t, func() bool { return r.delivered() >= r.toDeliver }, 10*time.Second, 10*time.Millisecond,
		"everything queued is delivered after the restart")
	require.NoError(t, r.reader.Shutdown(ctx))
	require.NoError(t, ext.Shutdown(ctx))
}

// tenantOf is the public key of the tenant whose Authorization header this is.
func tenantOf(authorization string) string {
	for _, tn := range []tenant{tenantA, tenantB} {
		if tn.authorization() == authorization {
			return tn.publicKey
		}
	}
	return ""
}

// Batches read from the persistent queue come without their spans decoded: a 413 split and a
// partial retry (the rest of a split batch meeting an outage) decode them and still deliver
// every span once.
func TestPersistentQueue413SplitAndPartialRetry(t *testing.T) {
	clearCompressionEnv(t)
	ctx := context.Background()
	const limit = 6 * 1024 // decompressed bytes: about 20 spans of 300 bytes
	p := newFakePlatform(t)
	log := &deliveryLog{}
	var outages atomic.Int32
	p.setTraces(func(w http.ResponseWriter, r *http.Request, body []byte) {
		if len(body) > limit {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		d := decodeDelivered(r, body)
		// The first request carrying span 40 meets an outage: the spans before it were delivered,
		// those from it on go back to the retry.
		for _, id := range d.spans {
			if id == testSpanID(40) && outages.Add(1) == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		}
		log.add(d)
		w.WriteHeader(http.StatusOK)
	})
	cfg := withPersistentQueue(testConfig(p.srv.URL))
	env := newTestEnv(t)
	host, ext := startFileStorage(t, t.TempDir())
	defer func() { require.NoError(t, ext.Shutdown(ctx)) }()
	exp, err := NewFactory().CreateTraces(ctx, env.settings, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(ctx, host))
	td := makeTraces(3, 2, 17, 300) // 102 spans
	require.NoError(t, exp.ConsumeTraces(ctx, td))
	require.Eventually(t, func() bool { return log.spanCount() >= 102 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, exp.Shutdown(ctx))

	got := map[pcommon.SpanID]int{}
	for _, d := range log.all() {
		require.NoError(t, d.err)
		assert.Equal(t, "gzip", d.encoding)
		for _, id := range d.spans {
			got[id]++
		}
	}
	want := map[pcommon.SpanID]int{}
	for _, id := range spanIDs(t, td) {
		want[id] = 1
	}
	assert.Equal(t, want, got, "every span exactly once")
	assert.Equal(t, int32(2), outages.Load(), "span 40 met the outage once and was retried once")
}
