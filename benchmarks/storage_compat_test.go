package benchmarks

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/svc/svc-collector/svcexporter"
	"github.com/svc/svc-collector/svcfilestorageextension"
	"github.com/svc/svc-collector/svcspanfilterprocessor"
)

// The shipped config keeps its storage in svc_file_storage with large_value_files off: its
// directory is then contrib's file_storage's, so a gateway can move to contrib's extension and
// back on the same directory (a downgrade, or a build without ours) and lose nothing. This test
// runs the svc exporter's persistent queue and the span filter's journal of held spans on one
// storage, stops them with spans queued (the platform refuses) and held (their parent has not
// arrived), and starts them again on the other storage with the platform up: every span arrives,
// once. With large_value_files on, contrib's extension reads pointers where span batches and held
// spans were: they are lost (the queue and the journal log them as unreadable), which is why
// leaving it means draining the queues and the held spans first (svcfilestorageextension/README.md).
func TestStorageDirectoryMovesBetweenSvcAndContribFileStorage(t *testing.T) {
	tests := []struct {
		name           string
		writer, reader storageOf
		storedLost     bool // what the first run queued and held is lost
	}{
		{name: "svc_file_storage to contrib's file_storage", writer: svcStorage(false), reader: contribStorage},
		{name: "contrib's file_storage to svc_file_storage", writer: contribStorage, reader: svcStorage(false)},
		{name: "svc_file_storage with large_value_files to contrib's", writer: svcStorage(true), reader: contribStorage, storedLost: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			platform := newRecordingPlatform(t)

			// The first run: the platform refuses, spans are queued; a parent never comes, its
			// children are held.
			platform.refuse.Store(true)
			queued := numberedSpans(compatTraceID(1), 1, 40, pcommon.SpanID{}) // a whole trace: goes on at once
			heldParent := compatSpanID(1000)
			held := numberedSpans(compatTraceID(2), 101, 20, heldParent)
			parent := numberedSpans(compatTraceID(2), 1000, 1, pcommon.SpanID{})
			// Counted before they are sent: the pipeline takes the data it is given.
			want := spanIDsOf(queued, held, parent)
			if tt.storedLost {
				want = spanIDsOf(parent)
			}
			run := startPipeline(t, tt.writer, dir, platform.url)
			require.NoError(t, run.processor.ConsumeTraces(ctx, queued))
			require.NoError(t, run.processor.ConsumeTraces(ctx, held))
			require.Eventually(t, func() bool { return platform.tries.Load() > 0 }, 10*time.Second, 10*time.Millisecond,
				"the exporter tried the platform")
			run.stop(t)
			require.Zero(t, platform.count(), "nothing arrives while the platform refuses")

			// The second run on the other storage: the platform takes everything; the parent arrives.
			platform.refuse.Store(false)
			run = startPipeline(t, tt.reader, dir, platform.url)
			require.NoError(t, run.processor.ConsumeTraces(ctx, parent))
			require.Eventually(t, func() bool { return platform.count() >= len(want) }, 20*time.Second, 20*time.Millisecond,
				"the spans queued and held by the first run arrive: %d of %d (%d requests)", platform.count(), len(want), platform.tries.Load())
			time.Sleep(200 * time.Millisecond) // time for a duplicate or a lost span's absence to show
			run.stop(t)
			assert.Equal(t, want, platform.delivered(), "each span once, none lost")
		})
	}
}

// storageOf starts a storage extension on dir and returns it with its id.
type storageOf func(t *testing.T, dir string) (component.ID, extension.Extension)

func svcStorage(largeValueFiles bool) storageOf {
	return func(t *testing.T, dir string) (component.ID, extension.Extension) {
		f := svcfilestorageextension.NewFactory()
		cfg := f.CreateDefaultConfig().(*svcfilestorageextension.Config)
		cfg.Directory = dir
		cfg.LargeValueFiles = largeValueFiles
		return createStorage(t, f, cfg)
	}
}

func contribStorage(t *testing.T, dir string) (component.ID, extension.Extension) {
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	return createStorage(t, f, cfg)
}

func createStorage(t *testing.T, f extension.Factory, cfg component.Config) (component.ID, extension.Extension) {
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	return component.NewID(f.Type()), ext
}

// pipeline is the shipped traces pipeline's storage users: the span filter (journal on the
// storage, held spans kept at shutdown) feeding the svc exporter (queue on the storage).
type pipeline struct {
	storage   extension.Extension
	processor interface {
		component.Component
		ConsumeTraces(context.Context, ptrace.Traces) error
	}
	exporter component.Component
	stopped  bool
}

