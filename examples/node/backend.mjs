#!/usr/bin/env node
// The backend for the JavaScript driver: the reusable @runlane/conformance-backend package
// serves driver.mjs over the Runlane driver backend protocol (docs/driver-protocol.md):
//
//   runlane-certify run --driver process --option command="node examples/node/backend.mjs"
//
// The package does the protocol (concurrent requests, the attempt round trip, error kinds, the
// injected clock); all this file says is how to make a store and a driver instance on it.

import { serve } from '../../js/conformance-backend/src/index.mjs';
import { MemoryDriver, MemoryStore, memoryProfile } from './driver.mjs';

await serve({
  name: 'runlane-node-backend',
  version: '0.2.0',
  driver: 'memory',
  profile: memoryProfile(),
  open: () => new MemoryStore(), // process-local: no address, so cross-process checks skip
  connect: (store, { clock }) => new MemoryDriver(store, clock ? { clock } : {}),
});
