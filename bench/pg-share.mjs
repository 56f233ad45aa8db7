// The client's share of a PostgreSQL request (issue 50): for each storage,
// in alternating rounds, the whole time of a figure's calls, the server's
// execution of the statements they sent (pg_stat_statements'
// total_exec_time, reset before each round), and the difference, per call.
// What is left after the server's execution is the storage's client side:
// its driver, its JS, its round trips, the server's parse and plan.
//
//   SYNCULAR_TEST_PG_URL=postgres://postgres@127.0.0.1:55433/postgres \
//   bun bench/pg-share.mjs --server <tree>/packages/server/src/index-bun.ts \
//     [--figure point|aggregate|index100|index1000|window|bootstrap|push16] [--rounds N] --module A.mjs --module B.mjs ...
//
// The server must load pg_stat_statements (shared_preload_libraries) and
// have the extension created in the url's database; this refuses to run
// otherwise. Use a server of the bench's own: every statement any client
// runs there during a round is counted.
//
// push16: 16 clients pushing one-op commits through the handler into one
// partition at once (fsync-bound), with commits/s, the client process's CPU
// per commit (every thread) and the server's: the CPU of every process of
// the PostgreSQL server (its postmaster's children, from /proc) per commit.
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { loadCore, createHost, fill, windowPulls, bootstrap, pushConcurrent } from './lib/server.mjs';
import { populate, populateIndexed, queries, indexLookups } from './lib/workloads.mjs';
import { benchArgs } from './lib/args.mjs';

const figures = ['point', 'aggregate', 'index100', 'index1000', 'window', 'bootstrap', 'push16'];
const { serverPath, modules, figure, rounds } = benchArgs('pg-share.mjs', { figures, rounds: 8 });
// scanRowsByIndex lookups of 100 or 1,000 rows, 200 a round (alternate.mjs's index figures).
const lookupRows = { index100: 100, index1000: 1000 }[figure];
const url = process.env.SYNCULAR_TEST_PG_URL;
if (!url) throw new Error('SYNCULAR_TEST_PG_URL must name a PostgreSQL server that loads pg_stat_statements');

const stats = new pg.Client({ connectionString: url });
await stats.connect();
const loaded = await stats.query(`SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'`);
if (loaded.rowCount !== 1) throw new Error('pg-share: CREATE EXTENSION pg_stat_statements in the url\'s database first (and load it in shared_preload_libraries)');
const dataDir = (await stats.query('SHOW data_directory')).rows[0].data_directory;
const postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);

/** CPU µs of every child of the postmaster (and of it), from /proc. */
function serverCpuUs() {
  const tick = 1e6 / 100; // USER_HZ is 100 on Linux
  let total = 0;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue;
    }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // f[1] is ppid; utime and stime are fields 14 and 15 of stat, 12 and 13 here.
    if (Number(name) !== postmaster && Number(f[1]) !== postmaster) continue;
    total += (Number(f[11]) + Number(f[12])) * tick;
  }
  return total;
}

async function resetStats() {
  await stats.query('SELECT pg_stat_statements_reset()');
}
/** The server's execution time (µs) of every statement since the reset, but this script's own. */
async function serverExecUs() {
  const r = await stats.query(
    `SELECT coalesce(sum(total_exec_time), 0) AS ms, coalesce(sum(calls), 0) AS calls FROM pg_stat_statements
      WHERE query NOT ILIKE '%pg_stat_statements%' AND query NOT ILIKE 'SHOW %'`,
  );
  return { us: Number(r.rows[0].ms) * 1000, statements: Number(r.rows[0].calls) };
}

