// One figure for several storages in one process, in alternating rounds:
// on a machine whose speed drifts (a VM's steal time), rounds of each
// storage side by side compare better than runs minutes apart. Host
// figures: a 100-commit window pull, a push of 1 or 10 ops, 16 clients
// pushing at once (`clients16`: run.mjs's host workload, 100 one-op commits
// each on one partition, each client with a request context of its own), a
// bootstrap of 20,000 rows in 1,000-row pages. Storage-level figures: the registered
// point query and 10k-row aggregate of run.mjs's `queries` workload, and
// scanRowsByIndex lookups of 100 or 1,000 rows (`index100`, `index1000`:
// 200 a round over 2,000 rows of one indexed value, every other lookup
// after a cursor).
// `fresh1` is a host just started: each round opens a new storage on a new
// file, pushes 20 one-op commits to warm up, then times 400 more (a host
// restarts on every deploy; issue 50 saw ours pay about 2x there).
//
//   bun bench/alternate.mjs --server <tree>/packages/server/src/index-bun.ts \
//     [--figure window|push1|push10|clients16|fresh1|bootstrap|point|aggregate|index100|index1000] [--rounds N] \
//     [--floor] [--profile] [--collect] [--arrive] --module A.mjs --module B.mjs ...
//
// Each module exports createStorage(context) and label, as for run.mjs.
// The order of the storages turns by one each round (the first of a round
// is at a disadvantage). Prints each storage's median and every round,
// then the first storage's median over each other's, and the median of
// the per-round ratios (each pair measured minutes apart at most).
//
// --floor (host figures): one more contender, the host over a second
// database of the first module whose answers are replayed from memory
// (lib/floor.mjs): what the handler costs when the storage costs nothing,
// the most any storage can gain on the figure. For push figures the
// answers of one round's push sequence are recorded and replayed each
// round. Each storage's share of the figure's unit (a commit, a pull, 1,000
// rows) over the floor's is printed three ways: time (from the median
// rates), CPU of the calling thread (with its kernel part) and CPU of
// every thread; then the first
// storage's shares over each other's (issue 50 asks ours ≤ 0.5× the
// in-tree storage's). clients16's floor gives each
// client a replaying storage of its own (lib/floor.mjs, replayingEach):
// one client's calls come in the same order every round however the
// clients interleave, so each request gets the answers it got recorded.
//
// Host figures also print CPU µs per unit (process.cpuUsage: every
// thread; and the calling thread alone where the runtime has
// process.threadCpuUsage), and fresh1 the mean latency of each 100 timed
// pushes.
// --collect: a full garbage collection before each storage's round (bun:
// `Bun.gc(true)`; Node: `gc()`), so no round pays for the garbage of the
// round before it. It steadied bun's rounds here; under Node 24 it made
// them less steady (bench/README.md, "How steady a share is").
// With --floor, each share ratio is also printed as the median of per-round
// ratios (each round's shares against that round's floor).
// --arrive (host figures): each request starts in an event-loop turn of
// its own (a setImmediate before the handler), as a request read from a
// socket does. Without it a round's requests follow one another in
// promise turns, and the loop turns only where a storage waits for one:
// its deferred work (V8's tasks among it) is then paid inside the rounds
// of a storage that yields and after those of one that never does.
// --profile (fresh1): every storage member the handler calls is timed in
// the timed pushes (bench/lib/profile.mjs) and printed as a table; the
// Proxy's own cost then weighs on every round.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadCore, createHost, arriveInTurns, fill, windowPulls, pushSequential, pushConcurrent, bootstrap } from './lib/server.mjs';
import { populate, populateIndexed, queries, indexLookups } from './lib/workloads.mjs';
import { replaying, replayingEach } from './lib/floor.mjs';
import { CallProfile, profileTable, profiled } from './lib/profile.mjs';
import { benchArgs } from './lib/args.mjs';
import { collectGarbage } from './lib/collect.mjs';

