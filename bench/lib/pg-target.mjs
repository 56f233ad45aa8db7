// Where a PostgreSQL bench module puts one storage: a fresh schema on the
// server at SYNCULAR_TEST_PG_URL, dropped when the bench closes the storage
// (pg-schema.mjs); or, with SYNCULAR_BENCH_POOLER=transaction|session,
// a fresh database reached through a PgBouncer this process starts in front
// of that server (scripts/pgbouncer.mjs) in that mode, dropped likewise.
//
// A database rather than a schema behind the pooler: an in-tree storage
// names its tables unqualified and takes its schema from `search_path`, a
// session setting no transaction pooler keeps, and PgBouncer refuses the
// startup parameter that would set it. A database of its own gives every
// storage `public`, as an operator's pooled deployment has it. Needs a role
// that may create databases (the bench's default url is the superuser's).
import pg from 'pg';
import { startPgBouncer } from '../../scripts/pgbouncer.mjs';
import { dropSchema } from './pg-schema.mjs';

export const url = process.env.SYNCULAR_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:55432/postgres';
export const pooler = process.env.SYNCULAR_BENCH_POOLER;
if (pooler !== undefined && pooler !== 'transaction' && pooler !== 'session') {
  throw new Error(`SYNCULAR_BENCH_POOLER must be transaction or session, not ${pooler}`);
}

let bouncer;
let made = 0;

async function admin(text) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(text);
  } finally {
    await c.end();
  }
}

/**
 * `{ url, schema, pooling, drop }` for one storage named after `prefix`:
 * `schema` undefined behind the pooler (the database's `public`), and
 * `pooling` the pooler's mode there.
 */
export async function target(prefix, given) {
  made += 1;
  const name = given ?? `${prefix}${process.pid}_${Date.now().toString(36)}_${made}`;
  if (pooler === undefined) {
    return { url, schema: name, pooling: undefined, drop: given ? async () => {} : () => dropSchema(url, name) };
  }
  bouncer ??= await startPgBouncer({ pgUrl: url, anyDatabase: pooler });
  await admin(`CREATE DATABASE "${name}"`);
  return {
    url: bouncer.url(pooler, name),
    schema: undefined,
    pooling: pooler,
    drop: () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`),
  };
}
