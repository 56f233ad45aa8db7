// Issue 51's acceptance: a host under steady push and pull load through
// upstream's handler, on a SQLite file with the large fixture's schema
// (scripts/large-fixture.mjs: tasks, notes, audit; declared indexes, one
// unique), moves to PostgreSQL while it serves, then switches.
//
//   bun __test__/host/copy-scale.ts FILE SCHEMA [options]
//     --partitions P        the file's partitions (part-000 …), default 4
//     --write-intree N      first write FILE through upstream's handler over
//                           the in-tree SqliteServerStorage (N commits over
//                           P partitions, the fixture's pushes); otherwise
//                           FILE is a prefilled file (large-fixture.mjs);
//                           --write-only stops after writing it
//     --move command|host   command (default): `syncular-native-storage copy`
//                           while the host serves, later `copy --final
//                           --verify`, which takes the file's write lock and
//                           marks it moved; host: `storage.copyTo(url,
//                           { finalPass: true, verify: true })` in the host
//     --warm-ms, --between-ms, --after-ms   load before the copy, between
//                           the copy and the final pass, after the switch
//     --interval-ms         pause of each client between its requests
//
// The host opens FILE with this package (swap-in: its first ensureSchema
// repairs a 0.15.48 layout) and runs, per partition, a writer client
// (pushes, and a pull every 5th) and a reader client (pulls of three
// subscriptions). A request refused with ERR_SYNCULAR_MOVED makes the host
// switch: a storage on PostgreSQL takes the old one's place, every client's
// next pull is made on it and recorded, then the load goes on there (the
// refused pushes are sent again). Checked afterwards: every acknowledged
// push is on PostgreSQL with its commit sequence; the recorded pulls are
// answered byte for byte the same by a host on the SQLite file (a copy,
// its mark cleared with `syncular-native-storage moved --clear`) and none
// is a bootstrap; verify is equal. Prints one JSON line.
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { history, partitionName, PROJECTS, serverSchema, WIRE_VERSION } from '../../scripts/large-fixture.mjs';
import { core, native, report, server } from './upstream.ts';

const [file, schema, ...rest] = process.argv.slice(2);
const opt = (name: string, dflt: string) => {
  const i = rest.indexOf(`--${name}`);
  return i >= 0 ? rest[i + 1] : dflt;
};
const P = Number(opt('partitions', '4'));
const WRITE_INTREE = Number(opt('write-intree', '0'));
const MOVE = opt('move', 'command');
const WARM_MS = Number(opt('warm-ms', '2000'));
const BETWEEN_MS = Number(opt('between-ms', '3000'));
const AFTER_MS = Number(opt('after-ms', '2000'));
const INTERVAL_MS = Number(opt('interval-ms', '10'));
const url = process.env.SYNCULAR_TEST_PG_URL as string;
const NODE = process.env.SYNCULAR_NODE ?? 'node';
const BIN = join(import.meta.dir, '..', '..', 'bin', 'syncular-native-storage.mjs');
if (!file || !schema || (!url && !rest.includes('--write-only'))) throw new Error('usage: copy-scale.ts FILE SCHEMA [options] (SYNCULAR_TEST_PG_URL set)');