const figures = ['window', 'push1', 'push10', 'clients16', 'fresh1', 'bootstrap', 'point', 'aggregate', 'index100', 'index1000'];
const { serverPath, modules, figure, rounds, flags } = benchArgs('alternate.mjs', { figures, rounds: 12, flags: ['--floor', '--profile', '--collect', '--arrive'] });
const { floor, profile, collect, arrive } = flags;
const lookupRows = { index100: 100, index1000: 1000 }[figure];
const storageLevel = figure === 'point' || figure === 'aggregate' || lookupRows !== undefined;
const pushFigure = figure === 'push1' || figure === 'push10' || figure === 'clients16';
const CLIENTS = 16;
if (floor && storageLevel) throw new Error('--floor: only with a host figure');
if (arrive && storageLevel) throw new Error('--arrive: only with a host figure');
if (arrive) arriveInTurns();
if (profile && figure !== 'fresh1') throw new Error('--profile: only with --figure fresh1');

const server = await import(pathToFileURL(serverPath).href);
const core = await loadCore(serverPath);
const dir = mkdtempSync(join(tmpdir(), 'syncular-alternate-'));
const runs = [];
try {
  for (const [k, path] of modules.entries()) {
    const mod = await import(pathToFileURL(path).href);
    const storage = await mod.createStorage({ path: join(dir, `db${k}.sqlite`), server });
    const host = storageLevel ? undefined : await createHost(server, core, storage, 'window');
    if (figure === 'fresh1') runs.push({ label: mod.label ?? path, mod, k, storage, values: [] });
    else if (pushFigure) runs.push({ label: mod.label ?? path, storage, values: [] });
    if (figure === 'fresh1' || pushFigure) {
      if (floor && k === 0) runs.push(await pushFloor(mod, path));
      continue;
    }
    if (figure === 'window') await fill(host, 'w', 3000, 1);
    if (figure === 'bootstrap') await fill(host, 'b', 200, 100);
    if (lookupRows !== undefined) await populateIndexed(storage);
    else if (storageLevel) await populate(storage, 10_000, 0);
    runs.push({ label: mod.label ?? path, host, storage, values: [] });
    if (floor && k === 0) {
      const real = await mod.createStorage({ path: join(dir, 'floor.sqlite'), server });
      const replay = replaying(real);
      const floorHost = await createHost(server, core, replay.storage, 'window');
      if (figure === 'window') await fill(floorHost, 'w', 3000, 1);
      else await fill(floorHost, 'b', 200, 100);
      replay.record();
      if (figure === 'window') await windowPulls(floorHost, 300);
      else await bootstrap(floorHost, 'boot-floor', 20_000);
      replay.replay();
      runs.push({ label: `floor (${mod.label ?? path} replayed)`, host: floorHost, storage: real, values: [], replay });
    }
  }
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < runs.length; k++) {
      const run = runs[(k + r) % runs.length];
      run.replay?.replay();
      if (collect) collectGarbage();
      const v =
        figure === 'fresh1'
          ? await fresh(run, r)
          : figure === 'point'
          ? (await queries(run.storage, 10_000, 300, 0)).queryPointsPerSec
          : figure === 'aggregate'
            ? (await queries(run.storage, 10_000, 0, 150)).queryAggregatesPerSec
            : lookupRows !== undefined
            ? (await indexLookups(run.storage, 200, lookupRows)).lookupsPerSec
            : figure === 'window'
          ? keepCpu(run, await windowPulls(run.host, 300), 'pullsPerSec')
          : figure === 'bootstrap'
            ? keepCpu(run, await bootstrap(run.host, `boot-${r}`, 20_000), 'rowsPerSec')
            : keepCpu(run, await pushRound(run.through ?? run.storage, r));
      run.values.push(v);
    }
  }
} finally {
  for (const run of runs) await run.storage.close?.();
  rmSync(dir, { recursive: true, force: true });
}
/**
 * One round of push1, push10 or clients16: a partition of its own each
 * round (the pushes' commit ids repeat). clients16: 16 clients, each with
 * a host (request context) of its own over `storage`, or over its own
 * element of `storage` when that is an array (the floor's).
 */
async function pushRound(storage, r) {
  if (figure !== 'clients16') return pushSequential(await createHost(server, core, storage, `push-${r}`), figure === 'push1' ? 1 : 10, 500);
  const hosts = [];
  for (let w = 0; w < CLIENTS; w++) hosts.push(await createHost(server, core, Array.isArray(storage) ? storage[w] : storage, `clients-${r}`));
  return pushConcurrent(hosts, CLIENTS, 100);
}

