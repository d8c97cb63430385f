import { svcSDKCalls } from './svc-sdk.mjs';

// The svc JS SDK's span shape, major 3 (scope svc-sdk 3.38.0), written by hand as testbed/workload does.
export default {
  packages: [],
  scopeVersion: '3.38.0',
  run: (ctx) => svcSDKCalls(ctx, '3.38.0'),
};
