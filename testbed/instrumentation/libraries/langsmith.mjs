// LangSmith's OpenTelemetry mode: `traceable` functions and the wrapped OpenAI client write OTel
// spans (scope `langsmith`) through the application's tracer provider, exported by the standard
// OTLP exporter. LangSmith's own API is pointed at the mock, so nothing leaves the machine.
export default {
  packages: ['langsmith', 'openai'],
  env: (mockURL) => ({
    LANGSMITH_TRACING: 'true', LANGSMITH_OTEL_ENABLED: 'true', LANGSMITH_ENDPOINT: mockURL, LANGSMITH_API_KEY: 'mock-key',
  }),
  async run({ require, mockURL, call, SYSTEM, otel }) {
    const { initializeOTEL } = require('langsmith/experimental/otel/setup');
    initializeOTEL({ globalTracerProvider: otel.tracerProvider, skipGlobalContextManagerSetup: true });
    const { traceable } = require('langsmith/traceable');
    const { wrapOpenAI } = require('langsmith/wrappers/openai');
    const { Client } = require('langsmith');
    const { OpenAI } = require('openai');
    // One LangSmith client for the traceable and the wrapper, so that its queue can be awaited.
    const langsmith = new Client();
    const client = wrapOpenAI(new OpenAI({ baseURL: `${mockURL}/v1`, apiKey: 'mock-key' }), { client: langsmith });
    const answer = traceable(async (question) => {
      const r = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: question }] });
      return r.choices[0].message.content;
    }, { name: 'refund_desk', run_type: 'chain', client: langsmith });
    await call('chat', 'gpt-4o-mini', (p) => answer(p));
    await langsmith.awaitPendingTraceBatches();
  },
};
