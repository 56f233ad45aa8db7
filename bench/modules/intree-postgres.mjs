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
import { target } from '../lib/pg-target.mjs';
export const label = 'in-tree (postgres)';

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
  const t = await target('syncular_bench_intree_', context.schema);
  // The same pool size as the native module's maxConnections.
  // Behind a pooler: the database's own `public`, and no named
  // statements (prepare: false, as Supabase and Neon advise for Bun.SQL).
  const sql = t.schema === undefined
    ? new Bun.SQL(t.url, { max: 16, prepare: false })
    : new Bun.SQL(t.url, { max: 16, connection: { search_path: t.schema } });
  if (t.schema !== undefined) await sql.unsafe(`CREATE SCHEMA IF NOT EXISTS "${t.schema}"`, []);
  const exec = executor(sql);
  const storage = new Storage(exec);
  // The storage has no close(); the bench closes each storage it made.
  storage.close = async () => {
    await exec.close();
    await t.drop();
  };
  return storage;
}
