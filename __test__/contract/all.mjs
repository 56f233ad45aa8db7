// Every contract module, in the order they run: contract.test.mjs runs them
// against every engine, pooler.test.mjs against PostgreSQL through PgBouncer.
import * as schema from './schema.mjs';
import * as registry from './registry.mjs';
import * as transaction from './transaction.mjs';
import * as pull from './pull.mjs';
import * as prune from './prune.mjs';
import * as clients from './clients.mjs';
import * as concurrency from './concurrency.mjs';
import * as pitfalls from './pitfalls.mjs';
import * as badInput from './bad-input.mjs';
import * as errors from './errors.mjs';
import * as durability from './durability.mjs';
import * as checkpoints from './checkpoints.mjs';
import * as reactions from './reactions.mjs';
import * as admin from './admin.mjs';
import * as query from './query.mjs';
import * as indexScan from './index-scan.mjs';
import * as isolation from './isolation.mjs';
import * as isolationBounds from './isolation-bounds.mjs';
import * as queryBounds from './query-bounds.mjs';
import * as migrationFence from './migration-fence.mjs';
import * as rollbackFailure from './rollback-failure.mjs';
import * as scopeReplacement from './scope-replacement.mjs';
import * as pullConcurrency from './pull-concurrency.mjs';
import * as shutdown from './shutdown.mjs';
import * as hygiene from './hygiene.mjs';

export const modules = [schema, registry, transaction, pull, prune, clients, concurrency, pitfalls, badInput, errors, durability, checkpoints, reactions, admin, query, indexScan, isolation, isolationBounds, queryBounds, migrationFence, rollbackFailure, scopeReplacement, pullConcurrency, shutdown, hygiene];
