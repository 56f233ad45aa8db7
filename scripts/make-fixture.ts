// Generates __test__/fixtures/intree-<version>.db and its .expected.json by
// driving the upstream in-tree SQLite storage (Bun build) of an extracted
// @syncular/server release tree. Nothing from upstream is copied: its
// exported classes are imported at run time from the tree given by path.
//
//   bun scripts/make-fixture.ts <upstream-tree> <output.db>
//   bun scripts/make-fixture.ts <upstream-tree> <existing.db> --read-only <reads.json>
//
// The expected JSON is written next to the database (<output>.expected.json,
// with the `.db` suffix dropped). Everything is deterministic: fixed clocks,
// epochs and ids, so re-running produces the same reads.
//
// --read-only opens an existing database (e.g. one written by NativeStorage
// with the same data) through the in-tree storage, writes nothing but the
// same reads to <reads.json>, for a reverse-direction comparison.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const [treeArg, outArg, flag, readsArg] = process.argv.slice(2);
const readOnly = flag === '--read-only';
if (!treeArg || !outArg || (flag !== undefined && (!readOnly || !readsArg))) {
  console.error('usage: bun scripts/make-fixture.ts <upstream-tree> <output.db> [--read-only <reads.json>]');
  process.exit(2);
}
const tree = resolve(treeArg);
const out = resolve(outArg);
const expectedPath = readOnly ? resolve(readsArg) : out.replace(/\.db$/, '') + '.expected.json';

const server = await import(join(tree, 'packages/server/src/index-bun.ts'));
const core = await import(join(tree, 'packages/core/src/index.ts'));
const { compileSchema, SqliteServerStorage, BunSqliteDatabase } = server;
const { encodeRow } = core;
const upstreamVersion: string =
  process.env.UPSTREAM_VERSION ?? JSON.parse(readFileSync(join(tree, 'package.json'), 'utf8')).version ?? 'unknown';

// ---------------------------------------------------------------------------
// Schema (ServerSchema form; recorded verbatim in the expected JSON so the
// test can build the identical CompiledSchema without upstream).

const SCHEMA_VERSION = 3;
const TASK_COLUMNS = [
  { name: 'id', type: 'string', nullable: false },
  { name: 'project_id', type: 'string', nullable: false },
  { name: 'owner_id', type: 'string', nullable: false },
  { name: 'title', type: 'string', nullable: false },
  { name: 'done', type: 'boolean', nullable: false },
  { name: 'count', type: 'integer', nullable: true },
  { name: 'score', type: 'float', nullable: true },
  { name: 'meta', type: 'json', nullable: true },
  { name: 'data', type: 'bytes', nullable: true },
];
const NOTE_COLUMNS = [
  { name: 'id', type: 'string', nullable: false },
  { name: 'project_id', type: 'string', nullable: false },
  { name: 'body', type: 'string', nullable: true },
];
const serverSchema = {
  version: SCHEMA_VERSION,
  tables: [
    {
      name: 'tasks',
      columns: TASK_COLUMNS,
      primaryKey: 'id',
      scopes: ['project:{project_id}', 'user:{owner_id}'],
      indexes: [{ name: 'tasks_by_title', columns: ['title'] }],
      materialize: true,
    },
    {
      name: 'notes',
      columns: NOTE_COLUMNS,
      primaryKey: 'id',
      scopes: ['project:{project_id}'],
      materialize: false,
    },
  ],
};
const compiled = compileSchema(serverSchema);

type Task = {
  id: string; project_id: string; owner_id: string; title: string; done: boolean;
  count: number | null; score: number | null; meta: string | null; data: Uint8Array | null;
};
const taskPayload = (t: Task) => encodeRow(TASK_COLUMNS, TASK_COLUMNS.map((c) => (t as any)[c.name]));
const notePayload = (id: string, project: string, body: string | null) => encodeRow(NOTE_COLUMNS, [id, project, body]);

const taskRow = (t: Task, serverVersion: number) => ({
  rowId: t.id,
  serverVersion,
  scopes: { project_id: t.project_id, owner_id: t.owner_id },
  payload: taskPayload(t),
});
const noteRow = (id: string, project: string, body: string | null, serverVersion: number) => ({
  rowId: id,
  serverVersion,
  scopes: { project_id: project },
  payload: notePayload(id, project, body),
});

