// The Vercel AI SDK with its OpenAI provider against the mock: experimental_telemetry on, with the
// user and session as telemetry metadata. The SDK writes its spans with the global tracer (scope `ai`).
const telemetry = (functionId) => ({
  isEnabled: true, functionId, metadata: { userId: 'user-42', sessionId: 'session-7', ticketDesk: 'refunds' },
});

export default {
  packages: ['ai', '@ai-sdk/openai'],
  async run({ require, mockURL, call, SYSTEM }) {
    const { generateText, streamText } = require('ai');
    const { createOpenAI } = require('@ai-sdk/openai');
    const openai = createOpenAI({ baseURL: `${mockURL}/v1`, apiKey: 'mock-key' });
    await call('chat', 'gpt-4o-mini', (p) => generateText({ model: openai.chat('gpt-4o-mini'), system: SYSTEM, prompt: p, experimental_telemetry: telemetry('refund-desk') }));
    await call('chat-stream', 'gpt-4o-mini', async (p) => {
      const r = streamText({ model: openai.chat('gpt-4o-mini'), system: SYSTEM, prompt: p, experimental_telemetry: telemetry('refund-desk-stream') });
      for await (const _ of r.textStream) { /* consume */ }
    });
    await call('responses', 'gpt-4.1-mini', (p) => generateText({ model: openai.responses('gpt-4.1-mini'), system: SYSTEM, prompt: p, experimental_telemetry: telemetry('refund-desk-responses') }));
  },
};
