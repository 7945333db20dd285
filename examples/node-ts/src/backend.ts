#!/usr/bin/env node
// Serves the TypeScript driver to runlane-certify over the driver backend protocol. Build with
// `npm ci && npm run build`, then, from the repository root:
//
//   runlane-certify run --driver process --option command="node examples/node-ts/dist/backend.js"

import { serve } from '@runlane/conformance-backend';
import { PROFILE, VersionedMap, VersionedMapDriver } from './driver.js';

await serve<VersionedMap>({
  name: 'runlane-node-ts-backend',
  version: '0.1.0',
  driver: 'versioned-map',
  profile: PROFILE,
  open: () => new VersionedMap(),
  connect: (map, options) => new VersionedMapDriver(map, options),
});
