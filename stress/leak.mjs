// Long leak run: 1M mixed calls (STRESS_LEAK_CALLS) under --expose-gc.
import { runLeak } from './lib/leak.mjs';

export async function run({ calls = Number(process.env.STRESS_LEAK_CALLS ?? 1_000_000) } = {}) {
  return runLeak({ calls, dropEvery: 2000 });
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await run());
