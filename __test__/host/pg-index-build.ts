// Issue 48 acceptance, PostgreSQL: on a database the in-tree storage wrote,
// with many rows in sync_row_scopes and no sync_row_scopes_by_row, the
// first ensureSchema of this package (which builds that index
// CONCURRENTLY) runs beside an in-tree host pushing at full rate, and
// delays none of its pushes by more than a second.
//
// The in-tree host is upstream's request handler over upstream's in-tree
// PostgresServerStorage (Bun.SQL, bench/modules/intree-postgres.mjs). It
// creates its own schema; sync_row_scopes is then filled by direct SQL in
// that layout (generate_series: ROWS entries over 50 partitions, the host's
// own partition `p` among them). Then CLIENTS clients push one-row commits
// in sequence, as fast as the handler answers, for BEFORE ms, while the
// index is built, and for AFTER ms; every push's latency is recorded.
//
// MODE `ours`: this package opens the schema and runs its first
// ensureSchema (the swap-in). MODE `in-transaction`: the control, the same
// index built by a plain CREATE INDEX in a transaction, as the storage did
// before issue 48.
//
// Args: SCHEMA ROWS MODE (the server is SYNCULAR_TEST_PG_URL's). Prints one
// JSON line: the fill and build times, each phase's push latencies, whether
// the index ended valid, and the pushes acknowledged and stored. The schema
// is dropped at the end.
import pg from 'pg';
import { createHost } from '../../bench/lib/server.mjs';
import { encodeTask, serverSchema, TABLE } from '../../bench/lib/fixture.mjs';
import { core, native, report, server } from './upstream.ts';

const [schema, rowsArg, mode] = process.argv.slice(2);
const url = process.env.SYNCULAR_TEST_PG_URL;
const ROWS = Number(rowsArg);
if (!schema || !url || !Number.isInteger(ROWS) || (mode !== 'ours' && mode !== 'in-transaction')) {
  throw new Error('usage: SYNCULAR_TEST_PG_URL=... pg-index-build.ts SCHEMA ROWS ours|in-transaction');
}
const CLIENTS = Number(process.env.PUSH_CLIENTS ?? 2);
const BEFORE = Number(process.env.PUSH_BEFORE_MS ?? 2000);
const AFTER = Number(process.env.PUSH_AFTER_MS ?? 2000);
const P = 'p';
const PARTITIONS = 50;

const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
await client.connect();
const q = async (text: string) => (await client.query(text)).rows;

type Push = { start: number; end: number };

function stats(pushes: Push[]) {
  const ms = pushes.map((p) => p.end - p.start).sort((a, b) => a - b);
  const at = (f: number) => (ms.length ? +ms[Math.min(ms.length - 1, Math.floor(f * ms.length))].toFixed(1) : null);
  const span = pushes.length ? pushes[pushes.length - 1].end - pushes[0].start : 0;
  return { pushes: ms.length, perSec: span ? Math.round((ms.length / span) * 1000) : 0, p50: at(0.5), p99: at(0.99), worst: at(1) };
}

let result;
try {
  const { createStorage } = await import('../../bench/modules/intree-postgres.mjs');
  const intree = await createStorage({ server, core, schema });
  const host = await createHost(server, core, intree, P);
  const before = await q("SELECT indexname FROM pg_indexes WHERE tablename = 'sync_row_scopes' AND schemaname = current_schema() ORDER BY 1");

  // The fill, in the layout the in-tree storage just created: one scope
  // entry per row, as it writes for the `tasks` table's one scope.
  let t = performance.now();
  await q(`INSERT INTO sync_row_scopes(partition, tbl, var, value, row_id)
    SELECT CASE WHEN i % ${PARTITIONS} = 0 THEN '${P}' ELSE 'bulk' || (i % ${PARTITIONS}) END,
           '${TABLE}', 'project_id', 'p1', 'fill-' || i
    FROM generate_series(1, ${ROWS}) AS i`);
  await q('VACUUM ANALYZE sync_row_scopes');
  const fillMs = Math.round(performance.now() - t);
  const [{ mb }] = await q("SELECT pg_total_relation_size('sync_row_scopes') / 1048576 AS mb");

  // The pushers: sequential one-row commits, each a new row (so each
  // writes sync_row_scopes), until told to stop.
  const epoch = performance.now();
  const pushes: Push[][] = Array.from({ length: CLIENTS }, () => []);
  let stop = false;
  const pushers = pushes.map(async (mine, w) => {
    for (let k = 0; !stop; k++) {
      const rowId = `w${w}-${k}`;
      const bytes = host.request(`pusher-${w}`, [
        { type: 'PUSH_COMMIT', clientCommitId: `c${k}`, operations: [{ table: TABLE, rowId, op: 'upsert', payload: encodeTask(rowId, 'p1', k) }] },
      ]);
      const start = performance.now() - epoch;
      const frames = host.decode(await host.handle(bytes));
      const end = performance.now() - epoch;
      const r = frames.find((f: any) => f.type === 'PUSH_RESULT');
      if (r?.status !== 'applied') throw new Error(`push ${rowId} not applied: ${JSON.stringify(r)}`);
      mine.push({ start, end });
    }
  });
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  await sleep(BEFORE);
  const buildStart = performance.now() - epoch;
  if (mode === 'ours') {
    const ours = new native.NativeStorage({ url, schema, errors: server });
    try {
      await ours.ensureSchema(server.compileSchema(serverSchema));
    } finally {
      await ours.close();
    }
  } else {
    const c = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
    await c.connect();
    try {
      await c.query('BEGIN');
      await c.query('CREATE INDEX sync_row_scopes_by_row ON sync_row_scopes(partition, tbl, row_id)');
      await c.query('COMMIT');
    } finally {
      await c.end();
    }
  }
  const buildEnd = performance.now() - epoch;
  await sleep(AFTER);
  stop = true;
  await Promise.all(pushers);

  const all = pushes.flat().sort((a, b) => a.start - b.start);
  const phase = {
    before: all.filter((p) => p.end < buildStart),
    during: all.filter((p) => p.end >= buildStart && p.start <= buildEnd),
    after: all.filter((p) => p.start > buildEnd),
  };
  const [index] = await q("SELECT indisvalid AS valid, pg_get_indexdef(indexrelid) AS def FROM pg_index WHERE indexrelid = to_regclass('sync_row_scopes_by_row')");
  const [stored] = await q(`SELECT
      (SELECT count(*)::int FROM sync_commits WHERE partition = '${P}' AND client_id LIKE 'pusher-%') AS commits,
      (SELECT count(*)::int FROM sync_row_scopes WHERE partition = '${P}' AND row_id LIKE 'w%') AS scopes,
      (SELECT count(*)::int FROM ${TABLE} WHERE id LIKE 'w%') AS rows,
      (SELECT count(*)::int FROM sync_row_scopes) AS total`);
  await intree.close();
  result = {
    mode,
    rows: ROWS,
    clients: CLIENTS,
    indexesBefore: before.map((r: any) => r.indexname),
    fillMs,
    tableMb: Number(mb),
    buildMs: Math.round(buildEnd - buildStart),
    phases: Object.fromEntries(Object.entries(phase).map(([k, v]) => [k, stats(v)])),
    slowest: all
      .map((p) => ({ at: Math.round(p.start - buildStart), ms: Math.round(p.end - p.start) }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 5),
    index: index ?? null,
    acknowledged: all.length,
    stored,
  };
} finally {
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
}
report(result);
