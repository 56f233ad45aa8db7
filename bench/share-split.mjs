// Where a storage's share of a host request goes: its one large read
// (readCommitWindow in a window pull, scanRows in a bootstrap) or the
// small calls around it (the registry touch, the client record, the log's
// bounds). For each module, three hosts over storages of that module run
// in alternating rounds:
//   live            every call reaches the storage;
//   read replayed   the large read answered from a recording of the
//                   storage's own answers (bench/lib/floor.mjs `only`),
//                   every other call live;
//   floor           every call answered from the recording.
// live − floor is the storage's share (as alternate.mjs --floor, but over
// the module's own answers); live − read replayed is the large read's
// part of it, and read replayed − floor the small calls' part. Requests
// arrive in event-loop turns (alternate.mjs --arrive).
//
//   bun bench/share-split.mjs --server <tree>/packages/server/src/index-bun.ts \
//     [--figure window|bootstrap] [--rounds N] --module A.mjs --module B.mjs ...
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadCore, createHost, arriveInTurns, fill, windowPulls, bootstrap } from './lib/server.mjs';
import { replaying } from './lib/floor.mjs';
import { benchArgs } from './lib/args.mjs';

const { serverPath, modules, figure, rounds } = benchArgs('share-split.mjs', { figures: ['window', 'bootstrap'], rounds: 10 });
const read = figure === 'window' ? 'readCommitWindow' : 'scanRows';
const unit = figure === 'window' ? 'pull' : '1,000 rows';
const server = await import(pathToFileURL(serverPath).href);
const core = await loadCore(serverPath);
arriveInTurns();
const dir = mkdtempSync(join(tmpdir(), 'syncular-share-split-'));

/** µs per unit of one pass of the figure on `host`. */
async function pass(host, r) {
  if (figure === 'window') return 1e6 / (await windowPulls(host, 300)).pullsPerSec;
  return 1e9 / (await bootstrap(host, `boot-${r}`, 20_000)).rowsPerSec;
}

const runs = [];
try {
  let k = 0;
  for (const path of modules) {
    const mod = await import(pathToFileURL(path).href);
    const label = mod.label ?? path;
    for (const [part, only] of [
      ['live', undefined],
      [`${read} replayed`, new Set([read])],
      ['floor', null],
    ]) {
      const real = await mod.createStorage({ path: join(dir, `db${k++}.sqlite`), server });
      const replay = only === undefined ? undefined : replaying(real, only === null ? {} : { only });
      const host = await createHost(server, core, replay?.storage ?? real, 'window');
      if (figure === 'window') await fill(host, 'w', 3000, 1);
      else await fill(host, 'b', 200, 100);
      if (replay) {
        // One recorded pass; bootstrap's client id then stays that pass's.
        replay.record();
        if (figure === 'window') await windowPulls(host, 300);
        else await bootstrap(host, 'boot-rec', 20_000);
      }
      runs.push({ label, part, host, real, replay, values: [] });
    }
  }
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < runs.length; i++) {
      const run = runs[(i + r) % runs.length];
      run.replay?.replay();
      run.values.push(await pass(run.host, r));
    }
  }
} finally {
  for (const run of runs) await run.real.close?.();
  rmSync(dir, { recursive: true, force: true });
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const fmt = (x) => x.toFixed(0);
for (const run of runs) console.log(`${run.label}, ${run.part}: median ${fmt(median(run.values))} µs per ${unit}; rounds ${run.values.map(fmt).join(' ')}`);
for (const label of new Set(runs.map((r) => r.label))) {
  const [live, replayed, floor] = runs.filter((r) => r.label === label).map((r) => median(r.values));
  console.log(`${label}: share ${fmt(live - floor)} µs per ${unit} = ${read} ${fmt(live - replayed)} + the other calls ${fmt(replayed - floor)}`);
}
