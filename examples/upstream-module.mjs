/**
 * STORAGE_MODULE for the upstream acceptance harness
 * (/work/shared/acceptance/run-upstream.sh): runs the public @syncular/server
 * tests against this package's NativeStorage.
 *
 *   run-upstream.sh --suite all MIRROR examples/upstream-module.mjs
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

const require = createRequire(import.meta.url);
const { NativeStorage } = require('../index.js');

/** A private in-memory SQLite database per call (no url => `:memory:`). */
function createSqliteStorage(context) {
  return new NativeStorage({ errors: context?.server });
}

/**
 * Picks the backend. Only SQLite exists today; a PostgreSQL backend will be
 * selected here from SYNCULAR_TEST_PG_URL, creating one fresh schema per call
 * so that storages stay isolated from each other.
 */
export function createStorage(context) {
  return createSqliteStorage(context);
}

export default createStorage;
