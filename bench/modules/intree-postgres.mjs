// Upstream's in-tree PostgresServerStorage on Bun's built-in PostgreSQL
// driver (Bun.SQL), one fresh schema per storage on the server at
// SYNCULAR_TEST_PG_URL (default: the local server of .ci/run and
// docs/testing.md). Bun only; needs `--server` naming a @syncular/server entry, e.g. an
// extracted upstream tree's packages/server/src/index-bun.ts.
//
// The PgExecutor adapter below is this package's own: `query(text, params)`
// runs one parameterized statement (Bun's `unsafe`), `transaction(fn)` pins
// one connection between BEGIN and COMMIT/ROLLBACK (Bun's `begin`). Every
// pooled connection starts with `search_path` set to the storage's schema
// (a startup parameter), so the storage's own DDL (`migrate`, which
// `ensureSchema` runs) lands in that schema.
import { dropSchema } from '../lib/pg-schema.mjs';
export const label = 'in-tree (postgres)';

const url = process.env.SYNCULAR_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:55432/postgres';
let schemas = 0;

function queryable(handle) {
  return {
    async query(text, params) {
      const rows = await handle.unsafe(text, params ? [...params] : []);
      return { rows, rowCount: rows.count ?? rows.length };
    },
  };
}

function executor(sql) {
  return {
    ...queryable(sql),
    transaction: (fn) => sql.begin((tx) => fn(queryable(tx))),
    close: () => sql.end(),
  };
}

export async function createStorage(context) {
  const Storage = context.server?.PostgresServerStorage;
  if (typeof Storage !== 'function' || typeof Bun === 'undefined') {
    throw new Error('intree-postgres: run under bun with --server naming a @syncular/server entry exporting PostgresServerStorage');
  }
  schemas += 1;
  const schema = context.schema ?? `syncular_bench_intree_${process.pid}_${Date.now().toString(36)}_${schemas}`;
  // The same pool size as the native module's maxConnections.
  const sql = new Bun.SQL(url, { max: 16, connection: { search_path: schema } });
  await sql.unsafe(`CREATE SCHEMA IF NOT EXISTS "${schema}"`, []);
  const exec = executor(sql);
  const storage = new Storage(exec);
  // The storage has no close(); the bench closes each storage it made.
  storage.close = async () => {
    await exec.close();
    if (context.schema === undefined) await dropSchema(url, schema);
  };
  return storage;
}
