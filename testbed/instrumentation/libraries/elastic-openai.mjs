// Content as log records. 0.5.1 instruments openai >=4.19.0 <5 only: the client is openai 4.x from
// the local package openai-v4 (the top-level openai is 6.x).
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OpenAIInstrumentation } from '@elastic/opentelemetry-instrumentation-openai';
import { openAICalls } from './openai-calls.mjs';

const openaiV4Dir = join(dirname(fileURLToPath(import.meta.url)), '..', 'openai-v4');

export default {
  packages: ['@elastic/opentelemetry-instrumentation-openai', ['openai', openaiV4Dir]],
  logs: true,
  instrumentations: () => [new OpenAIInstrumentation({ captureMessageContent: true })],
  run: (ctx) => openAICalls(ctx.require('openai-v4')().OpenAI, ctx, { responses: false }),
};
