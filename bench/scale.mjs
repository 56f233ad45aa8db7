// The host figures on a prefilled database (issue 50, "Scale"): push 1
// op, push 10 ops, 16 clients, a 100-change window pull and a 20,000-row
// bootstrap, through upstream's handler, on a copy of a file made by
// scripts/large-fixture.mjs (the in-tree 0.15.48 layout, any size and
// number of partitions), for each storage module in alternating rounds.
//
//   bun bench/scale.mjs --server <tree>/packages/server/src/index-bun.ts \
//     --fixture FILE [--figures push1,push10,conc16,window,bootstrap] \
//     [--rounds N] [--warmup N] [--partition NAME] [--boot-rows N] [--work DIR] [--one-copy] \
//     [--in-place] [--postgres] [--json OUT] --module A.mjs --module B.mjs ...
//
// Each module gets its own copy of the fixture (`cp --reflink=auto`, in
// --work, default the fixture's directory), opened as a host would open
// it (`ensureSyncServerReady`: our storage repairs the layout then). With
// --one-copy there is one copy, and the modules take it in turn, each
// for all its rounds (for files too large to copy twice); a storage after
// ours then runs on the layout ours repaired (the in-tree storage's row
// writes find the row scope index by row there, and are cheaper).
// --in-place is --one-copy on the fixture itself, for files too large to
// copy at all: the run changes it (ours repairs it on the first run's
// open, every run adds commits), so only the first run times a repair.
//
// With --postgres the copy is a PostgreSQL schema instead, on the server
// at SYNCULAR_TEST_PG_URL (the PostgreSQL modules' server): this
// package's `copyTo` moves the fixture into a fresh schema in the in-tree
// PostgreSQL layout (plus the row scope index by row a host's first use
// of ours makes), the module is handed that schema (`context.schema`),
// and the schema is dropped at the end. The copy reads a file copy of
// the fixture, which it leaves alone otherwise.
//
// Where each figure runs: the pushes write tasks t0…t9 (rows the fixture
// has) in --partition (default part-000, which holds every commit of a
// one-partition fixture); 16 clients push there too. The window pulls
// 100 changes of tasks in proj1 at spread cursors of that partition's
// log when it is deep enough (1,100 commits), otherwise of a partition of
// its own (`scale-window`, 3,000 one-op commits written through the
// handler first). The bootstrap reads the --boot-rows rows (default
// 20,000) of the partition the generator's `--boot-rows` writes (`boot`;
// written through the handler first when the fixture has none: slow for the in-tree storage,
// whose row writes scan the partition's scope entries). Every round
// pushes more commits into the partition; its depth grows by a few
// thousand over a run, nothing next to the fixture's.
//
// Printed per figure and storage: the median over rounds of operations
// per second (commits, pulls, rows), CPU µs per operation (every thread:
// process.cpuUsage) and of the calling thread alone (where the runtime
// has process.threadCpuUsage). The machine is shared: read the CPU. Each
// storage's first open is timed, with the event loop's longest gap while it
// ran (a 5 ms timer's; ours repairs an in-tree layout off the JS thread).
import { spawnSync } from 'node:child_process';
import { withLoopGap } from './lib/loop-gap.mjs';
import { appendFileSync, existsSync, rmSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { loadavg } from 'node:os';
import { pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';
import { loadCore } from './lib/server.mjs';
import { url as pgUrl } from './lib/pg-target.mjs';
import { dropSchema } from './lib/pg-schema.mjs';
import { BOOT_PARTITION, serverSchema } from '../scripts/large-fixture.mjs';
import { bootstrap, fill, fixtureHost, pushConcurrent, pushSequential, windowPulls } from './lib/scale-host.mjs';

const args = process.argv.slice(2);
const opts = { modules: [], figures: ['push1', 'push10', 'conc16', 'window', 'bootstrap'], rounds: 6, warmup: 1, partition: 'part-000', bootRows: 20_000, oneCopy: false };
for (let i = 0; i < args.length; i++) {
  const value = () => {
    if (i + 1 >= args.length) throw new Error(`${args[i]} needs a value`);
    return args[++i];
  };
  const a = args[i];
  if (a === '--module') opts.modules.push(resolve(value()));
  else if (a === '--server') opts.server = resolve(value());
  else if (a === '--fixture') opts.fixture = resolve(value());
  else if (a === '--figures') opts.figures = value().split(',');
  else if (a === '--rounds') opts.rounds = Number(value());
  else if (a === '--warmup') opts.warmup = Number(value());
  else if (a === '--partition') opts.partition = value();
  else if (a === '--boot-rows') opts.bootRows = Number(value());
  else if (a === '--work') opts.work = resolve(value());
  else if (a === '--json') opts.json = resolve(value());
  else if (a === '--one-copy') opts.oneCopy = true;
  else if (a === '--in-place') opts.inPlace = opts.oneCopy = true;
  else if (a === '--postgres') opts.postgres = true;
  else throw new Error(`unknown option ${a}`);
}
const FIGURES = {
  push1: { unit: 'commits/s', run: (s, tag) => pushSequential(s.push, 1, 300, tag) },
  push10: { unit: 'commits/s', run: (s, tag) => pushSequential(s.push, 10, 100, tag) },
  conc16: { unit: 'commits/s', run: (s, tag) => pushConcurrent(s.push, 16, 20, tag) },
  window: { unit: 'pulls/s', run: (s) => windowPulls(s.window, 200, s.windowTop) },
  bootstrap: { unit: 'rows/s', run: (s, tag) => bootstrap(s.boot, `scale-boot-${tag}`, opts.bootRows) },
};
if (!opts.server || !opts.fixture || opts.modules.length === 0) {
  throw new Error('usage: scale.mjs --server PATH --fixture FILE [--figures …] [--rounds N] --module A.mjs ...');
}
for (const f of opts.figures) if (!(f in FIGURES)) throw new Error(`--figures: one of ${Object.keys(FIGURES).join(', ')}, not ${f}`);
if (!existsSync(opts.fixture)) throw new Error(`no fixture at ${opts.fixture}`);
if (opts.inPlace && opts.postgres) throw new Error('--in-place is for SQLite runs: --postgres reads a copy of the fixture');
for (const n of [opts.rounds, opts.warmup]) if (!Number.isSafeInteger(n) || n < 0) throw new Error('--rounds and --warmup: integers ≥ 0');
if (!Number.isSafeInteger(opts.bootRows) || opts.bootRows < 100 || opts.bootRows % 100 !== 0) throw new Error('--boot-rows: a multiple of 100');

const server = await import(pathToFileURL(opts.server).href);
const core = await loadCore(opts.server);
const work = opts.work ?? dirname(opts.fixture);
const copies = [];
const schemas = [];
let fixtureDepth;

function fileCopy(k) {
  if (opts.inPlace) return opts.fixture;
  const path = join(work, `${basename(opts.fixture, '.db')}.scale-${process.pid}-${k}.db`);
  const t = performance.now();
  const r = spawnSync('cp', ['--reflink=auto', opts.fixture, path], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`cp of ${opts.fixture} failed`);
  copies.push(path);
  console.error(`copied the fixture to ${path} in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  return path;
}

function removeFile(path) {
  for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(path + suffix, { force: true });
}

/** Where module copy `k` lives: `{ path }` (SQLite) or `{ schema }` (--postgres). */
async function copyOf(k) {
  const path = fileCopy(k);
  if (!opts.postgres) return { path };
  // Named as the modules name theirs, so a sweep drops it if this process dies.
  const schema = `syncular_bench_${process.pid}_scale${k}`;
  const t = performance.now();
  const { NativeStorage } = createRequire(import.meta.url)('../index.js');
  const source = new NativeStorage({ url: `sqlite:${path}` });
  schemas.push(schema);
  try {
    await source.copyTo(pgUrl, { schema });
  } finally {
    await source.close();
    removeFile(path);
  }
  console.error(`copied the fixture into schema ${schema} in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  return { schema };
}

/** Opens a module's storage on `path` as a host would, and sets up each figure's partition. */
async function open(run, where) {
  // How long the event loop was held while the storage opened (ours
  // repairs an in-tree file's layout then, off the JS thread).
  const { took: openMs, worst: gap } = await withLoopGap(async () => {
    run.storage = await run.mod.createStorage({ ...where, server });
    await server.ensureSyncServerReady({ schema: serverSchema, storage: run.storage });
  });
  const setupFrom = performance.now();
  const s = {};
  s.push = await fixtureHost(server, core, run.storage, opts.partition);
  const depth = Number(await run.storage.getMaxCommitSeq(opts.partition));
  // The window reads the fixture's own log: with --one-copy the storages
  // after the first find the earlier ones' pushes (ten-change commits) on
  // top of it.
  fixtureDepth ??= depth;
  if (opts.figures.includes('window')) {
    if (fixtureDepth >= 1100) {
      s.window = s.push;
      s.windowTop = fixtureDepth - 1000;
    } else {
      s.window = await fixtureHost(server, core, run.storage, 'scale-window');
      const have = Number(await run.storage.getMaxCommitSeq('scale-window'));
      if (have < 3000) await fill(s.window, 3000 - have, 1, have);
      s.windowTop = 3000 - 100;
    }
  }
  if (opts.figures.includes('bootstrap')) {
    s.boot = await fixtureHost(server, core, run.storage, BOOT_PARTITION);
    if (Number(await run.storage.getMaxCommitSeq(BOOT_PARTITION)) === 0) await fill(s.boot, opts.bootRows / 100, 100);
  }
  run.s = s;
  if (run.openMs === undefined) {
    run.openMs = openMs;
    run.openGapMs = gap;
    run.setupMs = performance.now() - setupFrom;
    run.depth = depth;
  }
}

async function close(run) {
  await run.storage.close?.();
  // The in-tree SQLite storage's handle (ours on PostgreSQL has none, and says so).
  if (!opts.postgres) run.storage.db?.close?.();
  run.storage = undefined;
}

const runs = [];
for (const [k, path] of opts.modules.entries()) {
  const mod = await import(pathToFileURL(path).href);
  runs.push({ label: mod.label ?? path, mod, k, values: Object.fromEntries(opts.figures.map((f) => [f, []])) });
}
const load0 = loadavg();
const started = performance.now();
let round = 0;
async function figureRound(run, figure, warm) {
  const out = await FIGURES[figure].run(run.s, `r${round}${warm ? 'w' : ''}-${run.k}`);
  if (!warm) run.values[figure].push(out);
}
try {
  if (opts.oneCopy) {
    const where = await copyOf(0);
    for (const run of runs) {
      await open(run, where);
      for (round = 0; round < opts.warmup + opts.rounds; round++) {
        for (const figure of opts.figures) await figureRound(run, figure, round < opts.warmup);
      }
      await close(run);
    }
  } else {
    for (const run of runs) await open(run, await copyOf(run.k));
    for (round = 0; round < opts.warmup + opts.rounds; round++) {
      for (const figure of opts.figures) {
        for (let j = 0; j < runs.length; j++) await figureRound(runs[(j + round) % runs.length], figure, round < opts.warmup);
      }
    }
    for (const run of runs) await close(run);
  }
} finally {
  for (const run of runs) if (run.storage) await close(run).catch(() => {});
  for (const path of copies) removeFile(path);
  for (const schema of schemas) await dropSchema(pgUrl, schema);
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const fmt = (x) => (x === undefined ? '-' : x >= 100 ? x.toFixed(0) : x.toFixed(1));
const load1 = loadavg();
console.log(`fixture ${opts.fixture}${opts.postgres ? ' (copied to PostgreSQL)' : ''}, partition ${opts.partition}; ${opts.rounds} rounds after ${opts.warmup} warm-up; load ${load0[0].toFixed(1)} → ${load1[0].toFixed(1)}; ${((performance.now() - started) / 1000).toFixed(0)} s`);
for (const run of runs) console.log(`${run.label}: open ${fmt(run.openMs)} ms (longest event-loop gap ${fmt(run.openGapMs)} ms), set-up ${fmt(run.setupMs)} ms, partition depth ${run.depth}`);
const records = [];
for (const figure of opts.figures) {
  for (const run of runs) {
    const v = run.values[figure];
    const rec = {
      figure,
      storage: run.label,
      unit: FIGURES[figure].unit,
      perSec: median(v.map((x) => x.perSec)),
      cpuUs: median(v.map((x) => x.cpuUs)),
      threadCpuUs: v[0]?.threadCpuUs === undefined ? undefined : median(v.map((x) => x.threadCpuUs)),
      rounds: v.map((x) => Math.round(x.perSec)),
    };
    records.push(rec);
    console.log(`${figure} ${run.label}: ${fmt(rec.perSec)} ${rec.unit}, CPU µs per op ${fmt(rec.cpuUs)} (calling thread ${fmt(rec.threadCpuUs)}); rounds ${rec.rounds.join(' ')}`);
  }
}
if (opts.json) {
  const runtime = typeof Bun !== 'undefined' ? `bun ${Bun.version}` : `node ${process.versions.node}`;
  appendFileSync(opts.json, `${JSON.stringify({ fixture: basename(opts.fixture), engine: opts.postgres ? 'postgres' : 'sqlite', partition: opts.partition, runtime, load: [load0[0], load1[0]], opened: runs.map((r) => ({ storage: r.label, openMs: r.openMs, openGapMs: r.openGapMs, depth: r.depth })), records })}\n`);
}
