// Generated attacks on registered-query tenant isolation: STRESS_ATTACK_QUERIES
// (default 10,000) queries per engine from stress/lib/attack-grammar.mjs,
// deterministic for a seed (STRESS_ATTACK_SEED, default 20240624), in both
// request forms and the transaction-bound form, against two seeded
// partitions (__test__/support/isolation.mjs). Counted: queries, answered,
// refused (by code), leaks (cells of the other partition), internal (cells
// of internal tables or catalogs), writes (digest of both partitions
// changed), uncoded errors, hangs (not settled within queryTimeoutMs +
// margin), transactions unusable after their query, child crashes, limit
// overruns (settled past queryTimeoutMs + overrunMs, default 100), event-loop
// stalls (past stallMs, default 50) and memory overruns (RSS growth past
// maxResultBytes plus a stated slack); see lib/attack-child.mjs for the
// oracles. Defaults are issue 28's acceptance figures, for a release build;
// tests on a debug build pass a margin.
// The queries run in child processes (stress/lib/attack-child.mjs); a hang
// ends its child and the run goes on from the next query in a new one.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { endRunaways } from '../__test__/support/isolation.mjs';
import { Psql } from './lib/sql.mjs';

const CHILD = fileURLToPath(new URL('./lib/attack-child.mjs', import.meta.url));

function runChild(cfg, onLine) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CHILD, JSON.stringify(cfg)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    let last;
    let started;
    let err = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const l = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!l.startsWith('{')) continue;
        const o = JSON.parse(l);
        last = Date.now();
        if (o.start === undefined) onLine(o);
        else started = o.start;
      }
    });
    child.stderr.on('data', (d) => (err = (err + d).slice(-2000)));
    // A child blocked on its JS thread (a synchronous runaway call) cannot
    // report its hang: once a query has started, silence longer than a
    // call's deadline plus room for the digest ends the child.
    last = Date.now();
    const watch = setInterval(() => {
      const limit = started === undefined ? 120_000 : (cfg.queryTimeoutMs + cfg.marginMs) * 2 + 5000;
      if (Date.now() - last > limit) child.kill('SIGKILL');
    }, 500);
    child.on('exit', (code, signal) => {
      clearInterval(watch);
      resolve({ code, signal, err });
    });
  });
}

/**
 * One engine: { engine, queries, answered, refused: {code: n}, leaks,
 * internal, writes, uncoded, hangs, txBroken, crashes, examples, ms }.
 */
