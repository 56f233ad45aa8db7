/**
 * STORAGE_MODULE for the upstream acceptance harness (`run-upstream.sh` of
 * the acceptance kit, which is not part of this repository): runs the public
 * @syncular/server tests against this package's NativeStorage.
 *
 *   bash "$SYNCULAR_ACCEPTANCE_DIR/run-upstream.sh" --suite all MIRROR examples/upstream-module.mjs
 *
 * The harness calls `createStorage(context)` once per storage it needs and
 * expects a fresh, isolated ServerStorage back, synchronously (the
 * helper-swap preload constructs storages inside synchronous code).
 * `context.server` is the @syncular/server namespace the tests import, merged
 * with its internal storage-errors module, so it carries the host's
 * SyncError, StorageQueryError and StorageConstraintError: handing those to
 * NativeStorage makes its errors pass the tests' `instanceof` checks.
 */
import { createRequire } from 'node:module';
import { sweepSchemas } from '../scripts/pg-sweep.mjs';

const require = createRequire(import.meta.url);
const { NativeStorage } = require('../index.js');

/** A private in-memory SQLite database per call. */
function createSqliteStorage(context) {
  return new NativeStorage({ url: 'sqlite::memory:', errors: context?.server });
}

let pgSchemas = 0;
let swept = false;

/**
 * A fresh PostgreSQL schema per call on the server at `url`: each storage
 * is isolated from the others on one database.
 */
function createPostgresStorage(url, context) {
  pgSchemas += 1;
  // Under `bun test` no exit hook runs, so this process's schemas stay on
  // the server; the first storage of the next run drops what earlier
  // processes left (scripts/pg-sweep.mjs), in the background.
  if (!swept) {
    swept = true;
    sweepSchemas(url).catch(() => {});
  }
  const schema = `syncular_up_${process.pid}_${Date.now().toString(36)}_${pgSchemas}`;
  return new NativeStorage({ url, schema, maxConnections: 4, errors: context?.server });
}

/**
 * Picks the backend: PostgreSQL when SYNCULAR_TEST_PG_URL is set, else
 * SQLite in memory.
 */
export function createStorage(context) {
  const url = process.env.SYNCULAR_TEST_PG_URL;
  return url ? createPostgresStorage(url, context) : createSqliteStorage(context);
}

export default createStorage;
