// Upstream's in-tree PostgresServerStorage over node-postgres (the `pg`
// package, a devDependency of this repository), one fresh schema per
// storage on the server at SYNCULAR_TEST_PG_URL (default: the local server
// of .ci/run and docs/testing.md). Needs `--server` naming a @syncular/server
// entry exporting PostgresServerStorage; under bun it still uses `pg`.
//
// The PgExecutor adapter below is this package's own: `query(text, params)`
// runs one parameterized statement on the pool, `transaction(fn)` checks
// one client out of the pool and runs `fn` between BEGIN and
// COMMIT/ROLLBACK on it. Every pooled connection starts with `search_path`
// set to the storage's schema (the `options` startup parameter), so the
// storage's own DDL lands in that schema. int8 columns arrive as strings
// (pg's default); the storage coerces sequence values itself.
import { target } from '../lib/pg-target.mjs';
import { createRequire } from 'node:module';

const pg = createRequire(import.meta.url)('pg');

export const label = 'in-tree (postgres, node-postgres)';

function queryable(handle) {
  return {
    async query(text, params) {
      const r = await handle.query(text, params ? [...params] : []);
      return { rows: r.rows, rowCount: r.rowCount ?? r.rows.length };
    },
  };
}

function executor(pool) {
  return {
    ...queryable(pool),
    async transaction(fn) {
      const client = await pool.connect();
      let broken;
      try {
        await client.query('BEGIN');
        try {
          const out = await fn(queryable(client));
          await client.query('COMMIT');
          return out;
        } catch (err) {
          try {
            await client.query('ROLLBACK');
          } catch (rollbackErr) {
            // A connection that cannot roll back is not returned to the pool.
            broken = rollbackErr;
          }
          throw err;
        }
      } finally {
        client.release(broken);
      }
    },
    close: () => pool.end(),
  };
}

export async function createStorage(context) {
  const Storage = context.server?.PostgresServerStorage;
  if (typeof Storage !== 'function') {
    throw new Error('intree-postgres-pg: pass --server naming a @syncular/server entry exporting PostgresServerStorage');
  }
  const t = await target('syncular_bench_intree_pg_', context.schema);
  // The same pool size as the native module's maxConnections.
  // Behind a pooler: the database's own `public` (node-postgres prepares
  // nothing by name unless a query names itself).
  const pool = t.schema === undefined
    ? new pg.Pool({ connectionString: t.url, max: 16 })
    : new pg.Pool({ connectionString: t.url, max: 16, options: `-c search_path=${t.schema}` });
  if (t.schema !== undefined) await pool.query(`CREATE SCHEMA IF NOT EXISTS "${t.schema}"`);
  const exec = executor(pool);
  const storage = new Storage(exec);
  // The storage has no close(); the bench closes each storage it made.
  storage.close = async () => {
    await exec.close();
    await t.drop();
  };
  return storage;
}
