// Long hostile-input run: 10^5 JS cases (STRESS_FUZZ_CASES) in a child
// process (runJs(cases, pgUrl) on a PostgreSQL storage), so an abort shows up as a signal, and the Rust codec property
// tests with PROPTEST_CASES (STRESS_PROPTEST_CASES, per property, 3
// properties).
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runFuzz } from './lib/fuzz.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

function exec(cmd, args, opts) {
  return new Promise((resolve) => {
    execFile(cmd, args, { maxBuffer: 64 << 20, ...opts }, (error, stdout, stderr) => resolve({ error, stdout, stderr }));
  });
}

export async function runJs(cases, pgUrl) {
  const r = await exec(process.execPath, [fileURLToPath(import.meta.url), '--child', String(cases), ...(pgUrl ? [pgUrl] : [])], { timeout: 60 * 60_000 });
  // The seed line first, then the end, where a crash prints its error.
  if (r.error) return { cases: 0, crashed: true, problem: `${r.error.signal ?? `code ${r.error.code}`}: ${r.stderr.slice(0, 200)} … ${r.stderr.slice(-1200)}` };
  return { crashed: false, ...JSON.parse(r.stdout.trim().split('\n').pop()) };
}

export async function runRust(casesPerProperty) {
  const r = await exec('cargo', ['test', '--quiet', '--test', 'codec_proptest'], {
    cwd: ROOT,
    timeout: 60 * 60_000,
    env: { ...process.env, PROPTEST_CASES: String(casesPerProperty) },
  });
  const passed = /test result: ok\. (\d+) passed/.exec(r.stdout);
  const failed = /test result: FAILED\. \d+ passed; (\d+) failed/.exec(r.stdout);
  const properties = passed ? Number(passed[1]) : 0;
  return {
    ok: !r.error && properties > 0,
    properties,
    cases: r.error ? 0 : properties * casesPerProperty,
    // a failing property (a panic or a broken round trip); a build failure is not a panic
    panics: failed ? Number(failed[1]) : 0,
    built: passed !== null || failed !== null,
    problem: r.error ? `${r.stdout.slice(-1500)}${r.stderr.slice(-1500)}` : undefined,
  };
}

export async function run({
  cases = Number(process.env.STRESS_FUZZ_CASES ?? 100_000),
  proptestCases = Number(process.env.STRESS_PROPTEST_CASES ?? 34_000),
} = {}) {
  const js = await runJs(cases);
  const rust = await runRust(proptestCases);
  return { js, rust };
}

if (process.argv[2] === '--child') {
  // The seed goes to stderr first, so a failing run can be replayed (runFuzz's `seed`).
  const seed = Number(process.env.STRESS_FUZZ_SEED ?? Date.now() % 1e9);
  console.error(`fuzz: seed ${seed}`);
  const f = await runFuzz({ cases: Number(process.argv[3]), seed, log: console.error, pgUrl: process.argv[4] });
  process.stdout.write(`${JSON.stringify(f)}\n`);
} else if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify(await run(), null, 2));
}