export async function runEngine(engine, { queries = Number(process.env.STRESS_ATTACK_QUERIES ?? 10_000), seed = Number(process.env.STRESS_ATTACK_SEED ?? 20240624), queryTimeoutMs = 200, marginMs = 3000, overrunMs, stallMs, maxResultBytes, pgUrl, log = () => {} } = {}) {
  const t0 = Date.now();
  const r = { engine, queries: 0, answered: 0, refused: {}, leaks: 0, internal: 0, writes: 0, uncoded: 0, hangs: 0, txBroken: 0, crashes: 0, overruns: 0, stalls: 0, memory: 0, maxMs: 0, maxOverMs: 0, maxStallMs: 0, maxRssMiB: 0, examples: [] };
  const example = (what, l) => {
    if (r.examples.filter((e) => e.what === what).length < 8) r.examples.push({ what, i: l.i, form: l.form, sql: l.sql, params: l.params, detail: l.foreign ?? l.internal ?? l.txBroken ?? l.message ?? l.code });
  };
  const dir = engine === 'sqlite-file' ? mkdtempSync(join(tmpdir(), 'syncular-attack-')) : undefined;
  const schemaPrefix = `syncular_attack_${process.pid}_${Date.now().toString(36)}`;
  let next = 0;
  try {
    while (next < queries) {
      let lastIndex = next - 1;
      let hung = false;
      const exit = await runChild({ engine, url: pgUrl, schemaPrefix, dir, start: next, end: queries, seed, queryTimeoutMs, marginMs, overrunMs, stallMs, maxResultBytes }, (l) => {
        lastIndex = l.i;
        r.queries += 1;
        if (l.kind === 'answered') r.answered += 1;
        else if (l.kind === 'refused') r.refused[l.code] = (r.refused[l.code] ?? 0) + 1;
        else if (l.kind === 'uncoded') {
          r.uncoded += 1;
          example('uncoded', l);
        } else if (l.kind === 'hang') {
          r.hangs += 1;
          hung = true;
          example('hang', l);
        }
        if (l.foreign) {
          r.leaks += 1;
          example('leak', l);
        }
        if (l.internal) {
          r.internal += 1;
          example('internal', l);
        }
        if (l.write) {
          r.writes += 1;
          example('write', l);
        }
        if (l.txBroken) {
          r.txBroken += 1;
          example('tx unusable', l);
        }
        if (l.overrun) {
          r.overruns += 1;
          example('overrun', l);
        }
        if (l.stall) {
          r.stalls += 1;
          example('stall', l);
        }
        if (l.memory) {
          r.memory += 1;
          example('memory', l);
        }
        r.maxMs = Math.max(r.maxMs, l.ms ?? 0);
        if (l.code === 'ERR_SYNCULAR_QUERY_TIMEOUT') r.maxOverMs = Math.max(r.maxOverMs, (l.ms ?? 0) - queryTimeoutMs);
        r.maxStallMs = Math.max(r.maxStallMs, l.stallMs ?? 0);
        r.maxRssMiB = Math.max(r.maxRssMiB, l.rssMiB ?? 0);
        if (r.queries % 1000 === 0) log(`${engine}: ${r.queries} queries`);
      });
      if (pgUrl) await endRunaways(pgUrl);
      if (!hung && lastIndex < queries - 1) {
        // Killed by the watchdog (a blocked JS thread) or crashed: the query after the last reported one.
        const i = lastIndex + 1;
        r.queries += 1;
        if (exit.signal === 'SIGKILL') {
          r.hangs += 1;
          r.examples.push({ what: 'hang', i, detail: 'JS thread blocked; child killed' });
        } else {
          r.crashes += 1;
          r.examples.push({ what: 'crash', i, detail: `${exit.signal ?? `exit ${exit.code}`}: ${exit.err.slice(-600)}` });
        }
        lastIndex = i;
      }
      next = lastIndex + 1;
    }
  } finally {
    if (dir) rmSync(dir, { recursive: true, force: true });
    if (pgUrl) await dropSchemas(pgUrl, schemaPrefix);
  }
  r.ms = Date.now() - t0;
  return r;
}

async function dropSchemas(url, prefix) {
  const psql = new Psql(url);
  try {
    const rows = await psql.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE '${prefix}%'`);
    for (const { nspname } of rows) await psql.dropSchema(nspname, { ifExists: false });
  } finally {
    await psql.close();
  }
}

/** Whether an engine's figures pass: no leak, internal read, write, uncoded error, hang, broken transaction or crash. */
export function clean(r) {
  return r.queries > 0 && r.leaks + r.internal + r.writes + r.uncoded + r.hangs + r.txBroken + r.crashes + r.overruns + r.stalls + r.memory === 0;
}

/** The table text of one engine's figures. */
export function describeRun(r) {
  const refused = Object.values(r.refused).reduce((a, b) => a + b, 0);
  const codes = Object.entries(r.refused)
    .sort((a, b) => b[1] - a[1])
    .map(([c, n]) => `${c} ${n}`)
    .join(', ');
  return `${r.queries}: answered ${r.answered}, refused ${refused} (${codes}); leaks ${r.leaks}, internal ${r.internal}, writes ${r.writes}, uncoded ${r.uncoded}, hangs ${r.hangs}, tx unusable ${r.txBroken}, crashes ${r.crashes}, limit overruns ${r.overruns} (longest call ${r.maxMs} ms, furthest past the limit ${r.maxOverMs} ms), stalls ${r.stalls} (longest ${r.maxStallMs} ms), memory overruns ${r.memory} (largest RSS growth ${r.maxRssMiB} MiB)`;
}

/** The engines of a stress run: SQLite (memory and file), PostgreSQL when `pgUrl` is given. */
export async function run({ pgUrl, log = () => {}, queries } = {}) {
  const out = [];
  for (const engine of ['sqlite-memory', 'sqlite-file']) out.push(await runEngine(engine, { log, queries }));
  if (pgUrl) out.push(await runEngine('postgres', { log, pgUrl, queries }));
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const runs = await run({ pgUrl: process.env.SYNCULAR_TEST_PG_URL, log: (m) => console.error(`[attack] ${m}`) });
  for (const r of runs) console.log(`${r.engine}: ${describeRun(r)} (${(r.ms / 1000).toFixed(0)} s)`);
  for (const r of runs) for (const e of r.examples) console.log(JSON.stringify({ engine: r.engine, ...e }));
  process.exitCode = runs.every(clean) ? 0 : 1;
}
