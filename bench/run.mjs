// npm run bench [-- options]: the workloads of bench/README.md against one
// or more storage modules, side by side in one run. Prints one table with
// a column per storage and the first storage's advantage over each other,
// and writes the figures to bench/results/*.json. Runs under node and bun.
//
//   --module PATH     a module exporting createStorage(context) (repeatable;
//                     default: bench/modules/native-sqlite.mjs)
//   --server PATH     a @syncular/server entry; its namespace is
//                     context.server (needed by the in-tree modules), and
//                     its handleSyncRequest runs the host workloads
//   --runs N          repetitions per figure (default 5; median, min, max)
//   --quick           smaller sizes, for a smoke run
//   --profile         with host workloads: after the timed runs, one more
//                     pass per storage with every storage member the
//                     handler calls timed (bench/lib/profile.mjs), printed
//                     as tables per workload
//   --prefill N,M     with host workloads: each host figure also runs on a
//                     database that already holds N (then M) commits, filled
//                     through the handler into the figure's own partitions
//                     (0, the empty database, always runs first)
//   --only a,b        workloads: push,concurrent,reads,queries,memory,floor,
//                     host,growth (floor runs beside push and needs cargo:
//                     it is the bench target benches/floor.rs, built once
//                     per run; host needs --server and is in the default
//                     set with it; growth is slow and runs only when named)
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { growthRun } from './lib/growth.mjs';
import * as H from './lib/server.mjs';
import * as W from './lib/workloads.mjs';
import { CallProfile, profileTable, profiled } from './lib/profile.mjs';

const here = dirname(fileURLToPath(import.meta.url));

function parseArgs(argv) {
  const out = { modules: [], server: undefined, runs: 5, quick: false, only: undefined, profile: false, prefill: [0] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--module') out.modules.push(resolve(value()));
    else if (a === '--server') out.server = resolve(value());
    else if (a === '--runs') out.runs = Number(value());
    else if (a === '--quick') out.quick = true;
    else if (a === '--profile') out.profile = true;
    else if (a === '--only') out.only = new Set(value().split(','));
    else if (a === '--prefill') {
      const levels = value().split(',').map(Number);
      if (levels.some((n) => !Number.isSafeInteger(n) || n < 0)) throw new Error('--prefill takes commit counts ≥ 0, comma-separated');
      out.prefill = [0, ...levels.filter((n) => n > 0)];
    }
    else if (a === '--help' || a === '-h') {
      console.log(readHelp());
      process.exit(0);
    } else throw new Error(`unknown option ${a} (see --help)`);
  }
  if (out.modules.length === 0) {
    out.modules.push(join(here, 'modules', 'native-sqlite.mjs'));
    // The PostgreSQL column when a server is configured (bench/README.md, docs/testing.md).
    if (process.env.SYNCULAR_TEST_PG_URL) out.modules.push(join(here, 'modules', 'native-postgres.mjs'));
  }
  if (!Number.isInteger(out.runs) || out.runs < 1) throw new Error('--runs must be a positive integer');
  return out;
}

function readHelp() {
  return 'usage: node bench/run.mjs [--module PATH]... [--server PATH] [--runs N] [--quick] [--only LIST] [--profile] [--prefill N,M]';
}

const args = parseArgs(process.argv.slice(2));
const size = args.quick
  ? { push: { 1: 300, 10: 100, 100: 20 }, concurrentEach: 20, rows: 10_000, windowCommits: 500, windows: 200, page: 1000, points: 500, aggregates: 20, memoryCalls: 50_000 }
  : { push: { 1: 2000, 10: 500, 100: 100 }, concurrentEach: 100, rows: 100_000, windowCommits: 3000, windows: 1000, page: 1000, points: 5000, aggregates: 100, memoryCalls: 1_000_000 };
const hostSize = args.quick
  ? { push: { 1: 300, 10: 100 }, concurrentEach: 20, windowCommits: 500, pulls: 200, bootstrapRows: 5_000 }
  : { push: { 1: 2000, 10: 500 }, concurrentEach: 100, windowCommits: 3000, pulls: 1000, bootstrapRows: 20_000 };