func startPipeline(t *testing.T, storageOf storageOf, dir, endpoint string) *pipeline {
	t.Helper()
	ctx := context.Background()
	id, ext := storageOf(t, dir)
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	host := storagetest.NewStorageHost().WithExtension(id, ext)

	ef := svcexporter.NewFactory()
	ecfg := ef.CreateDefaultConfig().(*svcexporter.Config)
	ecfg.ClientConfig.Endpoint = endpoint
	ecfg.PublicKey, ecfg.SecretKey = "pk-lf-1", "sk-lf-1"
	q := exporterhelper.NewDefaultQueueConfig()
	q.StorageID = &id
	q.Sizer = exporterhelper.RequestSizerTypeBytes
	q.QueueSize = 64 << 20
	ecfg.QueueConfig = configoptional.Some(q)
	ecfg.RetryConfig.InitialInterval = 20 * time.Millisecond
	ecfg.RetryConfig.MaxInterval = 50 * time.Millisecond
	eset := exportertest.NewNopSettings(ef.Type())
	eset.ID = component.NewID(ef.Type()) // the queue's file is named after it: the same in both runs
	eset.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	exp, err := ef.CreateTraces(ctx, eset, ecfg)
	require.NoError(t, err)

	pf := svcspanfilterprocessor.NewFactory()
	pcfg := pf.CreateDefaultConfig().(*svcspanfilterprocessor.Config)
	pcfg.Storage = &id
	pcfg.TraceIntegrity.OnShutdown = "keep"
	pset := processortest.NewNopSettings(pf.Type())
	pset.ID = component.NewID(pf.Type())
	pset.Logger = eset.Logger
	proc, err := pf.CreateTraces(ctx, pset, pcfg, exp)
	require.NoError(t, err)

	p := &pipeline{storage: ext, processor: proc, exporter: exp}
	t.Cleanup(func() { p.shutdown() }) // after a failure
	require.NoError(t, exp.Start(ctx, host))
	require.NoError(t, proc.Start(ctx, host))
	return p
}

func (p *pipeline) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.shutdown())
}

func (p *pipeline) shutdown() error {
	if p.stopped {
		return nil
	}
	p.stopped = true
	ctx := context.Background()
	return errors.Join(p.processor.Shutdown(ctx), p.exporter.Shutdown(ctx), p.storage.Shutdown(ctx))
}

// recordingPlatform answers the svc exporter as the platform does (health, span requests) and
// counts each span id it accepted.
type recordingPlatform struct {
	url    string
	refuse atomic.Bool
	tries  atomic.Int64
	mu     sync.Mutex
	spans  map[string]int
}

func newRecordingPlatform(t *testing.T) *recordingPlatform {
	p := &recordingPlatform{spans: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/api/public/health") {
			_, _ = io.WriteString(w, `{"status":"OK","version":"4.59.0"}`)
			return
		}
		p.tries.Add(1)
		if p.refuse.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err == nil && r.Header.Get("Content-Encoding") == "gzip" {
			var zr *gzip.Reader
			if zr, err = gzip.NewReader(bytes.NewReader(body)); err == nil {
				body, err = io.ReadAll(zr)
			}
		}
		req := ptraceotlp.NewExportRequest()
		if err == nil {
			err = req.UnmarshalProto(body)
		}
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		for id := range spanIDsOf(req.Traces()) {
			p.spans[id]++
		}
		p.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

func (p *recordingPlatform) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.spans)
}

func (p *recordingPlatform) delivered() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.spans))
	for k, v := range p.spans {
		out[k] = v
	}
	return out
}

// spanIDsOf counts the span ids of the traces: each once.
func spanIDsOf(tds ...ptrace.Traces) map[string]int {
	out := map[string]int{}
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					out[s.SpanID().String()]++
				}
			}
		}
	}
	return out
}

func compatTraceID(n byte) pcommon.TraceID { return pcommon.TraceID{0xc0, 15: n} }

func compatSpanID(n int) pcommon.SpanID {
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], uint64(n))
	return id
}

// numberedSpans are n GenAI spans of one trace with span ids first, first+1, ...: children of
// parent, or, when parent is empty, a root (the first) and its children. Each carries 2 KB
// of random content, so that a request's queued gzip batch is larger than the value files' 16 KiB
// threshold.
func numberedSpans(traceID pcommon.TraceID, first, n int, parent pcommon.SpanID) ptrace.Traces {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	ss.Scope().SetName("svc-sdk")
	rnd := rand.New(rand.NewPCG(uint64(first), 1)) // content that gzip cannot shrink much
	for i := first; i < first+n; i++ {
		content := make([]byte, 1024)
		for j := range content {
			content[j] = byte(rnd.Uint32())
		}
		s := ss.Spans().AppendEmpty()
		s.SetName("chat")
		s.SetTraceID(traceID)
		s.SetSpanID(compatSpanID(i))
		switch {
		case !parent.IsEmpty():
			s.SetParentSpanID(parent)
		case i > first:
			s.SetParentSpanID(compatSpanID(first))
		}
		s.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
		s.Attributes().PutStr("gen_ai.prompt", hex.EncodeToString(content))
	}
	return td
}