const t1v1: Task = {
  id: 't1', project_id: 'p1', owner_id: 'u1', title: 'first task', done: true,
  count: 42, score: 3.25, meta: '{"tags":["a","b"],"n":1}', data: new Uint8Array([0, 1, 2, 254, 255]),
};
const t1v2: Task = { ...t1v1, title: 'first task (edited)', done: false, count: -7 };
const t2: Task = {
  id: 't2', project_id: 'p1', owner_id: 'u2', title: 'all nulls', done: false,
  count: null, score: null, meta: null, data: null,
};
const t3: Task = {
  id: 't3', project_id: 'p2', owner_id: 'u1', title: 'bytes only', done: true,
  count: null, score: null, meta: null, data: new Uint8Array([0, 0, 0x7f, 0x80, 0xff]),
};
const t4: Task = {
  id: 't4', project_id: 'p2', owner_id: 'u2', title: 'unicode ✓ ünï', done: false,
  count: 9007199254740991, score: -0.5, meta: '{"nested":{"deep":[1,null,true]},"s":"x"}', data: new Uint8Array([]),
};
const tb1: Task = {
  id: 't1', project_id: 'p1', owner_id: 'u9', title: 'other partition', done: false,
  count: 1, score: null, meta: '[]', data: null,
};

const P = 'default';
const PB = 'tenant-b';
const BASE_MS = 1_700_000_000_000;

// ---------------------------------------------------------------------------
// Write

if (!readOnly) for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(out + suffix, { force: true });
if (readOnly && !existsSync(out)) throw new Error(`no database at ${out}`);
const db = new BunSqliteDatabase(out);
// Only to keep the committed file small (many near-empty tables/indexes,
// one page each); it does not affect the layout. Must precede the first table.
if (!readOnly) db.exec('PRAGMA page_size = 1024');
const storage = new SqliteServerStorage(db);
await storage.ensureSchema(compiled);
if (!readOnly) await writeFixture();