// Log sizes the growth figure is taken at, and how many distinct rows its
// one-op pushes update.
const growthSize = args.quick
  ? { checkpoints: [2_000, 10_000, 30_000], distinctRows: 5_000, pushes: 300, windows: 200 }
  : { checkpoints: [10_000, 100_000, 300_000], distinctRows: 50_000, pushes: 1000, windows: 500 };
// growth is slow, so it runs only when named; host needs --server.
const wants = (w) => (w === 'growth' ? !!args.only?.has(w) : !args.only || args.only.has(w));
if (args.only?.has('host') && !args.server) throw new Error('--only host needs --server naming a @syncular/server entry');

const server = args.server ? await import(pathToFileURL(args.server).href) : undefined;
const core = server && wants('host') ? await H.loadCore(args.server) : undefined;
const storages = [];
for (const path of args.modules) {
  const mod = await import(pathToFileURL(path).href);
  const create = mod.createStorage ?? mod.createServerStorage ?? mod.default;
  if (typeof create !== 'function') throw new Error(`${path} exports no createStorage(context)`);
  // `synchronous`: a module of this package on SQLite names its setting
  // (the package's default is full), so its floor runs at the same one.
  storages.push({ label: mod.label ?? path, create, synchronous: mod.synchronous });
}

// Per SQLite module of this package (index → { 1: [], 10: [] }): the floor
// at that module's own durability level.
let profileText;
const floorOf = new Map(storages.flatMap((s, i) => (s.synchronous ? [[i, { 1: [], 10: [] }]] : [])));
const dir = mkdtempSync(join(tmpdir(), 'syncular-bench-'));
let fileNo = 0;
async function fresh(storage) {
  const path = join(dir, `db-${fileNo++}.sqlite`);
  return storage.create({ server, core: undefined, purpose: 'bench', path });
}
async function closeStorage(s) {
  if (typeof s.close === 'function') await s.close();
}

