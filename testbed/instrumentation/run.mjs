#!/usr/bin/env node
// One client of the instrumentation matrix: `node run.mjs <library>` starts the mock LLM server
// (mock-llm.mjs, or uses MOCK_LLM_URL), sets up the OpenTelemetry SDK with the standard OTLP
// exporters (their OTEL_EXPORTER_OTLP_* environment variables say where to), registers the real
// instrumentation of <library> beside the real HTTP instrumentations (otel.mjs), and makes its LLM
// calls, each one in the handler of a real HTTP request `POST /chat` to the application's own
// server (127.0.0.1), and exports. `node run.mjs list` lists the libraries. README.md has more.
//
// Options: --manifest FILE writes what was exported (spans, call tags, package versions) as JSON;
// --resend-after-ms N exports the same spans and log records a second time N ms after the first,
// the log records first unless --resend-order spans-first.
import { createRequire } from 'node:module';
import { writeFileSync, readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { trace } from '@opentelemetry/api';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { startMockLLM } from './mock-llm.mjs';
import { setupOTel, httpInstrumentations } from './otel.mjs';

const here = dirname(fileURLToPath(import.meta.url));
export const LIBRARIES = [
  'openinference-openai', 'openinference-langchain', 'traceloop-openai', 'traceloop-anthropic',
  'otel-openai', 'elastic-openai', 'vercel-ai', 'langsmith', 'svc-sdk-v3', 'svc-sdk-v6',
];

// The personal data of every kind the gateway's default masking rules cover.
export const PII = {
  email: 'jane.doe@example.com', phone: '+44 20 7946 0958', card: '4111 1111 1111 1111',
  iban: 'DE89 3704 0044 0532 0130 00', apiKey: 'sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z',
};
export const SYSTEM = 'You are the refund desk of Acme.';
export const promptFor = (tag) => `Ticket ${tag}: I am ${PII.email}, call me on ${PII.phone}. ` +
  `Refund card ${PII.card} to IBAN ${PII.iban}; my key is ${PII.apiKey}.`;

function parseArgs(argv) {
  const args = { library: argv[0], manifest: '', resendAfterMs: 0, resendOrder: 'logs-first' };
  for (let i = 1; i < argv.length; i++) {
    if (argv[i] === '--manifest') args.manifest = argv[++i];
    else if (argv[i] === '--resend-after-ms') args.resendAfterMs = Number(argv[++i]);
    else if (argv[i] === '--resend-order') args.resendOrder = argv[++i];
    else throw new Error(`unknown option ${argv[i]}`);
  }
  return args;
}

// versionOf reads the installed version of pkg, as node would resolve it from dir.
function versionOf(pkg, dir = here) {
  for (let d = dir; ; d = dirname(d)) {
    const f = join(d, 'node_modules', pkg, 'package.json');
    if (existsSync(f)) return JSON.parse(readFileSync(f, 'utf8')).version;
    if (dirname(d) === d) return 'not installed';
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (!args.library || args.library === 'list') {
    console.log(LIBRARIES.join('\n'));
    return;
  }
  if (!LIBRARIES.includes(args.library)) throw new Error(`unknown library ${args.library}; one of: ${LIBRARIES.join(', ')}`);
  // Content capture on, as a user who wants to see prompts does; nothing leaves the machine.
  process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT ??= 'true';
  process.env.TRACELOOP_TRACE_CONTENT ??= 'true';

  const mock = process.env.MOCK_LLM_URL ? { url: process.env.MOCK_LLM_URL, close: async () => {} } : await startMockLLM();
  const lib = (await import(`./libraries/${args.library}.mjs`)).default;
  for (const [k, v] of Object.entries(lib.env ? lib.env(mock.url) : {})) process.env[k] = v;
  // OTEL_LOGS_EXPORTER=none (the standard variable) turns the log export off, e.g. to export
  // straight to the platform, which has no logs endpoint.
  const otel = setupOTel({ serviceName: `matrix-${args.library}`, withLogs: !!lib.logs && process.env.OTEL_LOGS_EXPORTER !== 'none' });
  const instrumentations = lib.instrumentations ? lib.instrumentations() : [];
  registerInstrumentations({ instrumentations: [...httpInstrumentations(), ...instrumentations],
    tracerProvider: otel.tracerProvider, loggerProvider: otel.loggerProvider });

  // node:http through require, after the registration, so the HTTP instrumentation has patched it.
  const require = createRequire(join(here, 'package.json'));
  const app = await startApp(require('node:http'));
  const calls = [];
  const errors = [];
  // call makes one request to the application (fetch: an HTTP client span), whose handler (inside
  // the HTTP server span) runs fn with the call's prompt.
  const call = async (kind, model, fn) => {
    const tag = `T-${args.library}-${calls.length + 1}`;
    const seen = app.expect(tag, async () => {
      const server = trace.getActiveSpan()?.spanContext();
      try {
        await fn(promptFor(tag), tag);
      } catch (e) {
        errors.push(`${kind}: ${e.stack || e}`);
        throw e;
      } finally {
        calls.push({ tag, kind, model, traceId: server?.traceId ?? '', serverSpanId: server?.spanId ?? '' });
      }
    });
    const res = await fetch(`${app.url}/chat`, { method: 'POST', body: tag });
    await res.text();
    await seen;
  };
  await lib.run({ require, mockURL: mock.url, call, otel, instrumentations, SYSTEM, PII });

  await otel.flush();
  if (args.resendAfterMs > 0) {
    await new Promise((r) => setTimeout(r, args.resendAfterMs));
    await otel.resend(args.resendOrder);
  }
  const exported = otel.exportedSpans();
  const records = otel.exportedRecords();
  await otel.shutdown();
  await mock.close();
  await app.close();
  const manifest = {
    library: args.library,
    packages: Object.fromEntries(lib.packages.map((p) => {
      const [name, from] = Array.isArray(p) ? p : [p, here];
      return [name, versionOf(name, from)];
    })),
    node: process.version,
    calls, spans: exported, records, resent: args.resendAfterMs > 0,
    failures: otel.failures(), errors,
  };
  if (args.manifest) writeFileSync(args.manifest, JSON.stringify(manifest, null, 1));
  console.error(`${args.library}: ${calls.length} calls, ${exported.length} spans and ${records} log records exported` +
    (args.resendAfterMs > 0 ? ' (twice)' : '') + (manifest.failures.length ? `; export failures: ${manifest.failures.join('; ')}` : ''));
  if (errors.length) {
    console.error(errors.join('\n'));
    process.exitCode = 1;
  }
  if (manifest.failures.length) process.exitCode = 1;
}

// startApp serves the application: POST /chat with a call's tag as body runs that call's handler
// and answers 200, or 500 when it threw.
function startApp(http) {
  const handlers = new Map();
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', async () => {
      const h = handlers.get(body);
      if (req.method !== 'POST' || req.url !== '/chat' || !h) {
        res.writeHead(404).end();
        return;
      }
      try {
        await h.fn();
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
        h.resolve();
      } catch {
        res.writeHead(500).end();
        h.resolve();
      }
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    url: `http://127.0.0.1:${server.address().port}`,
    expect: (tag, fn) => new Promise((done) => handlers.set(tag, { fn, resolve: done })),
    close: () => new Promise((r) => server.close(r)),
  })));
}

main().catch((e) => { console.error(e); process.exit(1); });