async function writeFixture() {
  await storage.touchPartition(P, BASE_MS, 'epoch-default-1');
  await storage.touchPartition(PB, BASE_MS + 5, 'epoch-tenant-b-1');

  type Op =
    | { kind: 'upsert'; table: string; row: ReturnType<typeof taskRow> }
    | { kind: 'delete'; table: string; rowId: string; scopes: Record<string, string> };

  async function push(partition: string, clientId: string, clientCommitId: string, actorId: string, atMs: number, ops: Op[]) {
    const tx = await storage.begin(partition);
    await tx.lockPartitionForPush();
    const changes = [];
    for (const [opIndex, op] of ops.entries()) {
      if (op.kind === 'upsert') {
        await tx.upsertRow(op.table, op.row, { opIndex });
        changes.push({ table: op.table, rowId: op.row.rowId, op: 'upsert', rowVersion: op.row.serverVersion, scopes: op.row.scopes, payload: op.row.payload });
      } else {
        await tx.deleteRow(op.table, op.rowId);
        changes.push({ table: op.table, rowId: op.rowId, op: 'delete', scopes: op.scopes });
      }
    }
    const commitSeq = await tx.appendCommit({ clientId, clientCommitId, actorId, createdAtMs: atMs, changes });
    await tx.putPushResult(clientId, clientCommitId, {
      status: 'applied',
      commitSeq,
      recordedAtMs: atMs,
      cacheIdentity: `ci-${clientCommitId}`,
      results: ops.map((_, opIndex) => ({ opIndex, status: 'applied' })),
    });
    await tx.commit();
    return commitSeq;
  }

  await push(P, 'c1', 'c1-1', 'alice', BASE_MS + 1000, [
    { kind: 'upsert', table: 'tasks', row: taskRow(t1v1, 1) },
    { kind: 'upsert', table: 'tasks', row: taskRow(t2, 1) },
    { kind: 'upsert', table: 'notes', row: noteRow('n1', 'p1', 'hello', 1) },
  ]);
  await push(P, 'c1', 'c1-2', 'alice', BASE_MS + 2000, [
    { kind: 'upsert', table: 'tasks', row: taskRow(t3, 1) },
    { kind: 'upsert', table: 'tasks', row: taskRow(t1v2, 2) },
  ]);
  await push(P, 'c2', 'c2-1', 'bob', BASE_MS + 3000, [
    { kind: 'delete', table: 'tasks', rowId: 't2', scopes: { project_id: 'p1', owner_id: 'u2' } },
  ]);
  await push(P, 'c2', 'c2-2', 'bob', BASE_MS + 4000, [
    { kind: 'upsert', table: 'tasks', row: taskRow(t4, 1) },
    { kind: 'upsert', table: 'notes', row: noteRow('n2', 'p2', null, 1) },
  ]);
  await push(PB, 'c3', 'c3-1', 'carol', BASE_MS + 5000, [
    { kind: 'upsert', table: 'tasks', row: taskRow(tb1, 1) },
  ]);

  // A rejected push: candidate write discarded, rejected result persisted.
  {
    const tx = await storage.begin(P);
    await tx.lockPartitionForPush();
    await tx.upsertRow('tasks', taskRow({ ...t1v2, title: 'stale edit' }, 3), { opIndex: 0 });
    await tx.commitRejectedPushResult('c2', 'c2-3', {
      status: 'rejected',
      recordedAtMs: BASE_MS + 6000,
      cacheIdentity: 'ci-c2-3',
      results: [
        {
          opIndex: 0, status: 'conflict', code: 'sync.conflict', message: 'row changed on the server',
          serverVersion: 2, serverRow: taskPayload(t1v2),
        },
        {
          opIndex: 1, status: 'error', code: 'sync.forbidden', message: 'not allowed', retryable: false,
          details: { reason: 'outside_scope', fieldPaths: ['title'], requiredAction: 'edit_fields', references: { project: 'p1' } },
        },
        { opIndex: 2, status: 'error', code: 'sync.internal', message: 'try later', retryable: true },
      ],
    });
  }

  await storage.putClientRecord(P, {
    clientId: 'c1', actorId: 'alice', wireVersion: 2, cursor: 4, updatedAtMs: BASE_MS + 7000,
    subscriptions: [
      { id: 's-tasks', table: 'tasks', scopes: { project_id: ['p1', 'p2'], owner_id: ['u1'] } },
      { id: 's-notes', table: 'notes', scopes: { project_id: ['p1'] } },
    ],
  });
  await storage.putClientRecord(P, {
    clientId: 'c2', actorId: 'bob', wireVersion: 1, cursor: 0, updatedAtMs: BASE_MS + 7001, subscriptions: [],
  });
}

// ---------------------------------------------------------------------------
// Read back through the in-tree storage itself.

const b64 = (u: Uint8Array | undefined) => (u === undefined ? undefined : Buffer.from(u).toString('base64'));
const rowJson = (r: any) => r === undefined ? null : ({ rowId: r.rowId, serverVersion: r.serverVersion, scopes: r.scopes, payload: b64(r.payload) });
const commitJson = (c: any) => ({
  commitSeq: c.commitSeq, createdAtMs: c.createdAtMs, actorId: c.actorId,
  changes: c.changes.map((ch: any) => {
    const o: any = { table: ch.table, rowId: ch.rowId, op: ch.op };
    if (ch.rowVersion !== undefined) o.rowVersion = ch.rowVersion;
    o.scopes = ch.scopes;
    if (ch.payload !== undefined) o.payload = b64(ch.payload);
    return o;
  }),
});
const pushJson = (r: any) => r === undefined ? null : ({
  ...r,
  results: r.results.map((x: any) => (x.status === 'conflict' ? { ...x, serverRow: b64(x.serverRow) } : x)),
});

const rows: any[] = [];
for (const [partition, table, rowId] of [
  [P, 'tasks', 't1'], [P, 'tasks', 't2'], [P, 'tasks', 't3'], [P, 'tasks', 't4'], [P, 'tasks', 'missing'],
  [P, 'notes', 'n1'], [P, 'notes', 'n2'], [PB, 'tasks', 't1'], [PB, 'tasks', 't3'],
]) {
  rows.push({ partition, table, rowId, row: rowJson(await storage.getRow(partition, table, rowId)) });
}

