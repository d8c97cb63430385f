// The svc SDK's spans (scope `svc-sdk`), written by hand as the SDK writes them: an agent span and
// a generation below it, input and output as JSON in svc.observation.input/output. Majors before 6
// write metadata values as plain strings; 6 and later as JSON text (testbed/workload has the same).
import { trace, SpanKind } from '@opentelemetry/api';

export async function svcSDKCalls({ mockURL, call, SYSTEM }, version) {
  const tracer = trace.getTracer('svc-sdk', version);
  const newMajor = Number(version.split('.')[0]) >= 6;
  await call('generation', 'gpt-4o-mini', (p) => tracer.startActiveSpan('refund-desk', { kind: SpanKind.INTERNAL, attributes: {
    'svc.observation.type': 'agent', 'svc.observation.input': JSON.stringify(p), 'svc.trace.name': 'refund-desk',
    'svc.user.id': 'user-42', 'svc.session.id': 'session-7',
    'svc.observation.metadata.desk': newMajor ? JSON.stringify('refunds') : 'refunds',
  } }, async (agent) => {
    const messages = [{ role: 'system', content: SYSTEM }, { role: 'user', content: p }];
    const res = await fetch(`${mockURL}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages }) }).then((r) => r.json());
    const text = res.choices[0].message.content;
    const gen = tracer.startSpan('chat gpt-4o-mini', { attributes: {
      'svc.observation.type': 'generation', 'svc.observation.model.name': 'gpt-4o-mini',
      'svc.observation.model.parameters': JSON.stringify({ temperature: 0.2 }),
      'svc.observation.input': JSON.stringify(messages),
      'svc.observation.output': JSON.stringify({ role: 'assistant', content: text }),
      'svc.observation.usage_details': JSON.stringify({ input: res.usage.prompt_tokens, output: res.usage.completion_tokens }),
    } });
    gen.end();
    agent.setAttribute('svc.observation.output', JSON.stringify(text));
    agent.end();
  }));
}