/**
 * The floor of a push figure: a storage of `mod` on a file of its own,
 * whose answers to one round (fresh1: the set-up, the warm-up and the
 * timed pushes of one new storage) are recorded, then replayed in every
 * round. The handler makes the same calls in the same order each round:
 * the requests repeat, and it acts on the answers only.
 */
async function pushFloor(mod, path) {
  const real = await mod.createStorage({ path: join(dir, 'floor.sqlite'), server });
  if (figure === 'clients16') {
    const each = replayingEach(real, CLIENTS);
    each.record();
    await pushRound(each.storages, 'floor');
    each.replay();
    return { label: `floor (${mod.label ?? path} replayed)`, storage: real, through: each.storages, values: [], replay: each };
  }
  const replay = replaying(real);
  replay.record();
  if (figure === 'fresh1') await freshPushes(replay.storage, 'floor');
  else await pushRound(replay.storage, 'floor');
  replay.replay();
  return { label: `floor (${mod.label ?? path} replayed)`, storage: real, through: replay.storage, values: [], replay };
}

/** fresh1's requests on a storage just opened: 20 warm-up pushes, then 400 timed (the answer of pushSequential). */
async function freshPushes(storage, r, calls) {
  const host = await createHost(server, core, storage, `fresh-${r}`);
  await pushSequential(host, 1, 20, 'warm-');
  calls?.reset();
  return pushSequential(host, 1, 400);
}

/**
 * A new storage on a new file, 20 warm-up pushes, then 400 timed. Keeps
 * the CPU µs per push (every thread; the calling thread where the runtime
 * tells), the mean latency of each 100 timed pushes, and with --profile
 * the per-member times of the timed pushes.
 */