// --prefill: the partitions the host figures write and read ('bench' for
// the pushes, 'window' for the pulls, whose storage the bootstrap shares)
// already hold `level` one-op commits. A SQLite module's database is filled
// once per storage and level and copied for every figure; a module that
// keeps nothing at its path (PostgreSQL) is filled each time.
const PREFILLED = ['bench', 'window'];
const templates = new Map();
function copyDatabase(from, to) {
  copyFileSync(from, to);
  for (const tail of ['-wal']) if (existsSync(from + tail)) copyFileSync(from + tail, to + tail);
}
async function prefill(s, level) {
  for (const partition of PREFILLED) {
    const h = await H.createHost(server, core, s, partition);
    await H.fill(h, 'pre', level, 1);
  }
  return s;
}
async function freshHost(st, i, level) {
  if (level === 0) return fresh(st);
  const key = `${i}:${level}`;
  if (!templates.has(key)) {
    const path = join(dir, `template-${i}-${level}.sqlite`);
    const started = performance.now();
    const s = await prefill(await st.create({ server, core: undefined, purpose: 'bench', path }), level);
    await closeStorage(s);
    console.error(`bench: ${st.label}: prefilled ${level} commits per partition in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    templates.set(key, existsSync(path) ? path : null);
  }
  const template = templates.get(key);
  if (template === null) return prefill(await fresh(st), level);
  const path = join(dir, `db-${fileNo++}.sqlite`);
  copyDatabase(template, path);
  return st.create({ server, core: undefined, purpose: 'bench', path });
}
const levelName = (level) => (level === 0 ? '' : ` [prefill ${level >= 1000 ? `${level / 1000}k` : level}]`);

// figures[name][storageIndex] = values over runs
const figures = new Map();
const meta = new Map();
function record(name, i, value, better, unit) {
  if (value === undefined) return;
  if (!figures.has(name)) {
    figures.set(name, storages.map(() => []));
    meta.set(name, { better, unit });
  }
  figures.get(name)[i].push(value);
}

// The N-API floor is the bench target benches/floor.rs (no part of the
// addon): built once here, before anything is timed, and run per
// measurement. Without cargo, or if the build fails, the floor is skipped
// and the reason printed.
let floorExe;
let floorSkipped;
function buildFloor() {
  console.error('bench: building the floor (cargo bench --bench floor --no-run)');
  const r = spawnSync('cargo', ['bench', '--bench', 'floor', '--no-run', '--message-format=json'], {
    cwd: join(here, '..'),
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  if (r.error) {
    return { skip: r.error.code === 'ENOENT' ? 'cargo not found on PATH' : `cargo did not run: ${r.error.message}` };
  }
  if (r.status !== 0) {
    const tail = r.stderr.trim().split('\n').slice(-10).join('\n');
    return { skip: `cargo bench --bench floor --no-run failed (exit ${r.status}):\n${tail}` };
  }
  for (const line of r.stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    const m = JSON.parse(line);
    if (m.reason === 'compiler-artifact' && m.target?.name === 'floor' && m.target.kind.includes('bench') && m.executable) {
      return { exe: m.executable };
    }
  }
  return { skip: 'cargo built no floor bench executable' };
}
function directPush(path, commits, ops, synchronous) {
  const r = spawnSync(floorExe, [path, String(commits), String(ops), synchronous], { encoding: 'utf8' });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`floor bench exited ${r.status}: ${r.stderr.trim()}`);
  return JSON.parse(r.stdout).usPerCommit;
}

const runtime = typeof Bun !== 'undefined' ? `bun ${Bun.version}` : `node ${process.version}`;
console.error(`bench: ${runtime}; ${storages.map((s) => s.label).join(' vs ')}; ${args.runs} runs${args.quick ? ' (quick)' : ''}`);

if (floorOf.size > 0 && wants('push') && wants('floor')) {
  const built = buildFloor();
  floorExe = built.exe;
  floorSkipped = built.skip;
  if (floorSkipped) console.error(`bench: floor skipped: ${floorSkipped}`);
}

try {
  // One untimed pass per storage first, so the figures measure steady
  // state rather than the JIT compiling the push path (and the floor's
  // ratio is not charged with a one-time cost).
  for (const st of storages) {
    const s = await fresh(st);
    await W.pushSequential(s, 1, 200);
    await W.pushSequential(s, 10, 50);
    await closeStorage(s);
    if (core) {
      const h = await H.createHost(server, core, await fresh(st), 'warm-up');
      await H.pushSequential(h, 1, 100);
      await H.pushSequential(h, 10, 30);
      await closeStorage(h.storage);
    }
  }
  for (let run = 0; run < args.runs; run++) {
    // Storages alternate inside each run, so drift on a shared machine hits all alike.
    for (let i = 0; i < storages.length; i++) {
      const st = storages[i];
      if (wants('push')) {
        for (const ops of [1, 10, 100]) {
          const s = await fresh(st);
          const r = await W.pushSequential(s, ops, size.push[ops]);
          await closeStorage(s);
          record(`push ${ops} op/commit: commits/s`, i, r.commitsPerSec, 'higher', '/s');
          record(`push ${ops} op/commit: p50 latency`, i, r.p50Us, 'lower', 'µs');
          record(`push ${ops} op/commit: p99 latency`, i, r.p99Us, 'lower', 'µs');
          // Threads of the process, summed: the hops a storage adds per push.
          if (r.switchesPerCommit !== undefined) record(`push ${ops} op/commit: context switches`, i, r.switchesPerCommit, 'lower', '/commit');
          // The N-API floor: the same SQL sequence issued from Rust (the
          // floor bench binary, timed inside it), right after the package's
          // run so drift hits both alike.
          if (floorOf.has(i) && ops <= 10 && floorExe) {
            floorOf.get(i)[ops].push(directPush(join(dir, `direct-${fileNo++}.sqlite`), size.push[ops], ops, st.synchronous));
          }
        }
      }
      if (wants('concurrent')) {
        for (const partitions of [1, 16]) {
          const s = await fresh(st);
          const r = await W.pushConcurrent(s, 16, size.concurrentEach, partitions);
          await closeStorage(s);
          record(`16 pushers, ${partitions} partition${partitions > 1 ? 's' : ''}: commits/s`, i, r.commitsPerSec, 'higher', '/s');
        }
      }
      if (wants('reads') || wants('queries') || wants('memory')) {
        const s = await fresh(st);
        await W.populate(s, size.rows, size.windowCommits);
        if (wants('reads')) {
          const w = await W.windowReads(s, size.windows);
          record('window read (100 changes): windows/s', i, w.windowsPerSec, 'higher', '/s');
          const b = await W.bootstrapScan(s, size.page);
          record(`bootstrap scan (${b.rows} rows): rows/s`, i, b.rowsPerSec, 'higher', '/s');
          // Stall is probed in a second pass, so the probe's own turns do not
          // slow the throughput figures above.
          const probe = await W.withStallProbe(async () => {
            await W.windowReads(s, size.windows);
            return W.bootstrapScan(s, size.page);
          });
          record('event-loop stall during reads: p99', i, probe.stallP99Ms, 'lower', 'ms');
          record('event-loop stall during reads: max', i, probe.stallMaxMs, 'lower', 'ms');
        }
        if (wants('queries')) {
          const q = await W.queries(s, size.rows, size.points, size.aggregates);
          record('registered query, point: /s', i, q.queryPointsPerSec, 'higher', '/s');
          record('registered query, 10k-row aggregate: /s', i, q.queryAggregatesPerSec, 'higher', '/s');
        }
        if (wants('memory')) {
          const m = await W.memory(s, size.rows, size.memoryCalls);
          record(`RSS growth over ${size.memoryCalls} point reads`, i, m.rssGrowthMb, 'lower', 'MB');
        }
        await closeStorage(s);
      }
      for (const level of core ? args.prefill : []) {
        const at = levelName(level);
        // The same storages behind @syncular/server's handleSyncRequest,
        // driven with request bytes (lib/server.mjs).
        for (const ops of [1, 10]) {
          const h = await H.createHost(server, core, await freshHost(st, i, level), 'bench');
          const r = await H.pushSequential(h, ops, hostSize.push[ops]);
          await closeStorage(h.storage);
          record(`host: push ${ops} op: commits/s${at}`, i, r.commitsPerSec, 'higher', '/s');
          record(`host: push ${ops} op: p50 latency${at}`, i, r.p50Us, 'lower', 'µs');
        }
        {
          const h = await H.createHost(server, core, await freshHost(st, i, level), 'bench');
          const r = await H.pushConcurrent(h, 16, hostSize.concurrentEach);
          await closeStorage(h.storage);
          record(`host: 16 clients pushing, 1 partition: commits/s${at}`, i, r.commitsPerSec, 'higher', '/s');
        }
        {
          const s = await freshHost(st, i, level);
          const win = await H.createHost(server, core, s, 'window');
          await H.fill(win, 'w', hostSize.windowCommits, 1);
          const p = await H.windowPulls(win, hostSize.pulls);
          record(`host: pull 100-commit window: pulls/s${at}`, i, p.pullsPerSec, 'higher', '/s');
          const boot = await H.createHost(server, core, s, 'bootstrap');
          await H.fill(boot, 'b', hostSize.bootstrapRows / 100, 100);
          const b = await H.bootstrap(boot, 'bootstrapper', hostSize.bootstrapRows);
          record(`host: bootstrap ${b.rows} rows (1,000-row pages): rows/s${at}`, i, b.rowsPerSec, 'higher', '/s');
          // Stall is probed in a second bootstrap, as for the storage-level reads.
          const probe = await W.withStallProbe(() => H.bootstrap(boot, 'bootstrapper-2', hostSize.bootstrapRows));
          record(`host: event-loop stall during bootstrap: max${at}`, i, probe.stallMaxMs, 'lower', 'ms');
          await closeStorage(s);
        }
      }
    }
    console.error(`bench: run ${run + 1}/${args.runs} done`);
  }

  if (wants('growth')) {
    for (let run = 0; run < args.runs; run++) {
      await growthRun(storages, fresh, closeStorage, growthSize, record);
      console.error(`bench: growth run ${run + 1}/${args.runs} done`);
    }
  }

  if (args.profile && core) {
    // One untimed-figure pass per storage with every member timed: where a
    // host request's time goes (bench/lib/profile.mjs).
    const tables = { push: [], window: [], bootstrap: [] };
    for (const st of storages) {
      const push = new CallProfile();
      const h = await H.createHost(server, core, profiled(await fresh(st), push), 'bench');
      push.reset();
      await H.pushSequential(h, 1, hostSize.push[1]);
      await closeStorage(h.storage);
      tables.push.push(push.summary(hostSize.push[1]));

      const reads = new CallProfile();
      const s = profiled(await fresh(st), reads);
      const win = await H.createHost(server, core, s, 'window');
      await H.fill(win, 'w', hostSize.windowCommits, 1);
      reads.reset();
      await H.windowPulls(win, hostSize.pulls);
      tables.window.push(reads.summary(hostSize.pulls));
      const boot = await H.createHost(server, core, s, 'bootstrap');
      await H.fill(boot, 'b', hostSize.bootstrapRows / 100, 100);
      reads.reset();
      const b = await H.bootstrap(boot, 'bootstrapper', hostSize.bootstrapRows);
      tables.bootstrap.push(reads.summary(b.requests));
      await closeStorage(s);
    }
    const labels = storages.map((s) => s.label);
    profileText = [
      profileTable('profile, host push of 1 op (calls per push)', labels, tables.push),
      profileTable('profile, host pull of a 100-commit window (calls per pull)', labels, tables.window),
      profileTable('profile, host bootstrap in 1,000-row pages (calls per request)', labels, tables.bootstrap),
    ].join('\n');
  }

  for (const [i, floors] of floorOf) {
    for (const ops of [1, 10]) {
      if (floors[ops].length > 0) meta.set(`floor ${i} ${ops}`, { values: floors[ops], ops, i });
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const stats = (v) => {
  const s = [...v].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)], min: s[0], max: s[s.length - 1], runs: s.length };
};
const num = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const cell = (st) => (st ? `${num(st.median)} (${num(st.min)}–${num(st.max)})` : '—');

const header = ['figure', ...storages.map((s) => s.label)];
if (storages.length > 1) header.push(...storages.slice(1).map((s) => `${storages[0].label} vs ${s.label}`));
const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`];
const results = [];
for (const [name, perStorage] of figures) {
  const { better, unit } = meta.get(name);
  const st = perStorage.map((v) => (v.length ? stats(v) : undefined));
  const row = [`${name} [${unit}]`, ...st.map(cell)];
  if (storages.length > 1) {
    for (const other of st.slice(1)) {
      if (!st[0] || !other) row.push('—');
      else row.push(`${num(better === 'higher' ? st[0].median / other.median : other.median / st[0].median)}×`);
    }
  }
  lines.push(`| ${row.join(' | ')} |`);
  results.push({ figure: name, unit, better, storages: st.map((s, i) => ({ storage: storages[i].label, ...s })) });
}

console.log(`median (min–max) of ${args.runs} runs; ${runtime}; ratio = how many times better the first storage is`);
console.log(lines.join('\n'));

if (profileText) console.log(profileText);

const floorRows = [...meta.entries()].filter(([k]) => k.startsWith('floor '));
if (floorSkipped) console.log(`\nN-API overhead: skipped; ${floorSkipped}`);
if (floorRows.length > 0) {
  console.log('\nN-API overhead: mean µs per push commit, package vs the same SQL sequence issued from Rust at the same synchronous setting');
  console.log('(each run measures both back to back; ratio = median of the per-run ratios)');
  console.log('| module | synchronous | ops | package | same SQL from Rust | ratio (min–max) |');
  console.log('|---|---|---|---|---|---|');
  for (const [, { values, ops, i }] of floorRows) {
    const pkgUs = figures.get(`push ${ops} op/commit: commits/s`)[i].map((c) => 1e6 / c);
    const ratios = stats(pkgUs.map((us, r) => us / values[r]));
    const pkg = stats(pkgUs);
    const direct = stats(values);
    const sync = storages[i].synchronous;
    console.log(`| ${storages[i].label} | ${sync} | ${ops} | ${cell(pkg)} | ${cell(direct)} | ${ratios.median.toFixed(2)}× (${ratios.min.toFixed(2)}–${ratios.max.toFixed(2)}) |`);
    results.push({ figure: `push ${ops} op/commit: µs/commit, package vs Rust (${storages[i].label}, ${sync})`, package: pkg, direct, ratio: ratios });
  }
}

const outDir = join(here, 'results');
mkdirSync(outDir, { recursive: true });
const out = join(outDir, `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(out, JSON.stringify({ runtime, runs: args.runs, quick: args.quick, storages: storages.map((s) => s.label), results }, null, 2));
console.log(`\nresults: ${out}`);
