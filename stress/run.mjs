// npm run test:stress: the long versions of the reliability programs
// (issue 7), then one table. Exits non-zero when any figure that must be
// zero is not, or RSS grew by more than 10% over the warm-up figure.
// Knobs: STRESS_KILLS, STRESS_SECONDS, STRESS_FUZZ_CASES, STRESS_FUZZ_SEED
// (the hostile-input runs' seed, printed by each run; else the clock),
// STRESS_PROPTEST_CASES, STRESS_LEAK_CALLS, STRESS_ATTACK_QUERIES (generated
// registered-query attacks per engine, stress/attack.mjs).
// With SYNCULAR_TEST_PG_URL set, the crash, concurrency, hostile-input and
// leak programs run again on PostgreSQL (a fresh schema each, dropped
// afterwards) and the table gains "postgres:" rows; under CI=true a missing
// URL is a failing row.
import * as crash from './crash.mjs';
import * as concurrency from './concurrency.mjs';
import * as fuzz from './fuzz.mjs';
import * as leak from './leak.mjs';
import * as attack from './attack.mjs';

const log = (m) => console.error(`[stress] ${m}`);
const t0 = Date.now();
const timed = async (name, fn) => {
  const t = Date.now();
  log(`${name}…`);
  const out = await fn();
  log(`${name} done in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  return out;
};

const c = await timed('crash safety', () => crash.run({ log }));
const k = await timed('concurrency', () => concurrency.run());
const z = await timed('hostile input', () => fuzz.run());
const l = await timed('leaks', () => leak.run());
const atk = await timed('registered-query attacks', () => attack.run({ log }));
const pgUrl = process.env.SYNCULAR_TEST_PG_URL;
let pg;
if (pgUrl) {
  pg = {
    c: await timed('postgres: crash safety', () => crash.run({ log, pgUrl })),
    k: await timed('postgres: concurrency', () => concurrency.runPg({ pgUrl })),
    z: await timed('postgres: hostile input', () => fuzz.runJs(Number(process.env.STRESS_FUZZ_CASES ?? 100_000), pgUrl)),
    l: await timed('postgres: leaks', () => leak.run({ pgUrl })),
    a: await timed('postgres: registered-query attacks', () => attack.runEngine('postgres', { pgUrl, log })),
  };
}

const mb = (b) => (b / 2 ** 20).toFixed(1);
const tp = k.twoProcesses;
const same = [k.sameFile, k.sameMemory];
const js = z.js;
const rows = [
  ['kills survived', `${c.survived} / ${c.kills}`, c.survived === c.kills],
  ['commits checked', `${c.commitsChecked} (crash, cumulative over reopen checks; ${c.acked} acknowledged) + ${tp.commits} (two processes)`, c.commitsChecked > 0 && tp.commits > 0],
  ['lost', `${c.lost} (crash) + ${tp.lost} (two processes)`, c.lost + tp.lost === 0],
  ['partial', `${c.partial}`, c.partial === 0],
  ['duplicates', `${c.duplicates} (crash) + ${tp.duplicates} (two processes) + ${same.reduce((a, s) => a + s.extraCommits, 0)} (64 deliveries)`, c.duplicates + tp.duplicates + same.reduce((a, s) => a + s.extraCommits, 0) === 0],
  ['gaps', `${c.gaps} (crash) + ${tp.gaps} (two processes)`, c.gaps + tp.gaps === 0],
  ['retries exactly once', `${c.exactlyOnce} / ${c.retries} (${c.replays} were replays)`, c.exactlyOnce === c.retries],
  [
    '64 deliveries',
    `${same.reduce((a, s) => a + s.deliveries, 0)} deliveries: ${same.reduce((a, s) => a + s.applies, 0)} applies, ${same.reduce((a, s) => a + s.replays, 0)} replays, ${same.reduce((a, s) => a + s.mismatched, 0)} mismatched`,
    same.every((s) => s.applies === s.deliveries / 64 && s.mismatched === 0),
  ],
  ['"database is locked" to callers', `${tp.lockedErrors} (other errors ${tp.otherErrors}; ${tp.switches} writer switches, ${tp.lockWaits} off-thread lock waits)`, tp.lockedErrors + tp.otherErrors === 0 && tp.problems.length === 0],
  ['worker threads', `${k.workers.finished} / ${k.workers.workers} finished, ${k.workers.terminated} terminated, crashed ${k.workers.crashed}`, k.workers.crashed === 0 && k.workers.problems.length === 0],
  ['fuzz cases', `${js.cases ?? 0} JS (${js.members ?? '?'} members; ${js.rejected ?? 0} rejected, ${js.resolved ?? 0} resolved) + ${z.rust.built ? `${z.rust.cases} Rust codec` : 'Rust codec tests did not build'}`, !js.crashed && js.cases > 0 && z.rust.ok],
  ['fuzz failures', `uncoded ${js.uncoded ?? '?'}, sync throws ${js.syncThrows ?? '?'}, hangs ${js.hangs ?? '?'}, partial writes ${js.partialWrites ?? '?'}`, !js.crashed && js.uncoded + js.syncThrows + js.hangs + js.partialWrites + js.acceptedBadPartition === 0],
  ['panics', `${js.panics ?? '?'} (JS, contained) + ${z.rust.panics} (Rust proptest); process aborts ${js.crashed ? 1 : 0}`, !js.crashed && js.panics === 0 && z.rust.panics === 0],
  [
    'RSS growth',
    l.crashed ? `crashed: ${l.problem}` : `${mb(l.growth)} MB after warm-up (${mb(l.warmRss)} → ${mb(l.endRss)} MB) over ${l.calls} calls, ${l.dropped} dropped transactions (writes visible ${l.droppedWritesVisible}, stuck ${l.stuck})`,
    !l.crashed && l.growth < 0.1 * l.warmRss && l.droppedWritesVisible === 0 && l.stuck === 0,
  ],
  ...atk.map((r) => [`attack queries (${r.engine})`, attack.describeRun(r), attack.clean(r)]),
];

if (pg) {
  const { c: pc, k: pk, z: pz, l: pl } = pg;
  const ptp = pk.twoProcesses;
  const ps = pk.same;
  rows.push(
    ['postgres: kills survived', `${pc.survived} / ${pc.kills} (host process SIGKILLed, server up)`, pc.survived === pc.kills],
    ['postgres: commits checked', `${pc.commitsChecked} (crash, cumulative; ${pc.acked} acknowledged) + ${ptp.commits} (two processes)`, pc.commitsChecked > 0 && ptp.commits > 0],
    ['postgres: lost', `${pc.lost} (crash) + ${ptp.lost} (two processes)`, pc.lost + ptp.lost === 0],
    ['postgres: partial', `${pc.partial}`, pc.partial === 0],
    ['postgres: duplicates', `${pc.duplicates} (crash) + ${ptp.duplicates} (two processes) + ${ps.extraCommits} (64 deliveries)`, pc.duplicates + ptp.duplicates + ps.extraCommits === 0],
    ['postgres: gaps', `${pc.gaps} (crash) + ${ptp.gaps} (two processes)`, pc.gaps + ptp.gaps === 0],
    ['postgres: retries exactly once', `${pc.exactlyOnce} / ${pc.retries} (${pc.replays} were replays)`, pc.exactlyOnce === pc.retries],
    ['postgres: 64 deliveries', `${ps.deliveries} deliveries: ${ps.applies} applies, ${ps.replays} replays, ${ps.mismatched} mismatched`, ps.applies === ps.deliveries / 64 && ps.mismatched === 0],
    ['postgres: two processes', `errors ${ptp.lockedErrors + ptp.otherErrors}; ${ptp.perProcess.join(' + ')} commits, ${ptp.switches} writer switches`, ptp.lockedErrors + ptp.otherErrors === 0 && ptp.problems.length === 0 && ptp.commits === ptp.acked],
    ['postgres: fuzz cases', `${pz.cases ?? 0} JS (${pz.members ?? '?'} members; ${pz.rejected ?? 0} rejected, ${pz.resolved ?? 0} resolved)`, !pz.crashed && pz.cases > 0],
    ['postgres: fuzz failures', `uncoded ${pz.uncoded ?? '?'}, sync throws ${pz.syncThrows ?? '?'}, hangs ${pz.hangs ?? '?'}, partial writes ${pz.partialWrites ?? '?'}`, !pz.crashed && pz.uncoded + pz.syncThrows + pz.hangs + pz.partialWrites + pz.acceptedBadPartition === 0],
    ['postgres: panics', `${pz.panics ?? '?'} (JS, contained); process aborts ${pz.crashed ? 1 : 0}`, !pz.crashed && pz.panics === 0],
    [
      'postgres: RSS growth',
      pl.crashed ? `crashed: ${pl.problem}` : `${mb(pl.growth)} MB after warm-up (${mb(pl.warmRss)} → ${mb(pl.endRss)} MB) over ${pl.calls} calls, ${pl.dropped} dropped transactions (writes visible ${pl.droppedWritesVisible}, stuck ${pl.stuck})`,
      !pl.crashed && pl.growth < 0.1 * pl.warmRss && pl.droppedWritesVisible === 0 && pl.stuck === 0,
    ],
    ['postgres: attack queries', attack.describeRun(pg.a), attack.clean(pg.a)],
  );
} else {
  rows.push(['postgres', 'not run: SYNCULAR_TEST_PG_URL is not set', process.env.CI !== 'true']);
}

const w0 = Math.max(...rows.map((r) => r[0].length));
const w1 = Math.max(...rows.map((r) => r[1].length));
const line = `+${'-'.repeat(w0 + 2)}+${'-'.repeat(w1 + 2)}+------+`;
console.log(line);
console.log(`| ${'figure'.padEnd(w0)} | ${'value'.padEnd(w1)} | ok   |`);
console.log(line);
for (const [a, b, ok] of rows) console.log(`| ${a.padEnd(w0)} | ${b.padEnd(w1)} | ${ok ? 'yes ' : 'NO  '} |`);
console.log(line);
console.log(`total ${((Date.now() - t0) / 1000).toFixed(0)} s`);

const attackProblems = (r) => r.examples.map((e) => `attack ${r.engine} #${e.i} ${e.what} [${e.form ?? ''}] ${e.sql ?? ''} ${JSON.stringify(e.params ?? [])}: ${JSON.stringify(e.detail)}`.slice(0, 400));
const problems = [...c.problems, ...tp.problems, ...k.workers.problems, ...(js.failures ?? []), js.problem, z.rust.problem, l.problem, ...atk.flatMap(attackProblems)].filter(Boolean);
if (pg) problems.push(...[...pg.c.problems, ...pg.k.twoProcesses.problems, ...(pg.z.failures ?? []), pg.z.problem, pg.l.problem].filter(Boolean).map((p) => `postgres: ${p}`), ...attackProblems(pg.a));
if (problems.length > 0) {
  console.log('\nproblems:');
  for (const p of problems.slice(0, 80)) console.log(`  - ${p}`);
}
process.exitCode = rows.every((r) => r[2]) ? 0 : 1;
