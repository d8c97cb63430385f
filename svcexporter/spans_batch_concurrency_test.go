package svcexporter

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// With sending_queue.batch, the queue's consumers hand requests to the batcher and release them
// (the reference counter's Unref) as soon as the batcher took them, while the batcher may still
// hold one as its current batch and merge the next request into it on another consumer's
// goroutine. Pass-through keeps several consumers (batches are partitioned by the request's
// credentials). Many goroutines push small batches of two tenants: every span is delivered once,
// with its own tenant's credentials, and -race finds no data race between the release and the
// merge.
func TestSpansBatchingWithConcurrentConsumers(t *testing.T) {
	const (
		goroutines = 8
		pushes     = 40 // per goroutine
		perPush    = 3
		total      = goroutines * pushes * perPush
	)
	for _, queue := range []string{"in memory", "file_storage"} {
		t.Run(queue, func(t *testing.T) {
			clearCompressionEnv(t)
			ctx := context.Background()
			p := newFakePlatform(t)
			log := &deliveryLog{}
			p.setTraces(func(w http.ResponseWriter, r *http.Request, body []byte) {
				log.add(decodeDelivered(r, body))
				w.WriteHeader(http.StatusOK)
			})
			cfg := passThroughConfig(p.srv.URL)
			var host component.Host = componenttest.NewNopHost()
			if queue == "file_storage" {
				withPersistentQueue(cfg)
				h, ext := startFileStorage(t, t.TempDir())
				defer func() { require.NoError(t, ext.Shutdown(ctx)) }()
				host = h
			}
			q := *cfg.QueueConfig.Get()
			q.NumConsumers = 10
			b := exporterhelper.NewDefaultBatchConfig()
			b.Sizer = exporterhelper.RequestSizerTypeItems
			b.MinSize, b.MaxSize = 50, 70
			b.FlushTimeout = 20 * time.Millisecond
			q.Batch = configoptional.Some(b)
			cfg.QueueConfig = configoptional.Some(q)

			env := newTestEnv(t)
			exp, err := NewFactory().CreateTraces(ctx, env.settings, cfg)
			require.NoError(t, err)
			require.NoError(t, exp.Start(ctx, host))

			owners := make(map[pcommon.SpanID]tenant, total)
			for g := range goroutines {
				for i := range pushes {
					tn := []tenant{tenantA, tenantB}[(g+i)%2]
					for _, id := range spanIDs(t, numberedTraces(tn, 1+(g*pushes+i)*perPush, perPush)) {
						owners[id] = tn
					}
				}
			}
			done := make(chan struct{})
			for g := range goroutines {
				go func() {
					defer func() { done <- struct{}{} }()
					for i := range pushes {
						tn := []tenant{tenantA, tenantB}[(g+i)%2]
						assert.NoError(t, exp.ConsumeTraces(tn.ctx(), numberedTraces(tn, 1+(g*pushes+i)*perPush, perPush)))
					}
				}()
			}
			for range goroutines {
				<-done
			}
			require.Eventually(t, func() bool { return log.spanCount() >= total }, 10*time.Second, 5*time.Millisecond,
				"every span is delivered")
			require.NoError(t, exp.Shutdown(ctx))

			got := make(map[pcommon.SpanID]int, total)
			for i, d := range log.all() {
				require.NoError(t, d.err, "request %d decodes as OTLP/protobuf", i)
				assert.LessOrEqual(t, len(d.spans), 70, "request %d: max_size", i)
				for _, id := range d.spans {
					got[id]++
					assert.Equal(t, owners[id].authorization(), d.authorization, "span %s goes with its own tenant's credentials", id)
				}
			}
			assert.Len(t, got, total, "every span delivered")
			for id, n := range got {
				assert.Equal(t, 1, n, "span %s delivered once", id)
			}
			assert.Less(t, len(log.all()), goroutines*pushes, "spans were batched (fewer requests than pushes)")
		})
	}
}
