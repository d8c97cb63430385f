// Content as log records (gen_ai.* events), exported beside the spans.
import { OpenAIInstrumentation } from '@opentelemetry/instrumentation-openai';
import { openAICalls } from './openai-calls.mjs';

export default {
  packages: ['@opentelemetry/instrumentation-openai', 'openai'],
  logs: true,
  instrumentations: () => [new OpenAIInstrumentation({ captureMessageContent: true })],
  run: (ctx) => openAICalls(ctx.require('openai').OpenAI, ctx),
};
