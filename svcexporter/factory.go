package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"context"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"

	"github.com/svc/svc-collector/pkg/credentials"
	"github.com/svc/svc-collector/svcexporter/internal/metadata"
)

// NewFactory returns the factory of the svc exporter (type `svc`).
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithTraces(createTraces, metadata.TracesStability),
		exporter.WithLogs(createLogs, metadata.LogsStability),
	)
}

func createDefaultConfig() component.Config {
	clientConfig := confighttp.NewDefaultClientConfig()
	clientConfig.Timeout = 30 * time.Second
	// Compression stays unset here: the environment decides when the config does not
	// (resolveCompression), and gzip is the default after that.
	clientConfig.WriteBufferSize = 512 * 1024
	return &Config{
		ClientConfig:       clientConfig,
		QueueConfig:        configoptional.Some(exporterhelper.NewDefaultQueueConfig()),
		RetryConfig:        configretry.NewDefaultBackOffConfig(),
		ServerVersionCheck: VersionCheckEnforce,
		WritePath:          WritePathAuto,
	}
}

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	exp, err := newSvcExporter(cfg.(*Config), set)
	if err != nil {
		return nil, err
	}
	// Span batches are requests of this exporter (spansRequest), so that the persistent queue
	// stores them encoded and compressed as they are sent (spans_queue.go).
	c := cfg.(*Config)
	qc, qs := tracesQueueBatch(c, xexporterhelper.QueueBatchSettings{
		Encoding:         spansQueueEncoding{codec: exp.codec, logger: exp.logger},
		ReferenceCounter: spansReferenceCounter{},
	})
	opts := append(helperOptions(exp), xexporterhelper.WithQueueBatch(qc, qs))
	persistent := c.QueueConfig.HasValue() && c.QueueConfig.Get().StorageID != nil
	convert := spansRequestFromTraces(exp.codec, persistent, c.WritePath == WritePathAuto)
	return xexporterhelper.NewTracesRequest(ctx, set, convert, exp.pushRequest, opts...)
}

// tracesQueueBatch is the span queue's config and settings: queueConfig, and with write_path auto
// and batching on, batches partitioned by write path class too (classPartitioner), so that a
// batch never merges Direct and Staged spans. The partitioner takes over the config's metadata
// keys, which exporterhelper would refuse beside a partitioner of the exporter's.
func tracesQueueBatch(c *Config, set xexporterhelper.QueueBatchSettings) (configoptional.Optional[exporterhelper.QueueBatchConfig], xexporterhelper.QueueBatchSettings) {
	qc := queueConfig(c)
	if c.WritePath != WritePathAuto || !qc.HasValue() || !qc.Get().Batch.HasValue() {
		return qc, set
	}
	q := *qc.Get()
	b := *q.Batch.Get()
	keys := b.Partition.MetadataKeys
	b.Partition.MetadataKeys = nil
	q.Batch = configoptional.Some(b)
	set.Partitioner = classPartitioner{keys: keys}
	set.MergeCtx = metadataMergeCtx(keys)
	return configoptional.Some(q), set
}

func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	exp, err := newSvcExporter(cfg.(*Config), set)
	if err != nil {
		return nil, err
	}
	// Scores are requests of this exporter (scoresRequest), encoded as JSON once, before the
	// queue, which stores them so (scores_queue.go).
	opts := append(helperOptions(exp),
		xexporterhelper.WithQueueBatch(queueConfig(cfg.(*Config)), xexporterhelper.QueueBatchSettings{
			Encoding: scoresQueueEncoding{exp: exp},
		}))
	return xexporterhelper.NewLogsRequest(ctx, set, exp.scoresRequestFromLogs, exp.pushScoresRequest, opts...)
}

// helperOptions are the exporterhelper settings of both signals but the queue's.
func helperOptions(exp *svcExporter) []exporterhelper.Option {
	c := exp.cfg
	return []exporterhelper.Option{
		exporterhelper.WithStart(exp.start),
		exporterhelper.WithShutdown(exp.shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		// The HTTP client's `timeout` bounds each request; a push may make several (413 split,
		// 100-score chunks), so the helper's own per-push timeout is off, as in otlphttp.
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
		exporterhelper.WithRetry(c.RetryConfig),
	}
}

// queueConfig is the sending_queue as configured, except that in pass-through mode batching is
// always partitioned by the request's credentials (client metadata `authorization`): a batch
// never mixes the data of two tenants, whatever the config says. The persistent queue keeps each
// item's client metadata on disk (exporterhelper v0.164 does, with no feature gate), so each
// queued item goes with its own credentials after a restart too.
func queueConfig(c *Config) configoptional.Optional[exporterhelper.QueueBatchConfig] {
	if !c.PassThrough || !c.QueueConfig.HasValue() || !c.QueueConfig.Get().Batch.HasValue() {
		return c.QueueConfig
	}
	q := *c.QueueConfig.Get()
	b := *q.Batch.Get()
	if !slices.ContainsFunc(b.Partition.MetadataKeys, func(k string) bool { return strings.EqualFold(k, credentials.MetadataKey) }) {
		b.Partition.MetadataKeys = append(slices.Clone(b.Partition.MetadataKeys), credentials.MetadataKey)
	}
	q.Batch = configoptional.Some(b)
	return configoptional.Some(q)
}
