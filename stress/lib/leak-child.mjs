// Leak program body (issue 7 §4), run as `node --expose-gc leak-child.mjs
// <calls> <storage options JSON> <dropEvery>`. Issues `calls` mixed storage
// and transaction calls on a SQLite file or a PostgreSQL schema: reads, scans, windows, full pushes, rolled-back and failed
// transactions, rejected bad input, and transactions left unfinished and
// dropped (every `dropEvery` calls). A dropped transaction holds the write
// lease (SQLite) or its connection and the partition's row lock
// (PostgreSQL) until it is collected: the next begin() and
// lockPartitionForPush() must proceed once gc() runs, and the dropped
// writes must be absent. Prints one JSON line:
// { calls, dropped, warmRss, endRss, growth, heapGrowth, droppedWritesVisible,
// stuck } (heapGrowth: the JS heap's live bytes, after gc()).
import { NativeStorage } from '../../__test__/support/package.mjs';
import { fixtureSchema } from '../../__test__/support/schema.mjs';
import { taskRow } from '../../__test__/support/harness.mjs';

const [callsArg, optionsJson, dropEveryArg] = process.argv.slice(2);
const total = Number(callsArg);
const dropEvery = Number(dropEveryArg || 2000);
if (typeof gc !== 'function') throw new Error('run with --expose-gc');
const storage = new NativeStorage(JSON.parse(optionsJson));
const P = 'leak';
const filter = { project_id: ['p1'] };
let calls = 0;
let dropped = 0;
let stuck = 0;
let seq = 0;
let n = 0;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let heap;
const rss = () => {
  gc();
  const m = process.memoryUsage();
  heap = m.heapUsed;
  return m.rss;
};

/** Waits for `promise`, running gc() meanwhile so a dropped transaction that blocks it is collected. */
async function gcUntil(promise, what) {
  let settled = false;
  const p = promise.then((v) => {
    settled = true;
    return v;
  });
  for (let i = 0; !settled && i < 400; i++) {
    await (i < 3 ? new Promise((r) => setImmediate(r)) : sleep(5));
    if (!settled) gc();
  }
  if (!settled) {
    stuck++;
    throw new Error(`${what} did not proceed after the dropped transaction was collected`);
  }
  return p;
}

/** begin() that may wait for a dropped transaction to be collected. */
function begin() {
  calls++;
  return gcUntil(storage.begin(P), 'begin()');
}

/** begin() and lockPartitionForPush(), either of which may wait for a dropped transaction. */
async function beginLocked() {
  const tx = await begin();
  calls++;
  await gcUntil(tx.lockPartitionForPush(), 'lockPartitionForPush()');
  return tx;
}

function dropOne() {
  // Inside a function so no reference survives the return.
  return (async () => {
    const tx = await begin();
    await tx.lockPartitionForPush();
    await tx.upsertRow('tasks', taskRow(`dropped-${dropped}`), { opIndex: 0 });
    calls += 2;
    dropped++;
  })();
}

async function push() {
  const tx = await begin();
  const id = `r${n % 500}`;
  try {
    await tx.lockPartitionForPush();
    const existing = await tx.getRow('tasks', id);
    const version = (existing?.serverVersion ?? 0) + 1;
    const row = taskRow(id, {}, { version });
    await tx.upsertRow('tasks', row, { opIndex: 0 });
    const ccid = `cc-${n}`;
    seq = await tx.appendCommit({
      clientId: 'c',
      clientCommitId: ccid,
      actorId: 'a',
      createdAtMs: n,
      changes: [{ table: 'tasks', rowId: id, op: 'upsert', rowVersion: version, scopes: row.scopes, payload: row.payload }],
    });
    await tx.putPushResult('c', ccid, { status: 'applied', commitSeq: seq, recordedAtMs: n, cacheIdentity: 'x', results: [{ opIndex: 0, status: 'applied' }] });
    await tx.commit();
    calls += 6;
  } catch (err) {
    await tx.rollback();
    throw err;
  }
}

async function step() {
  n++;
  const r = n % 20;
  if (r < 6) {
    calls += 3;
    await storage.getMaxCommitSeq(P);
    await storage.getRow(P, 'tasks', `r${n % 500}`);
    await storage.getPushResult(P, 'c', `cc-${n - 1}`);
  } else if (r < 9) {
    calls += 2;
    await storage.scanRows(P, { table: 'tasks', scopeFilter: filter, afterRowId: null, limit: 50 });
    await storage.readCommitWindow(P, { table: 'tasks', scopeFilter: filter, afterSeq: Math.max(0, seq - 20), throughSeq: seq, limitChanges: 50 });
  } else if (r < 13) {
    await push();
  } else if (r < 15) {
    const tx = await begin();
    await tx.lockPartitionForPush();
    await tx.upsertRow('tasks', taskRow(`rolled-${n % 100}`), { opIndex: 0 });
    await tx.getRow('tasks', `rolled-${n % 100}`);
    await tx.rollback();
    calls += 4;
  } else if (r < 17) {
    const tx = await begin();
    await tx.lockPartitionForPush();
    await tx.upsertRow('nope', taskRow('x'), { opIndex: 0 }).catch(() => {});
    await tx.appendCommit({ clientId: 1 }).catch(() => {});
    await tx.rollback();
    calls += 4;
  } else if (r < 19) {
    calls += 3;
    await storage.getRow(P, 'nope', 'x').catch(() => {});
    await storage.scanRows(P, { table: 'tasks', scopeFilter: {}, limit: 10 }).catch(() => {});
    await storage.setHorizonSeq(P, Number.NaN).catch(() => {});
  } else {
    calls += 2;
    await storage.touchPartition(P, n, 'e1');
    await storage.putClientRecord(P, { clientId: `c${n % 50}`, actorId: 'a', wireVersion: 1, cursor: seq, updatedAtMs: n, subscriptions: [] });
  }
  if (n % 5000 === 0 && seq > 1000) {
    calls++;
    await storage.pruneCommitsThrough(P, { logEpoch: 'e1', throughSeq: seq - 500 });
  }
}

await storage.ensureSchema(fixtureSchema());
await storage.touchPartition(P, 0, 'e1');
let nextDrop = dropEvery;
let warmRss;
let warmHeap;
const warmAt = Math.min(total * 0.2, 200_000);
while (calls < total) {
  await step();
  if (calls >= nextDrop) {
    nextDrop += dropEvery;
    await dropOne();
    // Storage-level writes queue on the lease too; wait (running gc) until
    // the dropped transaction has been collected and released it.
    const next = await beginLocked();
    await next.rollback();
    calls++;
  }
  if (warmRss === undefined && calls >= warmAt) {
    warmRss = rss();
    warmHeap = heap;
  }
}
// The last dropped transaction must be released too.
const last = await beginLocked();
await last.rollback();
let droppedWritesVisible = 0;
for (let i = 0; i < dropped; i++) if ((await storage.getRow(P, 'tasks', `dropped-${i}`)) !== undefined) droppedWritesVisible++;
const endRss = rss();
await storage.close();
process.stdout.write(`${JSON.stringify({ calls, dropped, warmRss, endRss, growth: endRss - warmRss, heapGrowth: heap - warmHeap, droppedWritesVisible, stuck, commits: seq })}\n`);
