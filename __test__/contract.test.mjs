// Runs every contract module against every engine.
import { describe } from 'node:test';
import { engines } from './support/engines.mjs';
import * as schema from './contract/schema.mjs';
import * as registry from './contract/registry.mjs';
import * as transaction from './contract/transaction.mjs';
import * as pull from './contract/pull.mjs';
import * as prune from './contract/prune.mjs';
import * as clients from './contract/clients.mjs';
import * as concurrency from './contract/concurrency.mjs';
import * as pitfalls from './contract/pitfalls.mjs';
import * as badInput from './contract/bad-input.mjs';
import * as errors from './contract/errors.mjs';
import * as durability from './contract/durability.mjs';
import * as checkpoints from './contract/checkpoints.mjs';
import * as reactions from './contract/reactions.mjs';
import * as admin from './contract/admin.mjs';
import * as query from './contract/query.mjs';
import * as indexScan from './contract/index-scan.mjs';
import * as isolation from './contract/isolation.mjs';
import * as isolationBounds from './contract/isolation-bounds.mjs';
import * as queryBounds from './contract/query-bounds.mjs';
import * as migrationFence from './contract/migration-fence.mjs';
import * as rollbackFailure from './contract/rollback-failure.mjs';
import * as scopeReplacement from './contract/scope-replacement.mjs';
import * as pullConcurrency from './contract/pull-concurrency.mjs';
import * as shutdown from './contract/shutdown.mjs';
import * as hygiene from './contract/hygiene.mjs';

export const modules = [schema, registry, transaction, pull, prune, clients, concurrency, pitfalls, badInput, errors, durability, checkpoints, reactions, admin, query, indexScan, isolation, isolationBounds, queryBounds, migrationFence, rollbackFailure, scopeReplacement, pullConcurrency, shutdown, hygiene];

const only = process.env.SYNCULAR_TEST_ENGINE;
for (const engine of engines) {
  if (only && engine.name !== only) continue;
  describe(engine.name, () => {
    for (const mod of modules) mod.define(engine);
  });
}
