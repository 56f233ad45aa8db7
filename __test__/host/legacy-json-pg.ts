// Data the in-tree PostgresServerStorage of the given tree writes, through
// two real drivers, read back by it and by this package.
//
// For each driver (Bun.SQL, whose string binds land in JSONB as jsonb
// strings, and node-postgres; the bench's in-tree modules) a fresh schema is
// filled through upstream's own request handler (pushes, a delete, a pull
// that writes a client record) and the storage's reaction calls. The in-tree
// storage then reads everything back (its reads are the expected values) and
// serves a bootstrap and an incremental pull; after that this package opens
// the same schema at the same schema version and does the same.
//
// Args: schema name prefix (the server is SYNCULAR_TEST_PG_URL's).
// Prints { drivers: { bun: Side, pg: Side } }, Side = { written, after,
// intree, ours }: the stored forms (jsonb_typeof per column) as written and
// after ours opened the schema and read it, and each storage's reads. The
// schemas are dropped at the end.
import pg from 'pg';
import { createHost, fill } from '../../bench/lib/server.mjs';
import { TABLE } from '../../bench/lib/fixture.mjs';
import { core, report, server } from './upstream.ts';

const [prefix] = process.argv.slice(2);
const url = process.env.SYNCULAR_TEST_PG_URL;
if (!prefix || !url) throw new Error('usage: SYNCULAR_TEST_PG_URL=... legacy-json-pg.ts SCHEMA_PREFIX');
const P = 'p';
const FILTER = { project_id: ['p1'] };
const MODULES = { bun: 'intree-postgres', pg: 'intree-postgres-pg' } as const;

async function storageOf(module: string, schema: string) {
  const m = await import(`../../bench/modules/${module}.mjs`);
  return m.createStorage({ server, core, schema });
}

/** Runs `fn` on a node-postgres client confined to `schema`. */
async function withClient<T>(schema: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** JSON-comparable: bytes → base64, a bigint marked as one, undefined-valued keys dropped. */
function norm(value: unknown): unknown {
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (typeof value === 'bigint') return { bigint: String(value) };
  if (Array.isArray(value)) return value.map(norm);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = norm(v);
    return out;
  }
  return value;
}

/** The value, or `{ error: code | message }` when the read throws. */
async function attempt(read: () => Promise<unknown>): Promise<unknown> {
  try {
    return norm(await read());
  } catch (e: any) {
    return { error: e?.code ?? String(e?.message ?? e) };
  }
}

const REACTIONS = [
  { key: 'r-object', payload: { kind: 'mail', to: ['a', 'b'], n: 1 } },
  { key: 'r-array', payload: [1, 'two', { three: 3 }] },
  { key: 'r-number', payload: 42 },
  { key: 'r-bool', payload: true },
];
// A string payload: Bun.SQL stores its JSON text, which every reader
// parses back. node-postgres stores the bare string, which the in-tree
// reader cannot parse, so it is written through Bun.SQL only.
const BUN_ONLY_REACTIONS = [
  { key: 'r-string', payload: 'plain text' },
  { key: 'r-json-string', payload: '{"looks":"like json"}' },
];

async function write(storage: any, withStrings: boolean) {
  const host = await createHost(server, core, storage, P);
  await fill(host, 'c', 3, 2);
  // A delete, with the scopes the push layer records for it.
  host.decode(
    await host.handle(host.request('deleter', [{ type: 'PUSH_COMMIT', clientCommitId: 'del-1', operations: [{ table: TABLE, rowId: 'c0-0', op: 'delete' }] }])),
  );
  // A pull writes the client record (its subscriptions).
  host.decode(await host.handle(host.request('puller', pullFrames(-1))));
  const tx = await storage.begin(P);
  const now = 1_700_000_000_000;
  await tx.enqueueReactions(
    [...REACTIONS, ...(withStrings ? BUN_ONLY_REACTIONS : [])].map((r, i) => ({
      idempotencyKey: r.key,
      type: 'notify',
      version: 1,
      payload: r.payload,
      sourceClientId: 'c',
      sourceClientCommitId: 'c0',
      sourceCommitSeq: 1,
      createdAtMs: now + i,
      maxAttempts: 3,
    })),
  );
  await tx.commit();
  const [claimed] = await storage.claimReactions(P, { leaseOwner: 'w', types: ['notify'], nowMs: now + 100, leaseDurationMs: 1000, limit: 1 });
  await storage.failReaction(P, claimed.idempotencyKey, {
    leaseOwner: 'w',
    retryAtMs: now + 5000,
    failure: { code: 'app.unavailable', atMs: now + 100, details: { attempt: 1, why: ['x'] } },
  });
}

function pullFrames(cursor: number) {
  return [
    { type: 'PULL_HEADER', limitCommits: 100, limitSnapshotRows: 1000, maxSnapshotPages: 4, accept: 0b0011 },
    { type: 'SUBSCRIPTION', id: 'tasks', table: TABLE, scopes: FILTER, cursor },
  ];
}

