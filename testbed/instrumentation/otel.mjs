// The OpenTelemetry setup every client of the matrix shares, as an application would write it: the
// Node SDK's tracer and logger providers with the standard OTLP/HTTP protobuf exporters, which read
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / _LOGS_ENDPOINT and
// OTEL_EXPORTER_OTLP_HEADERS. Beside the export, it records what it exported (for the manifest the
// Go test reads) and can export the same spans and log records a second time (--resend-after-ms), as
// an SDK does when an export timed out although the receiver had it. httpInstrumentations are the
// real HTTP instrumentations every client registers beside its library's: the application's HTTP
// server spans and the HTTP client spans of every request (fetch through undici, node:http), none
// of them GenAI, so the gateway must drop them.
import { NodeTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { LoggerProvider, BatchLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { OTLPLogExporter } from '@opentelemetry/exporter-logs-otlp-proto';
import { logs } from '@opentelemetry/api-logs';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';

// httpInstrumentations: @opentelemetry/instrumentation-http (node:http servers and clients, e.g.
// openai 4.x through node-fetch) and @opentelemetry/instrumentation-undici (global fetch, which
// openai 6.x, Anthropic's SDK and the Vercel AI SDK use).
export function httpInstrumentations() {
  return [new HttpInstrumentation(), new UndiciInstrumentation()];
}

// RecordingExporter passes every batch on and keeps what it passed.
class RecordingExporter {
  constructor(inner) { this.inner = inner; this.items = []; this.failures = []; }
  export(items, done) {
    this.items.push(...items);
    this.inner.export(items, (result) => {
      if (result.code !== 0) this.failures.push(String(result.error ?? result.code));
      done(result);
    });
  }
  // resend exports everything exported so far once more, in one batch.
  resend() {
    if (this.items.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.inner.export(this.items, (result) => {
      if (result.code !== 0) this.failures.push(String(result.error ?? result.code));
      resolve();
    }));
  }
  forceFlush() { return this.inner.forceFlush ? this.inner.forceFlush() : Promise.resolve(); }
  shutdown() { return this.inner.shutdown(); }
}

export function setupOTel({ serviceName, withLogs }) {
  const resource = resourceFromAttributes({ 'service.name': serviceName, 'deployment.environment.name': 'matrix' });
  const spans = new RecordingExporter(new OTLPTraceExporter());
  const tracerProvider = new NodeTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(spans, { scheduledDelayMillis: 200, maxExportBatchSize: 512 })],
  });
  tracerProvider.register();
  let loggerProvider, records;
  if (withLogs) {
    records = new RecordingExporter(new OTLPLogExporter());
    loggerProvider = new LoggerProvider({ resource, processors: [new BatchLogRecordProcessor({ exporter: records, scheduledDelayMillis: 200 })] });
    logs.setGlobalLoggerProvider(loggerProvider);
  }
  return {
    tracerProvider,
    loggerProvider,
    async flush() {
      await tracerProvider.forceFlush();
      if (loggerProvider) await loggerProvider.forceFlush();
    },
    // resend exports the log records and the spans again, in the order given ('logs-first' or
    // 'spans-first'): the two exporters retry on their own, either may come back first.
    async resend(order = 'logs-first') {
      if (order === 'spans-first') await spans.resend();
      if (records) await records.resend();
      if (order !== 'spans-first') await spans.resend();
    },
    async shutdown() {
      await tracerProvider.shutdown();
      if (loggerProvider) await loggerProvider.shutdown();
    },
    failures: () => [...spans.failures, ...(records ? records.failures : [])],
    exportedSpans: () => spans.items.map(spanRecord),
    exportedRecords: () => (records ? records.items.length : 0),
  };
}

// spanRecord is what the manifest says of an exported span.
function spanRecord(s) {
  const ctx = s.spanContext();
  const parent = s.parentSpanContext ?? (s.parentSpanId ? { spanId: s.parentSpanId } : undefined);
  const scope = s.instrumentationScope ?? s.instrumentationLibrary ?? {};
  return {
    traceId: ctx.traceId,
    spanId: ctx.spanId,
    parentSpanId: parent?.spanId ?? '',
    name: s.name,
    kind: s.kind,
    scope: scope.name ?? '',
    scopeVersion: scope.version ?? '',
    attributes: s.attributes,
    events: (s.events ?? []).map((e) => ({ name: e.name, attributes: e.attributes ?? {} })),
  };
}
