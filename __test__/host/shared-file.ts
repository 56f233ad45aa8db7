// One SQLite file for everything: this package's storage, and upstream's
// SqliteSegmentStore, SqliteBlobStore and SqliteLeaseStore on storage.db.
// Several clients push at once through upstream's request handler (so push
// transactions span event-loop turns, and commit in groups), bootstrap
// pulls write segments through the handler, and blobs, leases and segments
// are written and read beside them. Some pushes are rejected (their
// candidate savepoint rolls back) and some transactions fail on purpose
// (rolled back whole), with store writes made inside them.
//
// Usage: bun shared-file.ts DBFILE. Prints what it saw; the caller checks
// the file with the sqlite3 shell after this process closed it.
import { createHost } from '../../bench/lib/server.mjs';
import { encodeTask, TABLE } from '../../bench/lib/fixture.mjs';
import { core, native, report, server } from './upstream.ts';

const path = process.argv[2];
if (!path) throw new Error('usage: shared-file.ts DBFILE');

const P = 'p';
const CLIENTS = 8;
const EACH = 30;
const ACCEPT_EXTERNAL_ROWS = 0b0010;
const turn = () => new Promise((r) => setImmediate(r));

const storage = new native.NativeStorage({ url: `sqlite:${path}` });
const segments = new server.SqliteSegmentStore(storage.db);
const blobs = new server.SqliteBlobStore(storage.db);
const leases = new server.SqliteLeaseStore(storage.db);

// Every 7th transaction fails at its appendCommit, after a turn of the
// event loop: the handler rolls it back whole.
// `open` counts transactions between begin and commit/rollback, so the
// program can tell how many store writes joined one.
const begin = storage.begin;
let begun = 0;
let injected = 0;
let open = 0;
storage.begin = async (partition: string) => {
  const tx = await begin(partition);
  open++;
  for (const end of ['commit', 'rollback'] as const) {
    const f = tx[end];
    let ended = false;
    tx[end] = (...args: unknown[]) => {
      if (!ended) open--;
      ended = true;
      return f(...args);
    };
  }
  if (++begun % 7 === 0) {
    tx.appendCommit = async () => {
      await turn();
      injected++;
      throw Object.assign(new Error('injected failure'), { code: 'TEST_INJECTED' });
    };
  }
  return tx;
};

const host = await createHost(server, core, storage, P, { segments });
const unexpected: string[] = [];
const note = (where: string, e: unknown) => {
  const err = e as { code?: string; message?: string };
  unexpected.push(`${where}: ${err?.code ?? ''} ${err?.message ?? String(e)}`);
};

type Sent = { clientId: string; commitId: string; rowId: string; reject: boolean; status?: string; seq?: number; failed?: string };
const sent: Sent[] = [];

async function client(w: number) {
  const clientId = `client-${w}`;
  for (let c = 0; c < EACH; c++) {
    const rowId = `w${w}-${c}`;
    // Every 5th: baseVersion on an absent row, rejected inside the
    // transaction (ROLLBACK TO the candidate savepoint).
    const reject = c % 5 === 4;
    const s: Sent = { clientId, commitId: `${clientId}-${c}`, rowId, reject };
    sent.push(s);
    const bytes = host.request(clientId, [
      {
        type: 'PUSH_COMMIT',
        clientCommitId: s.commitId,
        operations: [{ table: TABLE, rowId, op: 'upsert', payload: encodeTask(rowId, 'p1', c), ...(reject ? { baseVersion: 7 } : {}) }],
      },
    ]);
    let response;
    try {
      response = await host.handle(bytes);
    } catch (e) {
      s.failed = String((e as Error)?.message ?? e);
      continue;
    }
    const frames = host.core.decodeMessage(response).frames;
    const error = frames.find((f: any) => f.type === 'ERROR');
    if (error) {
      s.failed = `${error.code}: ${error.message}`;
      continue;
    }
    const result = frames.find((f: any) => f.type === 'PUSH_RESULT');
    s.status = result?.status;
    s.seq = result?.commitSeq;
  }
}

// Bootstrap pulls that only take rows by reference: each page goes to the
// segment store through the handler.
const refs = new Set<string>();
async function puller(k: number) {
  for (let round = 0; round < 6; round++) {
    await turn();
    let state;
    for (let pages = 0; pages < 20; pages++) {
      const response = await host.handle(
        host.request(`puller-${k}`, [
          { type: 'PULL_HEADER', limitCommits: 100, limitSnapshotRows: 20, maxSnapshotPages: 2, accept: ACCEPT_EXTERNAL_ROWS },
          { type: 'SUBSCRIPTION', id: 'tasks', table: TABLE, scopes: { project_id: ['p1'] }, cursor: -1, ...(state ? { bootstrapState: state } : {}) },
        ]),
      );
      const frames = host.decode(response);
      for (const f of frames) if (f.type === 'SEGMENT_REF') refs.add(f.segmentId);
      state = frames.find((f: any) => f.type === 'SUB_END')?.bootstrapState;
      if (state === undefined) break;
    }
  }
}

