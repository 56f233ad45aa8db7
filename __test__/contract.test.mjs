// Runs every contract module against every engine.
import { describe } from 'node:test';
import { engines } from './support/engines.mjs';
import { modules } from './contract/all.mjs';

export { modules };

const only = process.env.SYNCULAR_TEST_ENGINE;
for (const engine of engines) {
  if (only && engine.name !== only) continue;
  describe(engine.name, () => {
    for (const mod of modules) mod.define(engine);
  });
}
