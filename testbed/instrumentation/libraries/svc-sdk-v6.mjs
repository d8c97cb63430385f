import { svcSDKCalls } from './svc-sdk.mjs';

// The svc JS SDK's span shape, major 6 (scope svc-sdk 6.0.0), written by hand as testbed/workload does.
export default {
  packages: [],
  scopeVersion: '6.0.0',
  run: (ctx) => svcSDKCalls(ctx, '6.0.0'),
};