// Blobs, leases and segments written and read beside the pushes.
const blobIds: string[] = [];
const segmentIds: string[] = [];
const leaseClients = new Map<string, { leaseId: string; revoked: boolean }>();
let pushing = true;
let sideOps = 0;
let joined = 0;
async function beside() {
  for (let i = 0; pushing; i++) {
    await turn();
    const now = Date.now();
    const bytes = new Uint8Array(256 + (i % 64)).fill(i & 255);
    const blobId = `sha256:${i.toString(16).padStart(8, '0')}`;
    if (open > 0) joined++;
    await blobs.put(P, blobId, bytes, now, 'application/octet-stream');
    blobIds.push(blobId);
    if (!(await blobs.has(P, blobId))) throw new Error(`blob ${blobId} missing right after put`);
    const lc = `lease-client-${i % 40}`;
    const lease = await leases.issue(P, lc, 'actor', { project_id: ['p1'] }, now, 60_000);
    leaseClients.set(lc, { leaseId: lease.leaseId, revoked: false });
    if (i % 9 === 8) {
      await leases.revoke(P, lease.leaseId);
      leaseClients.set(lc, { leaseId: lease.leaseId, revoked: true });
    }
    const rec = await segments.put(
      {
        partition: P,
        logEpoch: 'bench-log-epoch',
        table: TABLE,
        schemaVersion: 1,
        mediaType: 'rows',
        scopeDigest: `side-${i}`,
        asOfCommitSeq: i,
        rowCount: 1,
        rowCursor: null,
        nextRowCursor: null,
      },
      bytes,
      now,
    );
    segmentIds.push(rec.segmentId);
    const back = await segments.get(rec.segmentId);
    if (back?.bytes.length !== bytes.length) throw new Error(`segment ${rec.segmentId} unreadable right after put`);
    if (i % 25 === 0) {
      // Nothing is older than 0: the sweep reads and deletes nothing.
      await blobs.sweepOrphans(P, 0, new Set());
      await blobs.stats(P);
      await segments.stats();
    }
    sideOps++;
  }
}

const started = performance.now();
const side = beside().catch((e) => note('beside', e));
await Promise.all([
  ...Array.from({ length: CLIENTS }, (_, w) => client(w).catch((e) => note(`client ${w}`, e))),
  ...[0, 1].map((k) => puller(k).catch((e) => note(`puller ${k}`, e))),
]);
pushing = false;
await side;
const elapsedMs = performance.now() - started;

// Every acknowledged push is there; nothing of a rejected or failed one.
let applied = 0;
let rejected = 0;
let failed = 0;
for (const s of sent) {
  const row = await storage.getRow(P, TABLE, s.rowId);
  const stored = await storage.getPushResult(P, s.clientId, s.commitId);
  if (s.failed !== undefined) {
    failed++;
    if (row !== undefined || stored !== undefined) unexpected.push(`failed push ${s.commitId} left state behind`);
  } else if (s.status === 'applied') {
    applied++;
    if (row === undefined) unexpected.push(`applied push ${s.commitId} has no row`);
    if (stored?.status !== 'applied') unexpected.push(`applied push ${s.commitId} has no stored result`);
  } else if (s.status === 'rejected' && s.reject) {
    rejected++;
    if (row !== undefined) unexpected.push(`rejected push ${s.commitId} wrote its row`);
  } else {
    unexpected.push(`push ${s.commitId}: status ${s.status}`);
  }
}

// Every store write is there, through the stores and by count.
for (const id of blobIds) if (!(await blobs.get(P, id))) unexpected.push(`blob ${id} lost`);
for (const id of [...segmentIds, ...refs]) if (!(await segments.get(id))) unexpected.push(`segment ${id} lost`);
for (const [lc, want] of leaseClients) {
  const got = await leases.get(P, lc);
  if (got?.leaseId !== want.leaseId || got.revoked !== want.revoked) unexpected.push(`lease of ${lc}: ${JSON.stringify(got)}`);
}
const count = (sql: string) => Number(storage.db.query(sql).get().n);
const counts = {
  blobs: count('SELECT count(*) AS n FROM sync_blobs'),
  segments: count('SELECT count(*) AS n FROM sync_segments'),
  leases: count('SELECT count(*) AS n FROM sync_leases'),
  commits: count('SELECT count(*) AS n FROM sync_commits'),
};
if (counts.blobs !== blobIds.length) unexpected.push(`sync_blobs holds ${counts.blobs} rows, ${blobIds.length} written`);
if (counts.segments !== new Set([...segmentIds, ...refs]).size) unexpected.push(`sync_segments holds ${counts.segments} rows`);
await storage.close();

report({
  sent: sent.length,
  applied,
  rejected,
  failed,
  injected,
  refs: refs.size,
  sideOps,
  joined,
  blobs: blobIds.length,
  leases: leaseClients.size,
  counts,
  elapsedMs: Math.round(elapsedMs),
  unexpected,
});