async function fresh(run, r) {
  // The floor's storage answers from memory (and stays open).
  const real = run.through ? undefined : await run.mod.createStorage({ path: join(dir, `fresh-${run.k}-${r}.sqlite`), server });
  const calls = profile ? new CallProfile() : undefined;
  const through = run.through ?? real;
  const storage = calls ? profiled(through, calls) : through;
  try {
    const out = await freshPushes(storage, r, calls);
    if (calls) mergeProfile((run.calls ??= new CallProfile()), calls);
    keepCpu(run, out);
    const buckets = [];
    for (let i = 0; i < out.series.length; i += 100) {
      const part = out.series.subarray(i, i + 100);
      buckets.push(part.reduce((a, b) => a + b, 0) / part.length);
    }
    (run.buckets ??= []).push(buckets);
    return out.commitsPerSec;
  } finally {
    await real?.close?.();
  }
}
/** Keeps a host figure's CPU µs per unit (a commit, a pull, 1,000 rows); returns its rate. */
function keepCpu(run, out, rate = 'commitsPerSec') {
  (run.cpu ??= []).push(out.cpuUs);
  if (out.threadCpuUs !== undefined) (run.threadCpu ??= []).push(out.threadCpuUs);
  if (out.threadSysUs !== undefined) (run.threadSys ??= []).push(out.threadSysUs);
  return out[rate];
}
function mergeProfile(into, from) {
  for (const [member, m] of from.members) {
    const t = into.members.get(member);
    if (t === undefined) into.members.set(member, { ...m });
    else for (const k of Object.keys(m)) t[k] += m[k];
  }
}
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const unit = { window: 'pulls/s', bootstrap: 'rows/s', point: 'queries/s', aggregate: 'queries/s', index100: 'lookups/s', index1000: 'lookups/s' }[figure] ?? 'commits/s';
for (const run of runs) console.log(`${run.label}: median ${median(run.values).toFixed(0)} ${unit}; rounds ${run.values.map((v) => v.toFixed(0)).join(' ')}`);
const fmt = (x) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
// The unit a host figure's CPU and shares are per, and how many of them a second of its rate is.
const per = { window: 'pull', bootstrap: '1,000 rows' }[figure] ?? 'commit';
const unitsPerRate = figure === 'bootstrap' ? 1000 : 1;
for (const run of runs) {
  if (run.cpu) console.log(`${run.label}: CPU µs per ${per}, every thread: median ${fmt(median(run.cpu))}; rounds ${run.cpu.map(fmt).join(' ')}`);
  if (run.threadCpu) console.log(`${run.label}: CPU µs per ${per}, calling thread: median ${fmt(median(run.threadCpu))}; rounds ${run.threadCpu.map(fmt).join(' ')}`);
  if (run.threadSys) console.log(`${run.label}: of which in the kernel: median ${fmt(median(run.threadSys))}; rounds ${run.threadSys.map(fmt).join(' ')}`);
  if (run.buckets) {
    const cols = run.buckets[0].map((_, j) => median(run.buckets.map((b) => b[j])));
    console.log(`${run.label}: mean µs per push in each 100 timed pushes (median over rounds): ${cols.map(fmt).join(' ')}`);
  }
}
if (profile) console.log(profileTable('profile, fresh host, timed pushes (calls per push)', runs.map((r) => r.label), runs.map((r) => r.calls.summary(400 * rounds))));
const floorRun = runs.find((r) => r.replay !== undefined && r.cpu !== undefined);
if (floorRun) {
  // Each storage's share of a unit: its time (from the median rate), CPU of
  // the calling thread and CPU of every thread, each minus the floor's.
  const wall = (run) => (1e6 * unitsPerRate) / median(run.values);
  const shares = new Map();
  for (const run of runs) {
    if (run === floorRun || !run.cpu) continue;
    const share = {
      wall: wall(run) - wall(floorRun),
      thread: run.threadCpu && floorRun.threadCpu ? median(run.threadCpu) - median(floorRun.threadCpu) : undefined,
      kernel: run.threadSys && floorRun.threadSys ? median(run.threadSys) - median(floorRun.threadSys) : undefined,
      all: median(run.cpu) - median(floorRun.cpu),
    };
    shares.set(run, share);
    const kernel = share.kernel === undefined ? '' : ` (kernel ${fmt(share.kernel)})`;
    const thread = share.thread === undefined ? '' : `, CPU calling thread ${fmt(share.thread)}${kernel}`;
    console.log(`${run.label}: the storage's share, µs per ${per} over the floor's: time ${fmt(share.wall)}${thread}, CPU every thread ${fmt(share.all)}`);
  }
  const first = shares.get(runs[0]);
  for (const [run, share] of shares) {
    if (run === runs[0] || first === undefined) continue;
    const ratio = (k) => (first[k] === undefined || share[k] === undefined ? 'n/a' : `${(first[k] / share[k]).toFixed(2)}×`);
    console.log(`${runs[0].label}'s share / ${run.label}'s: time ${ratio('wall')}, CPU calling thread ${ratio('thread')} (kernel ${ratio('kernel')}), CPU every thread ${ratio('all')}`);
  }
  // The same ratios round by round (each share against the floor of its
  // own round), then their median: a round slower for every storage (a
  // busy moment of the machine) moves both shares of a pair, so paired
  // ratios vary less than ratios of medians.
  const roundShare = (run, r, key) => {
    if (key === 'wall') return (1e6 * unitsPerRate) / run.values[r] - (1e6 * unitsPerRate) / floorRun.values[r];
    const a = run[key]?.[r];
    const b = floorRun[key]?.[r];
    return a === undefined || b === undefined ? undefined : a - b;
  };
  for (const run of shares.keys()) {
    if (run === runs[0] || first === undefined) continue;
    const paired = (key) => {
      const ratios = [];
      for (let r = 0; r < runs[0].values.length; r++) {
        const a = roundShare(runs[0], r, key);
        const b = roundShare(run, r, key);
        if (a !== undefined && b !== undefined && b > 0) ratios.push(a / b);
      }
      return ratios.length === 0 ? 'n/a' : `${median(ratios).toFixed(2)}×`;
    };
    console.log(`${runs[0].label}'s share / ${run.label}'s, per-round ratios: median time ${paired('wall')}, CPU calling thread ${paired('threadCpu')}, CPU every thread ${paired('cpu')}`);
  }
}
for (const run of runs.slice(1)) {
  const paired = median(runs[0].values.map((v, i) => v / run.values[i]));
  console.log(`${runs[0].label} vs ${run.label}: ${(median(runs[0].values) / median(run.values)).toFixed(2)}× (per-round ratios: median ${paired.toFixed(2)}×)`);
}