const partitions = Array.from({ length: P }, (_, i) => partitionName(i));
const ALLOWED = {
  project_id: Array.from({ length: PROJECTS }, (_, i) => `proj${i}`),
  owner_id: Array.from({ length: 7 }, (_, i) => `u${i}`),
};
const columns = Object.fromEntries(serverSchema.tables.map((t: any) => [t.name, t.columns]));
const t0 = Date.now();
const log = (m: string) => process.env.COPY_SCALE_DEBUG && process.stderr.write(`${Date.now() - t0} ${m}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function ctxFor(storage: any, partition: string, actorId: string, clock?: number) {
  return {
    partition,
    actorId,
    schema: serverSchema,
    storage,
    segments: new server.MemorySegmentStore(),
    resolveScopes: () => ALLOWED,
    ...(clock !== undefined ? { clock: () => clock } : {}),
  };
}

function request(clientId: string, partition: string, frames: unknown[]) {
  return core.encodeMessage({
    wireVersion: WIRE_VERSION,
    msgKind: 'request',
    frames: [{ type: 'REQ_HEADER', clientId, schemaVersion: serverSchema.version, logEpoch: `epoch-${partition}` }, ...frames],
  });
}

const framesOf = (bytes: Uint8Array) => core.decodeMessage(bytes).frames as any[];
const isMoved = (text: string) => /ERR_SYNCULAR_MOVED|database was moved to/.test(text);

// ---------------------------------------------------------------------------
// 0. The file: written by the in-tree 0.15.48 storage through the handler,
// or given.

let written: unknown = null;
if (WRITE_INTREE > 0) {
  for (const s of ['', '-wal', '-shm', '-journal']) rmSync(file + s, { force: true });
  const started = Date.now();
  // synchronous=OFF only speeds the writing (a connection setting, not
  // kept in the file, which stays in the journal mode bun:sqlite gives it).
  const db = new server.BunSqliteDatabase(file);
  db.exec('PRAGMA synchronous=OFF');
  const intree = new server.SqliteServerStorage(db);
  await intree.ensureSchema(server.compileSchema(serverSchema));
  const first = Date.now();
  for (const p of partitions) await intree.touchPartition(p, first, `epoch-${p}`);
  for (const c of history({ commits: WRITE_INTREE, partitions: P, rows: 500, seed: 7 }) as Iterable<any>) {
    const ops = c.ops.map((o: any) => (o.payload ? { ...o, payload: new Uint8Array(o.payload) } : o));
    const bytes = await server.handleSyncRequest(
      request(c.clientId, c.partition, [{ type: 'PUSH_COMMIT', clientCommitId: c.clientCommitId, operations: ops }]),
      ctxFor(intree, c.partition, c.actorId, c.createdAtMs),
    );
    const r = framesOf(bytes).find((f) => f.type === 'PUSH_RESULT');
    if (r?.status !== 'applied' || r.commitSeq !== c.seq) throw new Error(`in-tree push ${c.partition}/${c.seq}: ${JSON.stringify(r)}`);
  }
  db.close();
  written = { commits: WRITE_INTREE, partitions: P, ms: Date.now() - started, by: 'in-tree SqliteServerStorage 0.15.48 through the handler' };
  log('written by the in-tree storage');
  if (rest.includes('--write-only')) {
    report({ ok: true, written });
    process.exit(0);
  }
}

// 1. Swap in: this package opens the file; its first ensureSchema repairs
// the layout an older version left.
const source = native.createStorage({ url: `sqlite:${file}`, errors: server });
let started = Date.now();
await server.ensureSyncServerReady({ schema: serverSchema, storage: source });
const swapInMs = Date.now() - started;
const before: Record<string, number> = {};
for (const p of partitions) before[p] = Number(await source.getMaxCommitSeq(p));
const commitsBefore = Object.values(before).reduce((a, b) => a + b, 0);
log(`swapped in (${swapInMs} ms), ${commitsBefore} commits`);

// ---------------------------------------------------------------------------
// 2. Clients and the host's storage, which the switch replaces.

let current: any = source;
let target: any;
type Sub = { id: string; table: string; project: string; cursor: number };
type Client = { id: string; partition: string; actor: string; subs: Sub[] };
const clients: Client[] = [];
for (const p of partitions) {
  const sub = (table: string, project: string): Sub => ({ id: `${table}-${project}`, table, project, cursor: before[p] });
  clients.push({ id: `w-${p}`, partition: p, actor: `actor-w-${p}`, subs: [sub('tasks', 'proj1')] });
  clients.push({ id: `r-${p}`, partition: p, actor: `actor-r-${p}`, subs: [sub('tasks', 'proj2'), sub('notes', 'proj2'), sub('audit', 'proj3')] });
}

function pullFrames(c: Client) {
  return [
    { type: 'PULL_HEADER', limitCommits: 100, limitSnapshotRows: 100, maxSnapshotPages: 1, accept: 0b0011 },
    ...c.subs.map((s) => ({ type: 'SUBSCRIPTION', id: s.id, table: s.table, scopes: { project_id: [s.project] }, cursor: s.cursor })),
  ];
}

/** What a pull answered that a client continuing its cursors would not accept. */
function bootstrapOrReset(c: Client, frames: any[]) {
  const bad: string[] = [];
  const header = frames.find((f) => f.type === 'RESP_HEADER');
  if (header?.resetRequired) bad.push('resetRequired');
  let sub: Sub | undefined;
  for (const f of frames) {
    if (f.type === 'SUB_START') {
      sub = c.subs.find((s) => s.id === f.id);
      if (f.bootstrap || f.status !== 'active') bad.push(`${f.id}: ${f.status}${f.bootstrap ? ' bootstrap' : ''}`);
    } else if (f.type === 'SEGMENT_REF' || f.type === 'SEGMENT_INLINE') bad.push(`${sub?.id}: ${f.type}`);
    else if (f.type === 'SUB_END' && sub && (f.nextCursor < sub.cursor || f.bootstrapState)) bad.push(`${sub.id}: cursor ${sub.cursor} → ${f.nextCursor}`);
  }
  return bad;
}

function advance(c: Client, frames: any[]) {
  let sub: Sub | undefined;
  for (const f of frames) {
    if (f.type === 'SUB_START') sub = c.subs.find((s) => s.id === f.id);
    else if (f.type === 'SUB_END' && sub) sub.cursor = f.nextCursor;
  }
}

const acked: { partition: string; client: string; ccid: string; seq: number; on: string }[] = [];
const refusals: { atMs: number; what: string }[] = [];
const otherFailures: string[] = [];
const latencies: { at: number; end: number; ms: number }[] = [];
const phases: Record<string, number> = {};
/** From a push's first sending to its acknowledgement, refusals and sending again included. */
const delays: { at: number; ms: number }[] = [];
let running = true;
let cachedAfterRefusal = 0;
let firstRefusalAt: number | undefined;
let switching: Promise<void> | undefined;
let switchedAt: number | undefined;
let gateOpenAt: number | undefined;
let firstPgPushAt: number | undefined;
const nextPulls: { client: string; partition: string; actor: string; frames: unknown[]; clock: number; bytes: Uint8Array; bad: string[] }[] = [];

/** One request through the handler on the current storage; throws a coded text on an ERROR frame. */
async function send(c: Client, frames: unknown[], clock?: number) {
  const on = current;
  const bytes = await server.handleSyncRequest(request(c.id, c.partition, frames), ctxFor(on, c.partition, c.actor, clock));
  const decoded = framesOf(bytes);
  const error = decoded.find((f) => f.type === 'ERROR');
  if (error) throw new Error(`${error.code}: ${error.message}`);
  return { bytes, frames: decoded, on: on === source ? 'sqlite' : 'postgres' };
}

/**
 * The host's storage on PostgreSQL, opened once the snapshot is there (as
 * a host would prepare it), so the switch itself is a swap.
 */
let opening: Promise<void> | undefined;
function openTarget(): Promise<void> {
  opening ??= (async () => {
    target = native.createStorage({ url, schema, errors: server, maxConnections: 8 });
    await server.ensureSyncServerReady({ schema: serverSchema, storage: target });
    for (const p of partitions) await target.getMaxCommitSeq(p);
  })();
  return opening;
}

/** The switch: PostgreSQL in the old storage's place, then every client's next pull. */
function switchOver(): Promise<void> {
  switching ??= (async () => {
    await openTarget();
    current = target;
    switchedAt = Date.now();
    log('switched');
    // Every client's next pull, before any push lands on PostgreSQL.
    await Promise.all(
      clients.map(async (c) => {
        const frames = pullFrames(c);
        const clock = Date.now();
        const r = await send(c, frames, clock);
        nextPulls.push({ client: c.id, partition: c.partition, actor: c.actor, frames, clock, bytes: r.bytes, bad: bootstrapOrReset(c, r.frames) });
        advance(c, r.frames);
      }),
    );
    gateOpenAt = Date.now();
  })();
  return switching;
}

function refused(what: string) {
  const now = Date.now();
  firstRefusalAt ??= now;
  refusals.push({ atMs: now, what });
  return switchOver();
}

function opsFor(p: string, i: number) {
  const enc = (table: string, values: unknown[]) => core.encodeRow(columns[table], values);
  const id = `live-${i}`;
  const ops: any[] = [{ table: 'tasks', rowId: id, op: 'upsert', payload: enc('tasks', [id, `proj${i % PROJECTS}`, `u${i % 7}`, `${p}/${id}`, `live ${i}`, i, i % 2 === 0, i % 3 ? `n ${i}` : null]) }];
  if (i % 3 === 0) ops.push({ table: 'notes', rowId: `ln-${i}`, op: 'upsert', payload: enc('notes', [`ln-${i}`, `proj${i % PROJECTS}`, `live note ${i}`]) });
  if (i % 5 === 0) {
    // An update of a row the history wrote (its scopes and slug unchanged).
    const t = (i * 7) % 500;
    ops.push({ table: 'tasks', rowId: `t${t}`, op: 'upsert', payload: enc('tasks', [`t${t}`, `proj${t % PROJECTS}`, `u${t % 7}`, `${p}/t${t}`, `edited ${i}`, i, false, null]) });
  }
  if (i % 7 === 0) {
    const a = i % 500;
    ops.push({ table: 'audit', rowId: `a${a}`, op: 'upsert', payload: enc('audit', [`a${a}`, `proj${a % PROJECTS}`, `live-${i % 3}`]) });
  }
  return ops;
}

async function writer(c: Client) {
  for (let i = 0; running; i++) {
    await sleep(INTERVAL_MS);
    if (switching && !gateOpenAt) await switching;
    const ccid = `${c.id}-${i}`;
    const frames = [{ type: 'PUSH_COMMIT', clientCommitId: ccid, operations: opsFor(c.partition, i) }];
    const firstSent = Date.now();
    for (;;) {
      const at = performance.now();
      try {
        const wall = Date.now();
        const r = await send(c, frames);
        latencies.push({ at: wall, end: Date.now(), ms: performance.now() - at });
        const result = r.frames.find((f) => f.type === 'PUSH_RESULT');
        // `cached`: sent again after a refusal, the push had committed
        // before the mark (the request's later write was refused): the
        // client takes it as acknowledged.
        if (result?.status !== 'applied' && result?.status !== 'cached') throw new Error(`not applied: ${JSON.stringify(result)}`);
        if (result.status === 'cached') cachedAfterRefusal += 1;
        acked.push({ partition: c.partition, client: c.id, ccid, seq: result.commitSeq, on: r.on });
        delays.push({ at: firstSent, ms: Date.now() - firstSent });
        if (r.on === 'postgres') firstPgPushAt ??= Date.now();
        break;
      } catch (err: any) {
        const text = String(err?.message ?? err);
        if (!isMoved(text)) {
          otherFailures.push(`push ${ccid}: ${text.slice(0, 300)}`);
          break;
        }
        await refused(`push ${ccid}`);
      }
    }
    if (i % 5 === 4) await pull(c);
  }
}

async function pull(c: Client) {
  if (switching && !gateOpenAt) await switching;
  try {
    const r = await send(c, pullFrames(c));
    advance(c, r.frames);
  } catch (err: any) {
    const text = String(err?.message ?? err);
    if (isMoved(text)) await refused(`pull ${c.id}`);
    else otherFailures.push(`pull ${c.id}: ${text.slice(0, 300)}`);
  }
}

async function reader(c: Client) {
  while (running) {
    await sleep(INTERVAL_MS * 2);
    await pull(c);
  }
}

/** Runs the package's command; resolves with its exit code, report and stderr. */
function command(args: string[]): Promise<{ code: number | null; report: any; stderr: string; ms: number }> {
  const at = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(NODE, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => {
      let parsed: any = null;
      try {
        parsed = JSON.parse(out);
      } catch {
        // left null: the caller reports stderr
      }
      resolve({ code, report: parsed, stderr: err.slice(-2000), ms: Date.now() - at });
    });
  });
}

// ---------------------------------------------------------------------------
// 3. Load, the move, the switch.

const loops = clients.map((c) => (c.id.startsWith('w-') ? writer(c) : reader(c)));
await sleep(WARM_MS);
const moveStarted = Date.now();
let copyRun: any = null;
let finalRun: any = null;
let moved: any;
if (MOVE === 'command') {
  const to = url;
  copyRun = await command(['copy', `sqlite:${file}`, to, '--schema', schema]);
  if (copyRun.code !== 0) throw new Error(`copy exited ${copyRun.code}: ${copyRun.stderr}`);
  log(`copied ${copyRun.report?.rows} rows in ${copyRun.ms} ms`);
  phases.copied = Date.now();
  await openTarget();
  await sleep(BETWEEN_MS);
  phases.final = Date.now();
  finalRun = await command(['copy', `sqlite:${file}`, to, '--schema', schema, '--final', '--verify']);
  if (finalRun.code !== 0) throw new Error(`copy --final exited ${finalRun.code}: ${finalRun.stderr}`);
  moved = finalRun.report;
  log('final pass done');
  // A host that wrote nothing since learns it at its next write; this one
  // always writes, so the refusal comes: wait for the switch it starts.
  const deadline = Date.now() + 10_000;
  while (!switching && Date.now() < deadline) await sleep(5);
  if (!switching) throw new Error('no request was refused after the final pass');
} else {
  // The storage on PostgreSQL is opened once the snapshot is there (the
  // first catch-up pass reports).
  const onProgress = (p: any) => {
    if (p.phase === 'catch-up' && !opening) {
      phases.copied = Date.now();
      void openTarget();
    }
  };
  moved = await source.copyTo(url, { schema, finalPass: true, verify: true, onProgress });
  await switchOver();
}
await switching;
const moveEnded = Date.now();
await sleep(AFTER_MS);
running = false;
await Promise.all(loops);
await source.close();
log('load stopped');

// ---------------------------------------------------------------------------
// 4. Checks.

// Every acknowledged push is on PostgreSQL with its sequence.
let missing = 0;
let firstMissing: unknown;
for (const a of acked) {
  const r = await target.getPushResult(a.partition, a.client, a.ccid);
  if (r?.status !== 'applied' || Number(r.commitSeq) !== a.seq) {
    missing += 1;
    firstMissing ??= { ...a, found: r ?? null };
  }
}
const pgMax: Record<string, number> = {};
for (const p of partitions) pgMax[p] = Number(await target.getMaxCommitSeq(p));
await target.close();

// The mark on the file, and a copy of it with the mark cleared: the host
// on SQLite the next pulls are compared with.
const markRun = await command(['moved', `sqlite:${file}`]);
// The mark stops the in-tree storage too (another library on the file).
let intreeRefused = '';
{
  const db = new server.BunSqliteDatabase(file);
  try {
    const intree = new server.SqliteServerStorage(db);
    await intree.ensureSchema(server.compileSchema(serverSchema));
    const c = clients[0];
    const bytes = await server.handleSyncRequest(
      request(c.id, c.partition, [{ type: 'PUSH_COMMIT', clientCommitId: 'intree-after-move', operations: opsFor(c.partition, 1_000_000) }]),
      ctxFor(intree, c.partition, c.actor),
    );
    const error = framesOf(bytes).find((f) => f.type === 'ERROR');
    intreeRefused = error ? `${error.code}: ${error.message}` : JSON.stringify(framesOf(bytes).find((f) => f.type === 'PUSH_RESULT'));
  } catch (err: any) {
    intreeRefused = String(err?.message ?? err);
  } finally {
    db.close();
  }
}
const ref = `${file}.ref`;
for (const s of ['', '-wal', '-shm']) rmSync(ref + s, { force: true });
copyFileSync(file, ref);
if (existsSync(`${file}-wal`)) copyFileSync(`${file}-wal`, `${ref}-wal`);
const clearRun = await command(['moved', `sqlite:${ref}`, '--clear']);
const reference = native.createStorage({ url: `sqlite:${ref}`, errors: server });
await server.ensureSyncServerReady({ schema: serverSchema, storage: reference });
current = reference;
let identical = 0;
let firstDiff: unknown;
for (const n of nextPulls) {
  const c = clients.find((x) => x.id === n.client) as Client;
  const bytes = await server.handleSyncRequest(request(c.id, c.partition, n.frames), ctxFor(reference, c.partition, c.actor, n.clock));
  if (Buffer.compare(Buffer.from(bytes), Buffer.from(n.bytes)) === 0) identical += 1;
  else firstDiff ??= { client: n.client, bytes: [bytes.length, n.bytes.length] };
}
const movedMax: Record<string, number> = {};
for (const p of partitions) movedMax[p] = Number(await reference.getMaxCommitSeq(p));
await reference.close();
for (const s of ['', '-wal', '-shm']) rmSync(ref + s, { force: true });

const finalPass = moved.finalPass;
const stats = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const pct = (q: number) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0);
  return { n: xs.length, p50: pct(0.5), p99: pct(0.99), max: pct(1) };
};
// Push latency by what the move was doing when the push was sent.
const bounds: [string, number][] = [
  ['beforeCopy', moveStarted],
  ['snapshot', phases.copied ?? moveStarted],
  ['between', phases.final ?? moveStarted],
  ['catchUp', finalPass.lockedAtMs ?? finalPass.startedAtMs],
  ['finalPass', finalPass.endedAtMs],
  ['refusedToSwitch', switchedAt ?? finalPass.endedAtMs],
  ['nextPulls', gateOpenAt ?? finalPass.endedAtMs],
  ['onPostgres', Infinity],
];
const byPhase: Record<string, ReturnType<typeof stats>> = {};
for (let i = 0; i < bounds.length; i++) {
  const lo = i === 0 ? -Infinity : bounds[i - 1][1];
  const xs = delays.filter((l) => l.at >= lo && l.at < bounds[i][1]).map((l) => l.ms);
  if (xs.length) byPhase[bounds[i][0]] = stats(xs);
}
const bootstraps = nextPulls.filter((n) => n.bad.length > 0);
const lastRefusal = refusals.length ? Math.max(...refusals.map((r) => r.atMs)) : undefined;
const ackedSqlite = acked.filter((a) => a.on === 'sqlite').length;
const verifyEqual = moved.verify?.equal === true;
report({
  ok:
    missing === 0 &&
    otherFailures.length === 0 &&
    verifyEqual &&
    identical === nextPulls.length &&
    bootstraps.length === 0 &&
    isMoved(intreeRefused) &&
    firstRefusalAt !== undefined &&
    firstRefusalAt >= finalPass.startedAtMs &&
    switchedAt !== undefined &&
    Math.max(switchedAt, lastRefusal ?? 0) - firstRefusalAt <= 1000,
  move: MOVE,
  written,
  swapInMs,
  partitions: P,
  commitsBefore,
  commitsMoved: Object.values(movedMax).reduce((a, b) => a + b, 0),
  commitsAtEnd: Object.values(pgMax).reduce((a, b) => a + b, 0),
  acked: { total: acked.length, onSqlite: ackedSqlite, onPostgres: acked.length - ackedSqlite, missing, ...(firstMissing ? { firstMissing } : {}) },
  otherFailures: otherFailures.slice(0, 5),
  // Each request's own time; then, by when a push was first sent, how long
  // until it was acknowledged (waiting, refused, sent again included).
  pushLatencyMs: { requests: stats(latencies.map((l) => l.ms)), toAckByPhase: byPhase },
  cachedAfterRefusal,
  copy: copyRun && { ms: copyRun.ms, rows: copyRun.report?.rows, rowsPerSec: copyRun.report?.rowsPerSec, mbPerSec: copyRun.report?.mbPerSec },
  finalCommand: finalRun && { ms: finalRun.ms },
  moveMs: moveEnded - moveStarted,
  passes: (moved.catchUp ?? []).map((p: any) => ({ commits: p.commits, rows: p.rows, ms: p.elapsedMs })),
  finalPass: {
    commits: finalPass.commits,
    writesHeldMs: finalPass.writesHeldMs,
    lockWaitMs: finalPass.lockWaitMs,
    elapsedMs: finalPass.elapsedMs,
    ...(finalPass.heldMs ? { heldMs: finalPass.heldMs } : {}),
  },
  refused: {
    count: refusals.length,
    beforeFinalPass: refusals.filter((r) => r.atMs < finalPass.startedAtMs).length,
    firstAfterMarkMs: firstRefusalAt !== undefined ? firstRefusalAt - finalPass.endedAtMs : null,
    windowMs: firstRefusalAt !== undefined && switchedAt !== undefined ? Math.max(switchedAt, lastRefusal ?? 0) - firstRefusalAt : null,
    toFirstPgPushMs: firstRefusalAt !== undefined && firstPgPushAt !== undefined ? firstPgPushAt - firstRefusalAt : null,
    nextPullsMs: gateOpenAt !== undefined && switchedAt !== undefined ? gateOpenAt - switchedAt : null,
  },
  verify: { equal: verifyEqual, rows: moved.verify?.rows, ...(verifyEqual ? {} : { firstDifference: moved.verify?.firstDifference }) },
  nextPulls: { compared: nextPulls.length, identical, bootstrapsOrResets: bootstraps.map((b) => ({ client: b.client, bad: b.bad })), ...(firstDiff ? { firstDiff } : {}) },
  mark: { file: markRun.report?.moved?.target ?? null, cleared: clearRun.report?.cleared ?? null, intreeRefused: intreeRefused.slice(0, 200) },
});
