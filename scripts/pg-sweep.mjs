// Drops the PostgreSQL schemas that test and acceptance processes of this
// machine made and could not drop themselves. Each such schema is named
// `<prefix><pid>_…` after the process that made it; a schema whose process
// is gone is left over (the process was killed, or ended without running
// `beforeExit`, as under `bun test` and in short-lived child processes), so
// it is dropped. A live process's schemas are never touched, nor any other
// name. Sweeping never fails the caller: with the server gone, or a schema
// still locked by a storage (lock_timeout), it is left for the next sweep.
//
// Thousands of stale schemas slow the server's catalog lookups
// (bench/lib/pg-schema.mjs measured a 1-op push at 3-15 ms instead of 2.5
// with 4,500 of them), so every run cleans what earlier runs left.

/** The schema names this project's tests, acceptance module and bench make. */
export const PREFIXES = [
  'syncular_t_',
  'syncular_up_',
  'syncular_bench_',
  'syncular_bench_intree_',
  'syncular_bench_intree_pg_',
];

/** Whether process `pid` of this machine still runs. */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it runs under another user.
    return e?.code === 'EPERM';
  }
}

/** The pid a schema named `<prefix><pid>_…` belongs to, or undefined. */
export function ownerPid(name, prefix) {
  if (!name.startsWith(prefix)) return undefined;
  const m = /^(\d+)_/.exec(name.slice(prefix.length));
  const pid = m ? Number(m[1]) : NaN;
  return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
}

/**
 * Drops every schema of `prefixes` whose process is gone, plus `also` (the
 * caller's own, which it no longer needs). Resolves to the names dropped.
 */
export async function sweepSchemas(url, also = [], prefixes = PREFIXES) {
  const dropped = [];
  let client;
  try {
    const { default: pg } = await import('pg');
    client = new pg.Client({ connectionString: url });
    client.on('error', () => {});
    await client.connect();
    await client.query("SET lock_timeout = '2s'; SET client_min_messages = warning");
    const { rows } = await client.query(
      'SELECT nspname FROM pg_catalog.pg_namespace WHERE nspname LIKE ANY($1::text[])',
      [prefixes.map((p) => `${p.replaceAll('_', '\\_')}%`)],
    );
    const stale = rows
      .map((r) => r.nspname)
      .filter((name) =>
        prefixes.some((p) => {
          const pid = ownerPid(name, p);
          return pid !== undefined && !alive(pid);
        }),
      );
    for (const schema of new Set([...also, ...stale])) {
      try {
        await client.query(`DROP SCHEMA IF EXISTS "${schema.replaceAll('"', '""')}" CASCADE`);
        dropped.push(schema);
      } catch {
        // Locked or refused: the next sweep tries again.
      }
    }
  } catch {
    // The server is gone or refused: nothing to clean.
  } finally {
    await client?.end().catch(() => {});
  }
  return dropped;
}
