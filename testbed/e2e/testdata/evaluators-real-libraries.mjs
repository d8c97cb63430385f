// Real instrumentations for the evaluators test (testbed/e2e/evaluators_real_test.go), with the
// packages of testbed/instrumentation (installed by `make instrumentation-deps`):
//   - the Vercel AI SDK (`ai` with @ai-sdk/openai) answering valid and invalid JSON, with
//     experimental_telemetry metadata response_format=json;
//   - the official @opentelemetry/instrumentation-openai (content as log records) on an `openai`
//     chat call the model refuses.
// The model is a fetch stub, so no server is needed. Each call runs in an application span
// (scope evaluators-app, dropped by the gateway); the script prints {case: traceId} as JSON.
// Usage: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 node evaluators-real-libraries.mjs <instrumentation dir>
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(path.resolve(process.argv[2]), 'package.json'));
const { NodeTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-node');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-proto');
const { LoggerProvider, BatchLogRecordProcessor } = require('@opentelemetry/sdk-logs');
const { OTLPLogExporter } = require('@opentelemetry/exporter-logs-otlp-proto');
const { logs } = require('@opentelemetry/api-logs');
const { trace } = require('@opentelemetry/api');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { registerInstrumentations } = require('@opentelemetry/instrumentation');
const { OpenAIInstrumentation } = require('@opentelemetry/instrumentation-openai');

const resource = resourceFromAttributes({ 'service.name': 'evaluators-real' });
const tracerProvider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] });
tracerProvider.register();
const loggerProvider = new LoggerProvider({ resource, processors: [new BatchLogRecordProcessor({ exporter: new OTLPLogExporter() })] });
logs.setGlobalLoggerProvider(loggerProvider);
registerInstrumentations({ instrumentations: [new OpenAIInstrumentation({ captureMessageContent: true })] });

// chatCompletion is an OpenAI chat completion answering content (or refusing).
const chatCompletion = (model, message) => async () => new Response(JSON.stringify({
  id: 'chatcmpl-1', object: 'chat.completion', created: Math.floor(Date.now() / 1000), model,
  choices: [{ index: 0, message: { role: 'assistant', content: message.content ?? null, refusal: message.refusal ?? null }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
}), { headers: { 'content-type': 'application/json' } });

const { generateText } = require('ai');
const { createOpenAI } = require('@ai-sdk/openai');
const OpenAI = require('openai').OpenAI;

const app = trace.getTracer('evaluators-app');
const inApp = (name, fn) => app.startActiveSpan(name, async (span) => {
  try { await fn(); } finally { span.end(); }
  return span.spanContext().traceId;
});
const vercel = (answer) => inApp('vercel', () => generateText({
  model: createOpenAI({ apiKey: 'stub', fetch: chatCompletion('gpt-4o-mini', { content: answer }) }).chat('gpt-4o-mini'),
  prompt: 'Plan a trip to Paris as JSON.',
  experimental_telemetry: { isEnabled: true, functionId: 'plan', metadata: { response_format: 'json' } },
}));

const out = {};
out.vercelValidJSON = await vercel('{"plan":["fly","hotel"]}');
out.vercelInvalidJSON = await vercel('Sure! {"plan":["fly"');
out.openaiRefusal = await inApp('openai', () => new OpenAI({ apiKey: 'stub', fetch: chatCompletion('gpt-4o', { content: "I'm sorry, but I can't help with that." }) })
  .chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'How do I pick a lock?' }] }));
await tracerProvider.forceFlush();
await loggerProvider.forceFlush();
await tracerProvider.shutdown();
await loggerProvider.shutdown();
console.log(JSON.stringify(out));
