// Process body for the worker_threads check, run in a child so a crash at
// teardown shows as a signal or exit code instead of killing the caller.
// Starts `count` workers at once, each with its own storage (alternating
// memory and file, closing or not, one terminated mid-work), waits for them
// and prints { finished, terminated, maxSeqs }.
import { Worker } from 'node:worker_threads';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [countArg, pushesArg] = process.argv.slice(2);
const count = Number(countArg);
const dir = mkdtempSync(join(tmpdir(), 'syncular-workers-'));
const url = new URL('./worker.mjs', import.meta.url);
const runs = [];
let terminated = 0;
for (let i = 0; i < count; i++) {
  const workerData = {
    url: i % 2 === 0 ? 'sqlite::memory:' : `sqlite:${join(dir, `w${i}.db`)}`,
    pushes: Number(pushesArg),
    close: i % 3 !== 0,
    leaveOpen: i % 4 === 1,
  };
  const w = new Worker(url, { workerData });
  runs.push(
    new Promise((resolve, reject) => {
      let result;
      w.on('message', (m) => {
        result = m;
      });
      w.on('error', reject);
      w.on('exit', (code) => resolve({ code, result }));
    }),
  );
  // The last worker is terminated while it works.
  if (i === count - 1) {
    setTimeout(() => {
      terminated++;
      w.terminate();
    }, 30);
  }
}
const out = await Promise.all(runs);
try {
  rmSync(dir, { recursive: true, force: true });
} catch (err) {
  // Windows refuses to delete an open file, and a worker that did not close
  // its storage leaves its database open until this process exits.
  if (!(process.platform === 'win32' && err.code === 'EBUSY')) throw err;
}
const finished = out.filter((o) => o.code === 0 && o.result !== undefined).length;
process.stdout.write(`${JSON.stringify({ finished, terminated, maxSeqs: out.map((o) => o.result?.max ?? null), codes: out.map((o) => o.code) })}\n`);
