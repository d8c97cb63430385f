import { OpenAIInstrumentation } from '@arizeai/openinference-instrumentation-openai';
import { openAICalls } from './openai-calls.mjs';

export default {
  packages: ['@arizeai/openinference-instrumentation-openai', 'openai'],
  instrumentations: () => [new OpenAIInstrumentation()],
  run: (ctx) => openAICalls(ctx.require('openai').OpenAI, ctx),
};
