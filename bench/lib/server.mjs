// Host-level workloads: a storage behind @syncular/server's own request
// handler (`handleSyncRequest(bytes, ctx)`), driven with request bytes the
// way a host's HTTP route would, so the figures include everything the
// server does around the storage (decoding, validation, scope resolution,
// the client record each request writes, response encoding).
//
// The handler and the wire codec come from the @syncular/server entry named
// by `--server` and the @syncular/core package it resolves; nothing of
// either is part of this repository.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { encodeTask, serverSchema, TABLE } from './fixture.mjs';

const now = () => Number(process.hrtime.bigint()) / 1e3; // µs
const EPOCH = 'bench-log-epoch';
const ACTOR = 'bench-actor';
// Rows lane, inline or by reference (bits 0 and 1): what every client accepts.
const ACCEPT_ROWS = 0b0011;

/** The calling thread's CPU µs, user and system (Node ≥ 23.9, bun), else undefined. */
function threadCpu() {
  if (typeof process.threadCpuUsage !== 'function') return undefined;
  return process.threadCpuUsage();
}

/** The CPU clocks now: every thread's, and the calling thread's where the runtime tells. */
function cpuNow() {
  return { all: process.cpuUsage(), thread: threadCpu() };
}

/**
 * CPU µs per unit since `c0` (cpuNow): every thread, and the calling
 * thread with the part of it spent in the kernel (undefined where the
 * runtime does not tell).
 */