const windowQueries = [
  { partition: P, query: { table: 'tasks', scopeFilter: { project_id: ['p1', 'p2'] }, afterSeq: 0, throughSeq: 100, limitChanges: 1000 } },
  { partition: P, query: { table: 'tasks', scopeFilter: { project_id: ['p1'], owner_id: ['u2'] }, afterSeq: 0, throughSeq: 100, limitChanges: 1000 } },
  { partition: P, query: { table: 'tasks', scopeFilter: { owner_id: ['u1'] }, afterSeq: 1, throughSeq: 3, limitChanges: 1000 } },
  { partition: P, query: { table: 'notes', scopeFilter: { project_id: ['p1', 'p2'] }, afterSeq: 0, throughSeq: 100, limitChanges: 1000 } },
  { partition: P, query: { table: 'tasks', scopeFilter: { project_id: ['p2'] }, afterSeq: 0, throughSeq: 100, limitChanges: 1 } },
  { partition: PB, query: { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterSeq: 0, throughSeq: 100, limitChanges: 1000 } },
];
const windows = [];
for (const w of windowQueries) {
  windows.push({ ...w, result: (await storage.readCommitWindow(w.partition, w.query)).map(commitJson) });
}

const scanQueries = [
  { partition: P, query: { table: 'tasks', scopeFilter: { project_id: ['p1', 'p2'] }, afterRowId: null, limit: 100 } },
  { partition: P, query: { table: 'tasks', scopeFilter: { owner_id: ['u1', 'u2'], project_id: ['p2'] }, afterRowId: 't3', limit: 100 } },
  { partition: P, query: { table: 'notes', scopeFilter: { project_id: ['p1', 'p2'] }, afterRowId: null, limit: 1 } },
  { partition: PB, query: { table: 'tasks', scopeFilter: { owner_id: ['u9'] }, afterRowId: null, limit: 100 } },
];
const scans = [];
for (const s of scanQueries) {
  scans.push({ ...s, result: (await storage.scanRows(s.partition, s.query)).map(rowJson) });
}

const pushResults = [];
for (const [partition, clientId, clientCommitId] of [
  [P, 'c1', 'c1-1'], [P, 'c1', 'c1-2'], [P, 'c2', 'c2-1'], [P, 'c2', 'c2-2'], [P, 'c2', 'c2-3'],
  [PB, 'c3', 'c3-1'], [P, 'c3', 'c3-1'], [P, 'nobody', 'x'],
]) {
  pushResults.push({ partition, clientId, clientCommitId, result: pushJson(await storage.getPushResult(partition, clientId, clientCommitId)) });
}

const clients = [];
for (const [partition, clientId] of [[P, 'c1'], [P, 'c2'], [PB, 'c1']]) {
  const rec = await storage.getClientRecord(partition, clientId);
  clients.push({ partition, clientId, record: rec ?? null });
}

const expected = {
  generator: 'scripts/make-fixture.ts',
  upstreamVersion,
  note: 'reads produced by the upstream in-tree SqliteServerStorage (Bun) over the fixture database; bytes are base64',
  schema: serverSchema,
  partitions: [P, PB],
  rows,
  windows,
  scans,
  pushResults,
  clients,
  registry: await storage.listPartitionRegistry(),
  maxCommitSeq: { [P]: await storage.getMaxCommitSeq(P), [PB]: await storage.getMaxCommitSeq(PB) },
  // Payload for the test's follow-up push (encoded by upstream's codec).
  nextPush: {
    partition: P,
    row: rowJson(taskRow({ id: 't5', project_id: 'p1', owner_id: 'u1', title: 'after import', done: true, count: 5, score: null, meta: null, data: new Uint8Array([9]) }, 1)),
  },
};

db.close();
for (const suffix of readOnly ? [] : ['-wal', '-shm', '-journal']) {
  if (existsSync(out + suffix)) throw new Error(`left-over ${out + suffix}`);
}
writeFileSync(expectedPath, JSON.stringify(expected, null, 2) + '\n');
console.log(`wrote ${out} (${readFileSync(out).length} bytes) and ${expectedPath}`);