const server = await import(pathToFileURL(serverPath).href);
const core = await loadCore(serverPath);
const dir = mkdtempSync(join(tmpdir(), 'syncular-pg-share-'));
const now = () => performance.now() * 1000;
const runs = [];
try {
  for (const [k, path] of modules.entries()) {
    const mod = await import(pathToFileURL(path).href);
    const storage = await mod.createStorage({ path: join(dir, `db${k}.sqlite`), server });
    const run = { label: mod.label ?? path, storage, rows: [] };
    if (figure === 'point' || figure === 'aggregate') await populate(storage, 10_000, 0);
    else if (lookupRows !== undefined) await populateIndexed(storage);
    else if (figure !== 'push16') run.host = await createHost(server, core, storage, 'window');
    if (figure === 'window') await fill(run.host, 'w', 3000, 1);
    if (figure === 'bootstrap') await fill(run.host, 'b', 200, 100);
    runs.push(run);
  }
  // Statistics for every table just filled, as a table a host has used
  // for a while has them: without them the planner guesses (a fresh
  // table's index lookup of 100 rows was planned as a sort of all 2,000,
  // 10x the server time), and whether autovacuum got to a storage's
  // tables before its rounds would decide its figure. (Only the url's
  // database: behind SYNCULAR_BENCH_POOLER each storage has a database of
  // its own, which this does not reach.)
  await stats.query('ANALYZE');
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < runs.length; k++) {
      const run = runs[(k + r) % runs.length];
      const host = figure === 'push16' ? await createHost(server, core, run.storage, `push16-${r}`) : run.host;
      await resetStats();
      const cpu0 = process.cpuUsage();
      const server0 = serverCpuUs();
      const t0 = now();
      const calls = await once(run, host, r);
      const wholeUs = now() - t0;
      const cpu = process.cpuUsage(cpu0);
      const serverCpu = serverCpuUs() - server0;
      const exec = await serverExecUs();
      run.rows.push({
        calls,
        wholeUs: wholeUs / calls,
        execUs: exec.us / calls,
        clientUs: (wholeUs - exec.us) / calls,
        statements: exec.statements / calls,
        clientCpuUs: (cpu.user + cpu.system) / calls,
        serverCpuUs: serverCpu / calls,
        perSec: (calls / wholeUs) * 1e6,
      });
    }
  }
} finally {
  for (const run of runs) await run.storage.close?.();
  await stats.end();
  rmSync(dir, { recursive: true, force: true });
}

/** One round of the figure; answers how many calls (queries, pulls, bootstrap requests, commits) it made. */
async function once(run, host, r) {
  if (figure === 'point') return (await queries(run.storage, 10_000, 300, 0), 300);
  if (figure === 'aggregate') return (await queries(run.storage, 10_000, 0, 150), 150);
  if (lookupRows !== undefined) return (await indexLookups(run.storage, 200, lookupRows), 200);
  if (figure === 'window') return (await windowPulls(host, 300), 300);
  if (figure === 'bootstrap') return (await bootstrap(host, `boot-${r}`, 20_000)).requests;
  await pushConcurrent(host, 16, 25);
  return 16 * 25;
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const fmt = (x) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
const unit = { point: 'query', aggregate: 'query', index100: 'lookup', index1000: 'lookup', window: 'pull', bootstrap: 'request', push16: 'commit' }[figure];
// Concurrent pushes wait on each other's partition lock inside the server,
// and pg_stat_statements counts that wait as execution: for push16 the
// whole-minus-execution difference means nothing, so it is not printed.
const cols = figure === 'push16' ? ['wholeUs', 'statements', 'perSec', 'clientCpuUs', 'serverCpuUs'] : ['wholeUs', 'execUs', 'clientUs', 'statements', 'clientCpuUs'];
console.log(`${figure}, medians of ${rounds} rounds, per ${unit}: ${cols.join(' | ')}`);
for (const run of runs) {
  console.log(`${run.label}: ${cols.map((c) => fmt(median(run.rows.map((x) => x[c])))).join(' | ')}`);
  const each = figure === 'push16' ? 'clientCpuUs' : 'clientUs';
  console.log(`  ${each} per round: ${run.rows.map((x) => fmt(x[each])).join(' ')}`);
}
for (const run of runs.slice(1)) {
  const ratio = (c) => (median(runs[0].rows.map((x) => x[c])) / median(run.rows.map((x) => x[c]))).toFixed(2);
  if (figure === 'push16') {
    console.log(`${runs[0].label} / ${run.label}: commits/s ${ratio('perSec')}×, client CPU per commit ${ratio('clientCpuUs')}×, server CPU per commit ${ratio('serverCpuUs')}×`);
  } else {
    console.log(`${runs[0].label} / ${run.label}: client share ${ratio('clientUs')}×, whole ${ratio('wholeUs')}×, server execution ${ratio('execUs')}×`);
  }
}
