// Round after round of one host figure on one storage, with the heap and
// the garbage collector's pauses beside each round: does a figure decay
// within a run, and does the heap or GC follow it?
//
//   node bench/decay.mjs --server <server> --module M.mjs [--figure bootstrap|window] [--rounds N]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PerformanceObserver } from 'node:perf_hooks';
import { loadCore, createHost, fill, windowPulls, bootstrap } from './lib/server.mjs';

const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(k) ? args[args.indexOf(k) + 1] : d);
const serverPath = opt('--server');
const figure = opt('--figure', 'bootstrap');
const rounds = Number(opt('--rounds', 20));
const server = await import(pathToFileURL(serverPath).href);
const core = await loadCore(serverPath);
const mod = await import(pathToFileURL(resolve(opt('--module'))).href);
const dir = mkdtempSync(join(tmpdir(), 'syncular-decay-'));
let gcMs = 0;
let gcs = 0;
try {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gcMs += e.duration;
      gcs++;
    }
  }).observe({ entryTypes: ['gc'] });
} catch {}
const storage = await mod.createStorage({ path: join(dir, 'db.sqlite'), server });
const host = await createHost(server, core, storage, 'window');
if (figure === 'window') await fill(host, 'w', 3000, 1);
else await fill(host, 'b', 200, 100);
console.log(`${mod.label}, ${figure}, ${typeof Bun !== 'undefined' ? `bun ${Bun.version}` : `node ${process.version}`}`);
for (let r = 0; r < rounds; r++) {
  const g0 = gcMs;
  const n0 = gcs;
  const v = figure === 'window' ? await windowPulls(host, 300) : await bootstrap(host, `boot-${r}`, 20_000);
  await new Promise(setImmediate);
  const rate = v.rowsPerSec ?? v.pullsPerSec;
  const m = process.memoryUsage();
  console.log(
    `round ${String(r).padStart(2)}: ${Math.round(rate)} /s, thread CPU ${v.threadCpuUs?.toFixed(0)} µs/unit, ` +
      `heap ${(m.heapUsed / 1e6).toFixed(1)} MB of ${(m.heapTotal / 1e6).toFixed(1)}, rss ${(m.rss / 1e6).toFixed(0)} MB, ` +
      `external ${(m.external / 1e6).toFixed(1)} MB, gc ${gcs - n0} pauses ${(gcMs - g0).toFixed(1)} ms`,
  );
}
storage.close?.();
rmSync(dir, { recursive: true, force: true });
