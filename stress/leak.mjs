// Long leak run: 1M mixed calls (STRESS_LEAK_CALLS) under --expose-gc, on a
// SQLite file or (`pgUrl`) a PostgreSQL schema.
import { runLeak } from './lib/leak.mjs';

export async function run({ calls = Number(process.env.STRESS_LEAK_CALLS ?? 1_000_000), pgUrl } = {}) {
  return runLeak({ calls, dropEvery: 2000, pgUrl });
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await run());
