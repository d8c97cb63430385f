import { AnthropicInstrumentation } from '@traceloop/instrumentation-anthropic';

export default {
  packages: ['@traceloop/instrumentation-anthropic', '@anthropic-ai/sdk'],
  instrumentations: () => [new AnthropicInstrumentation({ traceContent: true })],
  async run({ require, mockURL, call, SYSTEM }) {
    const Anthropic = require('@anthropic-ai/sdk').Anthropic;
    const client = new Anthropic({ baseURL: mockURL, apiKey: 'mock-key' });
    const params = (p) => ({ model: 'claude-opus-4-6', max_tokens: 256, system: SYSTEM, messages: [{ role: 'user', content: p }] });
    await call('messages', 'claude-opus-4-6', (p) => client.messages.create(params(p)));
    await call('messages-stream', 'claude-opus-4-6', async (p) => {
      const stream = await client.messages.create({ ...params(p), stream: true });
      for await (const _ of stream) { /* consume */ }
    });
  },
};
