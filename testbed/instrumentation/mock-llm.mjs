// A mock LLM server on 127.0.0.1 for the instrumentation matrix: the OpenAI chat completions
// (plain and streamed), OpenAI Responses and Anthropic messages shapes. Each answer repeats the
// ticket tag of the prompt (`Ticket T-...`) and carries personal data, so that a test can tell the
// calls apart and check that both sides are masked. Any other path answers 200 {} (e.g. a
// LangSmith endpoint pointed here, so that nothing leaves the machine).
//
// Run alone: `node mock-llm.mjs` prints its base URL and serves until killed.
import http from 'node:http';
import { pathToFileURL } from 'node:url';

export const ANSWER_PII = { email: 'jane.doe@example.com', card: '4111 1111 1111 1111' };
export const USAGE = { input: 31, output: 17 };

// answerFor is the model's answer to a prompt: it repeats the prompt's ticket tag.
export function answerFor(prompt) {
  const tag = (/Ticket (T-[A-Za-z0-9-]+)/.exec(prompt) || [, 'T-none'])[1];
  return `Ticket ${tag} done: refund to card ${ANSWER_PII.card} confirmed, receipt sent to ${ANSWER_PII.email}.`;
}

// textOf flattens any message content shape (string, parts, Responses input) into text.
function textOf(v) {
  if (v == null) return '';
  if (typeof v === 'string') return v;
  if (Array.isArray(v)) return v.map(textOf).join('\n');
  if (typeof v === 'object') return textOf(v.content ?? v.text ?? v.input ?? '');
  return String(v);
}

function chunks(text) {
  const words = text.split(' ');
  const out = [];
  for (let i = 0; i < words.length; i += 4) out.push(words.slice(i, i + 4).join(' ') + (i + 4 < words.length ? ' ' : ''));
  return out;
}

// CREATED is the creation time of every answer (unix seconds), fixed, so that two runs of one
// program answer alike: instrumentations record it (the Vercel AI SDK as ai.response.timestamp),
// and the platform-view comparison compares it between a direct run and one through the gateway,
// which the wall clock would set seconds apart.
export const CREATED = 1_764_158_400; // 2025-11-26T12:00:00Z

let seq = 0;
const id = (p) => `${p}_${Date.now().toString(36)}${(++seq).toString(36)}`;

function chatCompletion(req, res, body) {
  const prompt = textOf(body.messages);
  const text = answerFor(prompt);
  const model = body.model;
  const usage = { prompt_tokens: USAGE.input, completion_tokens: USAGE.output, total_tokens: USAGE.input + USAGE.output,
    prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } };
  const created = CREATED;
  const cid = id('chatcmpl');
  if (!body.stream) {
    return json(res, { id: cid, object: 'chat.completion', created, model, system_fingerprint: 'fp_mock',
      choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage });
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const send = (o) => res.write(`data: ${JSON.stringify(o)}\n\n`);
  const base = { id: cid, object: 'chat.completion.chunk', created, model, system_fingerprint: 'fp_mock' };
  send({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] });
  for (const c of chunks(text)) send({ ...base, choices: [{ index: 0, delta: { content: c }, logprobs: null, finish_reason: null }] });
  send({ ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }] });
  if (body.stream_options?.include_usage) send({ ...base, choices: [], usage });
  res.end('data: [DONE]\n\n');
}

function responses(req, res, body) {
  const prompt = textOf(body.input) + '\n' + textOf(body.instructions);
  const text = answerFor(prompt);
  const created_at = CREATED;
  const msg = { type: 'message', id: id('msg'), status: 'completed', role: 'assistant',
    content: [{ type: 'output_text', text, annotations: [], logprobs: [] }] };
  const usage = { input_tokens: USAGE.input, input_tokens_details: { cached_tokens: 0 },
    output_tokens: USAGE.output, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: USAGE.input + USAGE.output };
  const response = { id: id('resp'), object: 'response', created_at, status: 'completed', error: null,
    incomplete_details: null, instructions: body.instructions ?? null, max_output_tokens: null, model: body.model,
    output: [msg], parallel_tool_calls: true, previous_response_id: null, reasoning: { effort: null, summary: null },
    store: true, temperature: body.temperature ?? 1, text: { format: { type: 'text' } }, tool_choice: 'auto', tools: [],
    top_p: 1, truncation: 'disabled', usage, user: null, metadata: {} };
  if (!body.stream) return json(res, response);
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let n = 0;
  const send = (type, o) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: n++, ...o })}\n\n`);
  send('response.created', { response: { ...response, status: 'in_progress', output: [], usage: null } });
  send('response.output_item.added', { output_index: 0, item: { ...msg, status: 'in_progress', content: [] } });
  send('response.content_part.added', { item_id: msg.id, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
  for (const c of chunks(text)) send('response.output_text.delta', { item_id: msg.id, output_index: 0, content_index: 0, delta: c, logprobs: [] });
  send('response.output_text.done', { item_id: msg.id, output_index: 0, content_index: 0, text, logprobs: [] });
  send('response.content_part.done', { item_id: msg.id, output_index: 0, content_index: 0, part: msg.content[0] });
  send('response.output_item.done', { output_index: 0, item: msg });
  send('response.completed', { response });
  res.end();
}

function anthropicMessages(req, res, body) {
  const prompt = textOf(body.messages) + '\n' + textOf(body.system);
  const text = answerFor(prompt);
  const mid = id('msg');
  const usage = { input_tokens: USAGE.input, output_tokens: USAGE.output, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  const message = { id: mid, type: 'message', role: 'assistant', model: body.model,
    content: [{ type: 'text', text }], stop_reason: 'end_turn', stop_sequence: null, usage };
  if (!body.stream) return json(res, message);
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const send = (type, o) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...o })}\n\n`);
  send('message_start', { message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } } });
  send('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
  for (const c of chunks(text)) send('content_block_delta', { index: 0, delta: { type: 'text_delta', text: c } });
  send('content_block_stop', { index: 0 });
  send('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: USAGE.output } });
  send('message_stop', {});
  res.end();
}

function json(res, o) {
  const b = JSON.stringify(o);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(b) });
  res.end(b);
}

// startMockLLM serves on 127.0.0.1 (port 0: any free one) and resolves to { url, close }.
export function startMockLLM(port = 0) {
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => { raw += d; });
    req.on('end', () => {
      let body = {};
      try { body = raw ? JSON.parse(raw) : {}; } catch { /* not JSON: an empty body */ }
      const path = req.url.split('?')[0];
      if (req.method === 'POST' && path.endsWith('/chat/completions')) return chatCompletion(req, res, body);
      if (req.method === 'POST' && path.endsWith('/responses')) return responses(req, res, body);
      if (req.method === 'POST' && path.endsWith('/messages')) return anthropicMessages(req, res, body);
      json(res, {});
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: p } = server.address();
      resolve({ url: `http://127.0.0.1:${p}`, close: () => new Promise((r) => server.close(r)) });
    });
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { url } = await startMockLLM(Number(process.env.MOCK_LLM_PORT || 0));
  console.log(url);
}