function cpuPer(c0, units) {
  const all = process.cpuUsage(c0.all);
  const t1 = threadCpu();
  const known = c0.thread !== undefined && t1 !== undefined;
  return {
    cpuUs: (all.user + all.system) / units,
    threadCpuUs: known ? (t1.user + t1.system - c0.thread.user - c0.thread.system) / units : undefined,
    threadSysUs: known ? (t1.system - c0.thread.system) / units : undefined,
  };
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** The package entry an ESM import of `packageDir` would load, for the runtime at hand. */
function packageEntry(packageDir) {
  const manifest = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
  let target = manifest.exports?.['.'] ?? manifest.exports;
  const conditions = typeof Bun !== 'undefined' ? ['bun', 'import', 'node', 'default'] : ['import', 'node', 'default'];
  while (target && typeof target === 'object') {
    const key = conditions.find((c) => c in target);
    if (!key) break;
    target = target[key];
  }
  return join(packageDir, typeof target === 'string' ? target : (manifest.module ?? manifest.main ?? 'index.js'));
}

/**
 * The @syncular/core the server entry at `serverPath` imports (the wire
 * codec the bench encodes requests and decodes responses with).
 */
export async function loadCore(serverPath) {
  let entry;
  if (typeof Bun !== 'undefined') {
    entry = Bun.resolveSync('@syncular/core', dirname(serverPath));
  } else {
    for (let dir = dirname(serverPath); ; dir = dirname(dir)) {
      const candidate = join(dir, 'node_modules', '@syncular', 'core');
      if (existsSync(join(candidate, 'package.json'))) {
        entry = packageEntry(candidate);
        break;
      }
      if (dirname(dir) === dir) throw new Error(`no @syncular/core found above ${serverPath}`);
    }
  }
  const core = await import(pathToFileURL(entry).href);
  for (const name of ['encodeMessage', 'decodeMessage', 'decodeRowsSegment']) {
    if (typeof core[name] !== 'function') throw new Error(`@syncular/core at ${entry} exports no ${name}`);
  }
  return core;
}

let arrivals = false;

/**
 * From now on every host's request starts in an event-loop turn of its
 * own (after a setImmediate), as a request read from a socket starts in
 * the turn that read it: the loop then turns between requests for every
 * storage, instead of only where a storage waits for a turn.
 */
export function arriveInTurns() {
  arrivals = true;
}

async function arrive(server, bytes, ctx) {
  await new Promise(setImmediate);
  return server.handleSyncRequest(bytes, ctx);
}

/**
 * A sync request context over `storage` for one partition, as a host sets
 * one up per authenticated request: the schema, one actor, a scope resolver
 * allowing project p1, an in-memory segment store (or `segments`). Returns
 * helpers to build request bytes and run them through the handler.
 * `schema` replaces the bench's own (the same `tasks` table with, say, a
 * unique index).
 */
export async function createHost(server, core, storage, partition, { schema = serverSchema, segments } = {}) {
  if (typeof server?.handleSyncRequest !== 'function') throw new Error('--server exports no handleSyncRequest');
  const ctx = {
    partition,
    actorId: ACTOR,
    schema,
    storage,
    segments: segments ?? new server.MemorySegmentStore(),
    resolveScopes: () => ({ project_id: ['p1'] }),
  };
  // The partition's log epoch is fixed up front (as a host's first touch
  // would), so every request can name it.
  await storage.ensureSchema(server.compileSchema(schema));
  await storage.touchPartition(partition, Date.now(), EPOCH);
  const wireVersion = core.PROTOCOL_WIRE_VERSION ?? 2;
  return {
    storage,
    partition,
    core,
    request(clientId, frames) {
      return core.encodeMessage({
        wireVersion,
        msgKind: 'request',
        frames: [{ type: 'REQ_HEADER', clientId, schemaVersion: schema.version, logEpoch: EPOCH }, ...frames],
      });
    },
    handle: (bytes) => (arrivals ? arrive(server, bytes, ctx) : server.handleSyncRequest(bytes, ctx)),
    decode(bytes) {
      const message = core.decodeMessage(bytes);
      if (message.msgKind !== 'response') throw new Error('expected a response message');
      const error = message.frames.find((f) => f.type === 'ERROR');
      if (error) throw new Error(`host answered ${error.code}: ${error.message}`);
      return message.frames;
    },
  };
}

function pushFrame(clientCommitId, rows, n) {
  return {
    type: 'PUSH_COMMIT',
    clientCommitId,
    operations: rows.map(([rowId, projectId]) => ({
      table: TABLE,
      rowId,
      op: 'upsert',
      payload: encodeTask(rowId, projectId, n),
    })),
  };
}

function pullFrames(cursor, bootstrapState) {
  return [
    // The limits a client sends by default (0 = the server's defaults:
    // 1,000 changes, 1,000-row pages, 4 pages a request), spelled out.
    { type: 'PULL_HEADER', limitCommits: 100, limitSnapshotRows: 1000, maxSnapshotPages: 4, accept: ACCEPT_ROWS },
    {
      type: 'SUBSCRIPTION',
      id: 'tasks',
      table: TABLE,
      scopes: { project_id: ['p1'] },
      cursor,
      ...(bootstrapState !== undefined ? { bootstrapState } : {}),
    },
  ];
}

/** Throws unless every PUSH_RESULT of `frames` is applied; returns how many there were. */
function appliedCount(host, responseBytes) {
  let applied = 0;
  for (const f of host.decode(responseBytes)) {
    if (f.type !== 'PUSH_RESULT') continue;
    if (f.status !== 'applied' || f.commitSeq === undefined) {
      throw new Error(`push ${f.clientCommitId} not applied: ${JSON.stringify(f.results)}`);
    }
    applied += 1;
  }
  return applied;
}

async function expectLogGrowth(host, before, commits) {
  const grew = Number(await host.storage.getMaxCommitSeq(host.partition)) - Number(before);
  if (grew !== commits) {
    throw new Error(`the log grew by ${grew} commits, expected ${commits}`);
  }
}

/** Sequential one-commit requests of `ops` upserts each (the same rows every commit). */
export async function pushSequential(host, ops, commits, tag = '') {
  const bytes = Array.from({ length: commits }, (_, c) =>
    host.request('bench-client', [
      pushFrame(
        `seq-${tag}${ops}-${c}`,
        Array.from({ length: ops }, (_, o) => [`row-${o}`, 'p1']),
        c,
      ),
    ]),
  );
  const before = await host.storage.getMaxCommitSeq(host.partition);
  const responses = new Array(commits);
  const latencies = new Float64Array(commits);
  const cpu0 = cpuNow();
  const start = now();
  for (let c = 0; c < commits; c++) {
    const t = now();
    responses[c] = await host.handle(bytes[c]);
    latencies[c] = now() - t;
  }
  const elapsed = now() - start;
  // CPU µs per commit: every thread of the process, and the calling thread alone where the runtime tells.
  const { cpuUs, threadCpuUs, threadSysUs } = cpuPer(cpu0, commits);
  for (const r of responses) if (appliedCount(host, r) !== 1) throw new Error('a push request had no PUSH_RESULT');
  await expectLogGrowth(host, before, commits);
  const series = latencies.slice();
  latencies.sort();
  return { commitsPerSec: (commits / elapsed) * 1e6, p50Us: percentile(latencies, 50), p99Us: percentile(latencies, 99), series, cpuUs, threadCpuUs, threadSysUs };
}

/**
 * `clients` clients, each pushing `each` one-op commits in sequence, all at
 * once on one partition. `hosts` is one host for every client, or one host
 * per client (each its own request context over the same storage, as a host
 * sets one up per request; bench/alternate.mjs's floor gives each client a
 * storage of its own that replays that client's answers). Returns commits/s
 * and the CPU µs per commit (every thread; the calling thread where the
 * runtime tells).
 */
export async function pushConcurrent(hosts, clients, each) {
  const hostOf = Array.isArray(hosts) ? (w) => hosts[w] : () => hosts;
  const first = hostOf(0);
  const bytes = Array.from({ length: clients }, (_, w) =>
    Array.from({ length: each }, (_, c) => first.request(`client-${w}`, [pushFrame(`conc-${w}-${c}`, [[`w${w}`, 'p1']], c)])),
  );
  const before = await first.storage.getMaxCommitSeq(first.partition);
  const responses = [];
  const cpu0 = cpuNow();
  const start = now();
  await Promise.all(
    bytes.map(async (mine, w) => {
      const host = hostOf(w);
      for (const b of mine) responses.push(await host.handle(b));
    }),
  );
  const elapsed = now() - start;
  const commits = clients * each;
  const cpu = cpuPer(cpu0, commits);
  let applied = 0;
  for (const r of responses) applied += appliedCount(first, r);
  if (applied !== commits) throw new Error(`${applied} of ${commits} concurrent pushes applied`);
  await expectLogGrowth(first, before, commits);
  return { commitsPerSec: (commits / elapsed) * 1e6, ...cpu };
}

/**
 * Fills the partition through the handler: `commits` commits of `ops`
 * upserts of fresh rows (`${prefix}${commit}-${op}`, project p1), several
 * commits per request (at most 500 operations, the server's cap).
 */
export async function fill(host, prefix, commits, ops) {
  const perRequest = Math.max(1, Math.min(100, Math.floor(500 / ops)));
  const before = await host.storage.getMaxCommitSeq(host.partition);
  for (let c = 0; c < commits; c += perRequest) {
    const frames = [];
    for (let k = c; k < Math.min(commits, c + perRequest); k++) {
      frames.push(pushFrame(`${prefix}${k}`, Array.from({ length: ops }, (_, o) => [`${prefix}${k}-${o}`, 'p1']), k));
    }
    const applied = appliedCount(host, await host.handle(host.request('bench-filler', frames)));
    if (applied !== frames.length) throw new Error(`fill: ${applied} of ${frames.length} commits applied`);
  }
  await expectLogGrowth(host, before, commits);
}

/**
 * One client pulling 100-commit windows at spread cursors over a log of
 * one-change commits; every pull must deliver 100 changes.
 */
export async function windowPulls(host, pulls) {
  const max = Number(await host.storage.getMaxCommitSeq(host.partition));
  if (max < 101) throw new Error(`window pulls need more than 100 commits, the log has ${max}`);
  const bytes = Array.from({ length: pulls }, (_, i) => host.request('puller', pullFrames((i * 97) % (max - 100))));
  const responses = new Array(pulls);
  const cpu0 = cpuNow();
  const start = now();
  for (let i = 0; i < pulls; i++) responses[i] = await host.handle(bytes[i]);
  const elapsed = now() - start;
  const cpu = cpuPer(cpu0, pulls);
  checkWindowPulls(host, responses, 100);
  return { pullsPerSec: (pulls / elapsed) * 1e6, ...cpu };
}

/**
 * Every window pull's answer served incrementally, with `fewest` to 100
 * changes (a limit of commits bounds changes without splitting a commit).
 */
export function checkWindowPulls(host, responses, fewest) {
  for (const r of responses) {
    const frames = host.decode(r);
    const sub = frames.find((f) => f.type === 'SUB_START');
    if (sub?.status !== 'active' || sub.bootstrap) throw new Error(`window pull not served incrementally: ${JSON.stringify(sub)}`);
    let changes = 0;
    for (const f of frames) if (f.type === 'COMMIT') changes += f.changes.length;
    if (changes < fewest || changes > 100) throw new Error(`a window pull delivered ${changes} changes, expected ${fewest === 100 ? 100 : `${fewest} to 100`}`);
  }
}

/**
 * The pages of a fresh client's bootstrap: the pull request `pull(state)`
 * makes with no state, then each carrying the previous answer's bootstrap
 * state, until the section ends without one. Every page must come inline.
 * Answers the pages' segments and the number of requests.
 */
export async function bootstrapPages(host, clientId, expectedRows, pull) {
  const segments = [];
  let requests = 0;
  let state;
  for (;;) {
    const frames = host.decode(await host.handle(host.request(clientId, pull(state))));
    requests += 1;
    let end;
    for (const f of frames) {
      if (f.type === 'SEGMENT_INLINE') segments.push(f.payload);
      else if (f.type === 'SEGMENT_REF') throw new Error('bootstrap: a page went to the segment store (expected inline pages)');
      else if (f.type === 'SUB_END') end = f;
    }
    if (!end) throw new Error('bootstrap: a response had no SUB_END');
    state = end.bootstrapState;
    if (state === undefined || state === null) break;
    if (requests > expectedRows) throw new Error('bootstrap does not finish');
  }
  return { segments, requests };
}

/** The rows in bootstrap pages' segments, which must be `expectedRows`. */
export function bootstrapRows(host, segments, expectedRows) {
  let rows = 0;
  for (const s of segments) for (const block of host.core.decodeRowsSegment(s).blocks) rows += block.length;
  if (rows !== expectedRows) throw new Error(`bootstrap delivered ${rows} rows, expected ${expectedRows}`);
  return rows;
}

/**
 * A fresh client bootstrapping the table (bootstrapPages). Every row of
 * project p1 must arrive.
 */
export async function bootstrap(host, clientId, expectedRows) {
  const cpu0 = cpuNow();
  const start = now();
  const { segments, requests } = await bootstrapPages(host, clientId, expectedRows, (state) => pullFrames(-1, state));
  const elapsed = now() - start;
  // CPU µs per 1,000 rows.
  const cpu = cpuPer(cpu0, expectedRows / 1000);
  const rows = bootstrapRows(host, segments, expectedRows);
  return { rowsPerSec: (rows / elapsed) * 1e6, rows, requests, ...cpu };
}