/** What a pull through the handler delivers: commits, and snapshot rows decoded. */
async function handlerPull(host: any, clientId: string, cursor: number) {
  const frames = host.decode(await host.handle(host.request(clientId, pullFrames(cursor))));
  const commits = frames.filter((f: any) => f.type === 'COMMIT');
  const rows = frames
    .filter((f: any) => f.type === 'SEGMENT_INLINE')
    .flatMap((f: any) => core.decodeRowsSegment(f.payload).blocks);
  return norm({ commits, rows });
}

/** Everything the storage reads back from the written data. */
async function readAll(storage: any, tx: any) {
  const max = Number(await storage.getMaxCommitSeq(P));
  const rowIds = ['c0-0', 'c0-1', 'c1-0', 'c1-1', 'c2-0', 'c2-1'];
  const commitIds = ['c0', 'c1', 'c2'];
  const keys = [...REACTIONS, ...BUN_ONLY_REACTIONS].map((r) => r.key);
  return {
    window: await attempt(() => storage.readCommitWindow(P, { table: TABLE, scopeFilter: FILTER, afterSeq: 0, throughSeq: max, limitChanges: 1000 })),
    scan: await attempt(() => storage.scanRows(P, { table: TABLE, scopeFilter: FILTER, limit: 1000 })),
    txScan: await attempt(() => tx.scanRows({ table: TABLE, scopeFilter: FILTER, limit: 1000 })),
    getRow: await Promise.all(rowIds.map((id) => attempt(() => storage.getRow(P, TABLE, id)))),
    txGetRow: await Promise.all(rowIds.map((id) => attempt(() => tx.getRow(TABLE, id)))),
    rowScopes: await Promise.all(rowIds.map((id) => attempt(() => storage.getRowScopes(P, TABLE, id)))),
    pushResults: await Promise.all(commitIds.map((id) => attempt(() => storage.getPushResult(P, 'bench-filler', id)))),
    client: await attempt(() => storage.getClientRecord(P, 'puller')),
    clients: await attempt(async () => (await storage.listClientRecords(P)).filter((c: any) => c.clientId === 'puller')),
    reactions: await Promise.all(keys.map((k) => attempt(() => storage.getReaction(P, k)))),
    reactionList: await attempt(() => storage.listReactions(P, { limit: 100 })),
  };
}

/** The JSONB forms (jsonb_typeof) each JSON column holds. */
async function forms(schema: string) {
  const { rows } = await withClient(schema, (c) =>
    c.query(`SELECT 'sync_changes.scopes' AS col, jsonb_typeof(scopes) AS form FROM sync_changes
      UNION ALL SELECT 'tasks._sync_scopes', jsonb_typeof("_sync_scopes") FROM ${TABLE}
      UNION ALL SELECT 'sync_push_results.result', jsonb_typeof(result) FROM sync_push_results
      UNION ALL SELECT 'sync_clients.subscriptions', jsonb_typeof(subscriptions) FROM sync_clients
      UNION ALL SELECT 'sync_reactions.payload', jsonb_typeof(payload) FROM sync_reactions
      UNION ALL SELECT 'sync_reactions.last_failure', jsonb_typeof(last_failure) FROM sync_reactions
        WHERE last_failure IS NOT NULL`),
  );
  const out: Record<string, string[]> = {};
  for (const r of rows) if (!(out[r.col] ??= []).includes(r.form)) out[r.col].push(r.form);
  return out;
}

async function side(name: keyof typeof MODULES) {
  const schema = `${prefix}_${name}`;
  const intreeStorage = await storageOf(MODULES[name], schema);
  let intree;
  let written;
  try {
    await write(intreeStorage, name === 'bun');
    written = await forms(schema);
    const tx = await intreeStorage.begin(P);
    const reads = await readAll(intreeStorage, tx);
    await tx.rollback();
    const host = await createHost(server, core, intreeStorage, P);
    const pulls = {
      bootstrap: await attempt(() => handlerPull(host, 'fresh', -1)),
      incremental: await attempt(() => handlerPull(host, 'behind', 0)),
    };
    intree = { ...reads, pulls };
  } finally {
    await intreeStorage.close();
  }

  const ours = await storageOf('native-postgres', schema);
  try {
    const host = await createHost(server, core, ours, P);
    const tx = await ours.begin(P);
    const reads = await readAll(ours, tx);
    await tx.rollback();
    const after = await forms(schema);
    const pulls = {
      bootstrap: await attempt(() => handlerPull(host, 'fresh', -1)),
      incremental: await attempt(() => handlerPull(host, 'behind', 0)),
    };
    return { written, after, intree, ours: { ...reads, pulls } };
  } finally {
    await ours.close();
  }
}

const drivers: Record<string, unknown> = {};
try {
  for (const name of Object.keys(MODULES) as (keyof typeof MODULES)[]) drivers[name] = await side(name);
} finally {
  await withClient('public', async (c) => {
    for (const name of Object.keys(MODULES)) await c.query(`DROP SCHEMA IF EXISTS "${prefix}_${name}" CASCADE`);
  });
}
report({ drivers });
