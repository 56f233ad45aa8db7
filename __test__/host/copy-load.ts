// The move under load, through upstream's real handler (issue 51's
// acceptance, scaled by an argument): three partitions filled through the
// handler, then pushes and pulls on each go on while
// `storage.copyTo(url, { finalPass: true, verify: true })` moves the
// database. Afterwards: no push failed except with ERR_SYNCULAR_MOVED after
// the final pass, every acknowledged push is on PostgreSQL with its commit
// sequence, and a host on PostgreSQL answers each partition's pull
// requests byte for byte as a host on the SQLite file does.
//
//   bun __test__/host/copy-load.ts <sqlite file> <postgres schema> [commits per partition]
//
// Prints one JSON line with what it saw.
import { createHost, fill } from '../../bench/lib/server.mjs';
import { TABLE } from '../../bench/lib/fixture.mjs';
import { core, report, server } from './upstream.ts';
import { createRequire } from 'node:module';

const { NativeStorage, movedMark } = createRequire(import.meta.url)('../../index.js');
const [path, schema, perPartition = '1000'] = process.argv.slice(2);
const url = process.env.SYNCULAR_TEST_PG_URL as string;
const PARTITIONS = ['p1', 'p2', 'p3'];
const N = Number(perPartition);

async function hosts(storage: any) {
  const out: any[] = [];
  for (const p of PARTITIONS) out.push(await createHost(server, core, storage, p));
  return out;
}

const pullFrames = (cursor: number, limitCommits: number) => [
  { type: 'PULL_HEADER', limitCommits, limitSnapshotRows: 50, maxSnapshotPages: 2, accept: 0b0011 },
  { type: 'SUBSCRIPTION', id: 'tasks', table: TABLE, scopes: { project_id: ['p1'] }, cursor },
];

async function answers(host: any) {
  const max = Number(await host.storage.getMaxCommitSeq(host.partition));
  const bytes: Uint8Array[] = [];
  for (const cursor of [-1, 0, 1, Math.floor(max / 3), Math.floor(max / 2), max - 5, max]) {
    for (const limit of [1, 50]) bytes.push(await host.handle(host.request(`verifier-${cursor}-${limit}`, pullFrames(cursor, limit))));
  }
  return bytes;
}

const same = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((v, i) => v === b[i]);

const t0 = Date.now();
const log = (m: string) => process.env.COPY_LOAD_DEBUG && process.stderr.write(`${Date.now() - t0} ${m}\n`);

// 1. History through the handler.
const source = new NativeStorage({ url: `sqlite:${path}`, errors: server });
const before = await hosts(source);
log('hosts');
for (const h of before) await fill(h, `f-${h.partition}-`, N, 2);
log('filled');

// 2. Load: a pusher and a puller per partition until the storage refuses.
let moving = true;
let finalDone = 0;
const acked: { p: string; id: string; seq: number }[] = [];
const failures: { code: string; atMs: number }[] = [];
const pushers = before.map(async (h) => {
  for (let i = 0; moving; i++) {
    // Requests arrive from the network: the event loop turns between them
    // (a loop of answers the SQLite engine gives at once would starve it).
    await new Promise(setImmediate);
    const id = `live-${h.partition}-${i}`;
    // One commit of one fresh row, through the handler (fill's frames).
    try {
      await fill(h, `${id}-`, 1, 1);
      acked.push({ p: h.partition, id: `${id}-0`, seq: Number(await h.storage.getMaxCommitSeq(h.partition).catch(() => 0)) });
    } catch (err: any) {
      // The handler answers with the storage's message (its code stays on
      // the server side).
      const text = String(err?.message ?? err);
      const isMoved = /ERR_SYNCULAR_MOVED|database was moved to/.test(text);
      failures.push({ code: isMoved ? 'ERR_SYNCULAR_MOVED' : text.slice(0, 200), atMs: Date.now() });
      if (isMoved) break;
    }
  }
});
const pullers = before.map(async (h) => {
  let cursor = 0;
  while (moving) {
    await new Promise(setImmediate);
    try {
      const frames = h.decode(await h.handle(h.request(`puller-${h.partition}`, pullFrames(cursor, 100))));
      const sub = frames.find((f: any) => f.type === 'SUB_END' || f.type === 'SUB_START');
      cursor = sub?.cursor ?? cursor;
    } catch {
      break; // a pull writes the client's cursor: refused once moved
    }
  }
});
const started = Date.now();
const moved = await source.copyTo(url, { schema, finalPass: true, verify: true, onProgress: (p: any) => log(`${p.phase} ${p.table} ${p.rows}`) });
log('moved');
finalDone = Date.now();
moving = false;
await Promise.all([...pushers, ...pullers]);
await source.close();
// The final pass marked the file moved (every process refuses writes to
// it); the reference host below writes client records, so the mark goes.
const mark = await movedMark(path);
const cleared = await movedMark(path, { clear: true });

// 3. The switch: a host on PostgreSQL, and one on the SQLite file as it was left.
const target = new NativeStorage({ url, schema, errors: server, maxConnections: 4 });
const reference = new NativeStorage({ url: `sqlite:${path}`, errors: server });
const onPg = await hosts(target);
const onFile = await hosts(reference);
let missing = 0;
for (const a of acked) {
  const r = await target.getPushResult(a.p, 'bench-filler', a.id);
  if (r === undefined || r.status !== 'applied') missing += 1;
}
let compared = 0;
let firstDiff: string | undefined;
for (let i = 0; i < PARTITIONS.length; i++) {
  const x = await answers(onFile[i]);
  const y = await answers(onPg[i]);
  for (let k = 0; k < x.length; k++) {
    compared += 1;
    if (!same(x[k], y[k]) && firstDiff === undefined) firstDiff = `${PARTITIONS[i]}#${k}`;
  }
}
const maxSeqs: Record<string, [number, number]> = {};
for (const p of PARTITIONS) maxSeqs[p] = [Number(await reference.getMaxCommitSeq(p)), Number(await target.getMaxCommitSeq(p))];
await target.close();
await reference.close();

const other = failures.filter((f) => f.code !== 'ERR_SYNCULAR_MOVED');
// A refusal before the final pass was asked for would be a push refused
// while the copy ran; during the pass writes wait, after it they are refused.
const early = failures.filter((f) => f.atMs < moved.finalPass.startedAtMs);
report({
  ok: moved.verify.equal && missing === 0 && other.length === 0 && firstDiff === undefined && cleared.cleared === true,
  markedMovedTo: mark.moved?.target ?? null,
  commitsBefore: N * PARTITIONS.length,
  acked: acked.length,
  missing,
  otherFailures: other,
  refusedBeforeFinalPass: early.length,
  moveMs: finalDone - started,
  refusedFromFinalPassEndMs: failures.length ? Math.min(...failures.map((f) => f.atMs)) - moved.finalPass.endedAtMs : null,
  passes: (moved.catchUp ?? []).map((p: any) => p.commits),
  finalCommits: moved.finalPass.commits,
  writesHeldMs: moved.finalPass.writesHeldMs,
  verify: moved.verify.equal,
  compared,
  identical: firstDiff === undefined,
  ...(firstDiff !== undefined ? { firstDiff } : {}),
  maxSeqs,
});
