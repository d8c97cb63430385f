// A LangChain chain (prompt template | ChatOpenAI | string parser) under OpenInference's LangChain
// instrumentation, which patches @langchain/core's callback manager.
import { LangChainInstrumentation } from '@arizeai/openinference-instrumentation-langchain';

export default {
  packages: ['@arizeai/openinference-instrumentation-langchain', '@langchain/core', '@langchain/openai'],
  // LangChain runs callbacks in a background queue by default; the queue keeps the OpenTelemetry
  // context of the request that started it, so OpenInference puts the spans of every later call
  // into the first request's trace. Callbacks in the foreground keep each call in its own trace.
  env: () => ({ LANGCHAIN_CALLBACKS_BACKGROUND: 'false' }),
  instrumentations: () => [new LangChainInstrumentation()],
  async run({ require, mockURL, call, SYSTEM, instrumentations }) {
    // The documented way for LangChain.js: instrument the callback manager module itself.
    instrumentations[0].manuallyInstrument(require('@langchain/core/callbacks/manager'));
    const { ChatOpenAI } = require('@langchain/openai');
    const { ChatPromptTemplate } = require('@langchain/core/prompts');
    const { StringOutputParser } = require('@langchain/core/output_parsers');
    const model = new ChatOpenAI({ model: 'gpt-4o-mini', temperature: 0.2, apiKey: 'mock-key', configuration: { baseURL: `${mockURL}/v1` } });
    const chain = ChatPromptTemplate.fromMessages([['system', SYSTEM], ['human', '{question}']]).pipe(model).pipe(new StringOutputParser());
    await call('chain', 'gpt-4o-mini', (p) => chain.invoke({ question: p }));
    await call('chain-stream', 'gpt-4o-mini', async (p) => {
      for await (const _ of await chain.stream({ question: p })) { /* consume */ }
    });
  },
};
