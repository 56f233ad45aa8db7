// npm run bench: µs per push commit (1 and 10 operations) and per
// 100-change window read on a SQLite file (WAL), through the package as
// @syncular/server drives it, beside the same push SQL sequence issued
// directly from Rust in the same run. Each figure is the median of RUNS
// runs, with min and max. Results also go to bench/results/*.json.
import { createRequire } from 'node:module';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const { NativeStorage } = require('../index.js');
const native = require('../lib/native.js');

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const PUSH_COMMITS = { 1: 2000, 10: 500 };
const WINDOW_COMMITS = 5000;
const WINDOW_READS = 2000;

const schema = {
  version: 1,
  declaredVariables: new Set(['project_id']),
  tables: new Map([
    [
      'tasks',
      {
        name: 'tasks',
        columns: [
          { name: 'id', type: 'string', nullable: false },
          { name: 'project_id', type: 'string', nullable: false },
          { name: 'title', type: 'string', nullable: true },
          { name: 'n', type: 'integer', nullable: true },
        ],
        primaryKeyIndex: 0,
        scopePatterns: [{ variable: 'project_id', prefix: 'project', column: 'project_id', columnIndex: 1 }],
        indexes: [],
        materialize: true,
      },
    ],
  ]),
};

// The full-row codec for this table (null bitmap, then u32-length strings
// and an i64), so payloads vary per commit as a host's would.
function encode(id, n) {
  const parts = [Buffer.from([0])];
  for (const s of [id, 'p1', `title ${n}`]) {
    const b = Buffer.from(s, 'utf8');
    const len = Buffer.alloc(4);
    len.writeUInt32LE(b.length);
    parts.push(len, b);
  }
  const num = Buffer.alloc(8);
  num.writeBigInt64LE(BigInt(n));
  parts.push(num);
  return new Uint8Array(Buffer.concat(parts));
}

const scopes = { project_id: 'p1' };

// One push as the host's push.ts sequences it (contract.md §7.1).
async function push(storage, partition, clientCommitId, rows, n) {
  await storage.getPushResult(partition, 'client', clientCommitId);
  const tx = await storage.begin(partition);
  try {
    await tx.lockPartitionForPush();
    await tx.readServeGate(1);
    await tx.getPushResult('client', clientCommitId);
    const changes = [];
    for (let o = 0; o < rows.length; o++) {
      const rowId = `row-${o}`;
      const existing = await tx.getRow('tasks', rowId);
      if (existing === undefined) {
        await tx.getTombstoneSeq('tasks', rowId);
        await tx.clearTombstone('tasks', rowId);
      }
      const serverVersion = n + 1;
      await tx.upsertRow('tasks', { rowId, serverVersion, scopes, payload: rows[o] }, { opIndex: o });
      changes.push({ table: 'tasks', rowId, op: 'upsert', rowVersion: serverVersion, scopes, payload: rows[o] });
    }
    const commitSeq = await tx.appendCommit({
      clientId: 'client',
      clientCommitId,
      actorId: 'actor',
      createdAtMs: n,
      changes,
    });
    await tx.putPushResult('client', clientCommitId, {
      status: 'applied',
      commitSeq,
      recordedAtMs: 0,
      cacheIdentity: 'x',
      results: [],
    });
    await tx.commit();
  } catch (err) {
    await tx.rollback();
    throw err;
  }
}

function stats(values) {
  const s = [...values].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)], min: s[0], max: s[s.length - 1] };
}

function freshFile(dir, name) {
  const path = join(dir, `${name}.db`);
  rmSync(path, { force: true });
  rmSync(`${path}-wal`, { force: true });
  rmSync(`${path}-shm`, { force: true });
  return path;
}

async function benchPush(dir, ops, run) {
  const commits = PUSH_COMMITS[ops];
  const storage = new NativeStorage({ url: `sqlite:${freshFile(dir, `push-${ops}-${run}`)}` });
  await storage.ensureSchema(schema);
  const payloads = Array.from({ length: commits }, (_, c) => Array.from({ length: ops }, (_, o) => encode(`row-${o}`, c)));
  const start = process.hrtime.bigint();
  for (let c = 0; c < commits; c++) await push(storage, 'bench', `c-${c}`, payloads[c], c);
  const us = Number(process.hrtime.bigint() - start) / 1e3 / commits;
  await storage.close();
  return us;
}

function benchDirect(dir, ops, run) {
  return native.benchDirectPush(freshFile(dir, `direct-${ops}-${run}`), PUSH_COMMITS[ops], ops);
}

async function benchWindow(dir, run) {
  const storage = new NativeStorage({ url: `sqlite:${freshFile(dir, `window-${run}`)}` });
  await storage.ensureSchema(schema);
  for (let c = 0; c < WINDOW_COMMITS; c++) await push(storage, 'bench', `w-${c}`, [encode(`row-${c}`, c)], c);
  // rows are distinct per commit, so every commit carries one change
  const max = await storage.getMaxCommitSeq('bench');
  const start = process.hrtime.bigint();
  let delivered = 0;
  for (let i = 0; i < WINDOW_READS; i++) {
    const afterSeq = (i * 97) % (max - 100);
    const commits = await storage.readCommitWindow('bench', {
      table: 'tasks',
      scopeFilter: { project_id: ['p1'] },
      afterSeq,
      throughSeq: max,
      limitChanges: 100,
    });
    delivered += commits.length;
  }
  const us = Number(process.hrtime.bigint() - start) / 1e3 / WINDOW_READS;
  if (delivered !== WINDOW_READS * 100) throw new Error(`window read delivered ${delivered} commits`);
  await storage.close();
  return us;
}

const dir = mkdtempSync(join(tmpdir(), 'syncular-bench-'));
const rows = [];
try {
  for (const ops of [1, 10]) {
    const viaPackage = [];
    const direct = [];
    for (let r = 0; r < RUNS; r++) {
      // Alternate the two so drift on a shared machine hits both alike.
      viaPackage.push(await benchPush(dir, ops, r));
      direct.push(benchDirect(dir, ops, r));
    }
    rows.push({ workload: `push commit, ${ops} op${ops > 1 ? 's' : ''} (${PUSH_COMMITS[ops]} commits)`, package: stats(viaPackage), direct: stats(direct) });
  }
  const windows = [];
  for (let r = 0; r < RUNS; r++) windows.push(await benchWindow(dir, r));
  rows.push({ workload: `window read, 100 changes (${WINDOW_READS} reads)`, package: stats(windows), direct: null });
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const fmt = (s) => (s ? `${s.median.toFixed(1)} (${s.min.toFixed(1)}–${s.max.toFixed(1)})` : '—');
const runtime = typeof Bun !== 'undefined' ? `bun ${Bun.version}` : `node ${process.version}`;
console.log(`SQLite file, WAL, synchronous=NORMAL; ${runtime}; median (min–max) of ${RUNS} runs, µs per operation`);
console.log('| workload | syncular-native-storage | same SQL from Rust | ratio |');
console.log('|---|---|---|---|');
for (const r of rows) {
  const ratio = r.direct ? `${(r.package.median / r.direct.median).toFixed(2)}×` : '—';
  console.log(`| ${r.workload} | ${fmt(r.package)} | ${fmt(r.direct)} | ${ratio} |`);
}
const outDir = join(dirname(fileURLToPath(import.meta.url)), 'results');
mkdirSync(outDir, { recursive: true });
const out = join(outDir, `sqlite-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(out, JSON.stringify({ runtime, runs: RUNS, rows }, null, 2));
console.log(`results: ${out}`);
