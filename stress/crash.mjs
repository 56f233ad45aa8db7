// Long crash-safety run: 200 SIGKILLs (STRESS_KILLS to change), on a SQLite
// file, or with `pgUrl` on a PostgreSQL schema.
import { runCrash } from './lib/crash.mjs';

export async function run({ kills = Number(process.env.STRESS_KILLS ?? 200), log = console.error, pgUrl } = {}) {
  return runCrash({ kills, seed: Date.now() % 1e9, log, pgUrl });
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await run());
