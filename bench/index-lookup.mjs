// scanRowsByIndex on its own, two or more builds of this package in one
// process, in alternating rounds (the order turning by one each round):
// CPU µs of the calling thread and time per lookup, for lookups of 100
// and 1,000 rows over 2,000 rows of one indexed value (lib/workloads.mjs,
// populateIndexed), each build on a SQLite file of its own at
// synchronous=NORMAL. SQLite lookups run on the calling thread, so its CPU
// is the whole cost.
//
//   bun bench/index-lookup.mjs [--rounds 12] [--calls 200] --package DIR --package OTHER_DIR ...
//
// Each DIR is a checkout of this package with its addon built (native/).
// Prints per build and size the median over rounds, then the first
// build's median over each other's and the median of per-round ratios.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { indexLookups, populateIndexed } from './lib/workloads.mjs';

const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(k) ? args[args.indexOf(k) + 1] : d);
const rounds = Number(opt('--rounds', 12));
const calls = Number(opt('--calls', 200));
const dirs = args.flatMap((a, i) => (a === '--package' ? [resolve(args[i + 1])] : []));
if (dirs.length < 2 || !Number.isSafeInteger(rounds) || !Number.isSafeInteger(calls)) {
  throw new Error('usage: index-lookup.mjs [--rounds N] [--calls N] --package DIR --package OTHER_DIR ...');
}
const SIZES = [100, 1000];
const cpu = () => {
  const t = process.threadCpuUsage();
  return t.user + t.system;
};
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

const tmp = mkdtempSync(join(tmpdir(), 'syncular-index-lookup-'));
const runs = [];
try {
  for (const [k, dir] of dirs.entries()) {
    const { NativeStorage } = createRequire(join(dir, 'index.js'))(join(dir, 'index.js'));
    const storage = new NativeStorage({ url: `sqlite:${join(tmp, `db${k}.sqlite`)}`, synchronous: 'normal' });
    await populateIndexed(storage);
    for (const size of SIZES) await indexLookups(storage, 20, size);
    runs.push({ dir, storage, cpu: new Map(SIZES.map((s) => [s, []])), wall: new Map(SIZES.map((s) => [s, []])) });
  }
  for (let r = 0; r < rounds; r++) {
    for (const size of SIZES) {
      for (let k = 0; k < runs.length; k++) {
        const run = runs[(k + r) % runs.length];
        const c0 = cpu();
        const t0 = performance.now();
        await indexLookups(run.storage, calls, size);
        run.wall.get(size).push(((performance.now() - t0) * 1000) / calls);
        run.cpu.get(size).push((cpu() - c0) / calls);
      }
    }
  }
} finally {
  for (const run of runs) await run.storage.close();
  rmSync(tmp, { recursive: true, force: true });
}
const fmt = (x) => x.toFixed(1);
console.log(`${rounds} rounds of ${calls} lookups; µs per lookup, CPU calling thread / time (medians)`);
for (const size of SIZES) {
  for (const run of runs) console.log(`  ${String(size).padStart(4)} rows  ${run.dir}: ${fmt(median(run.cpu.get(size)))} / ${fmt(median(run.wall.get(size)))}`);
  for (const run of runs.slice(1)) {
    const first = runs[0];
    const ratio = (m) => median(first[m].get(size)) / median(run[m].get(size));
    const paired = (m) => median(first[m].get(size).map((v, i) => v / run[m].get(size)[i]));
    console.log(`  ${String(size).padStart(4)} rows  first / ${run.dir}: CPU ${ratio('cpu').toFixed(3)} (per round ${paired('cpu').toFixed(3)}), time ${ratio('wall').toFixed(3)} (per round ${paired('wall').toFixed(3)})`);
  }
}
