import { OpenAIInstrumentation } from '@traceloop/instrumentation-openai';
import { openAICalls } from './openai-calls.mjs';

export default {
  packages: ['@traceloop/instrumentation-openai', 'openai'],
  instrumentations: () => [new OpenAIInstrumentation({ traceContent: true })],
  run: (ctx) => openAICalls(ctx.require('openai').OpenAI, ctx),
};
