// Long crash-safety run: 200 SIGKILLs (STRESS_KILLS to change), on a SQLite
// file, or with `pgUrl` on a PostgreSQL schema. Half the children push from
// one loop, half from four concurrent loops, so commits (on SQLite, commit
// groups) are in flight together when the process is killed.
import { runCrash } from './lib/crash.mjs';

const SUMMED = ['kills', 'survived', 'commitsChecked', 'acked', 'lost', 'partial', 'duplicates', 'gaps', 'retries', 'replays', 'exactlyOnce'];

export async function run({ kills = Number(process.env.STRESS_KILLS ?? 200), log = console.error, pgUrl } = {}) {
  const seed = Date.now() % 1e9;
  const half = Math.ceil(kills / 2);
  const one = await runCrash({ kills: half, seed, log, pgUrl, pushers: 1 });
  const four = await runCrash({ kills: kills - half, seed: seed + 1, log, pgUrl, pushers: 4 });
  const f = { engine: one.engine, phases: `${one.kills} kills with 1 pusher, ${four.kills} with 4`, problems: [...one.problems, ...four.problems] };
  for (const k of SUMMED) f[k] = one[k] + four[k];
  return f;
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await run());
