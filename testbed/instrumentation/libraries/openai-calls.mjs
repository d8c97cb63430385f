// The OpenAI calls of the openai-based clients: chat completions, streamed chat completions, and
// (where the instrumentation covers it) the Responses API.
export async function openAICalls(OpenAI, { mockURL, call, SYSTEM }, { responses = true } = {}) {
  const client = new OpenAI({ baseURL: `${mockURL}/v1`, apiKey: 'mock-key' });
  const messages = (p) => [{ role: 'system', content: SYSTEM }, { role: 'user', content: p }];
  await call('chat', 'gpt-4o-mini', (p) => client.chat.completions.create({ model: 'gpt-4o-mini', messages: messages(p), temperature: 0.2 }));
  await call('chat-stream', 'gpt-4o-mini', async (p) => {
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: messages(p), stream: true, stream_options: { include_usage: true } });
    for await (const _ of stream) { /* consume */ }
  });
  if (responses) {
    await call('responses', 'gpt-4.1-mini', (p) => client.responses.create({ model: 'gpt-4.1-mini', instructions: SYSTEM, input: p }));
  }
}
