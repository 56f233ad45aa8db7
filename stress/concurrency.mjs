// Long concurrency run: 50 rounds of 64 deliveries of one commit (file and
// memory), two processes for 20 s, 8 worker threads.
import { runSameCommit, runTwoProcesses, runWorkers } from './lib/concurrency.mjs';

export async function run({ seconds = Number(process.env.STRESS_SECONDS ?? 20) } = {}) {
  const sameFile = await runSameCommit({ rounds: 50, n: 64 });
  const sameMemory = await runSameCommit({ rounds: 50, n: 64, url: 'sqlite::memory:' });
  const twoProcesses = await runTwoProcesses({ ms: seconds * 1000, inflight: 4 });
  const workers = await runWorkers({ workers: 8, pushes: 200 });
  return { sameFile, sameMemory, twoProcesses, workers };
}

/** The PostgreSQL part: 50 rounds of 64 deliveries, two processes (two pools) for 20 s. */
export async function runPg({ pgUrl, seconds = Number(process.env.STRESS_SECONDS ?? 20) }) {
  const same = await runSameCommit({ rounds: 50, n: 64, pgUrl });
  const twoProcesses = await runTwoProcesses({ ms: seconds * 1000, inflight: 4, pgUrl });
  return { same, twoProcesses };
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(JSON.stringify(await run(), null, 2));
