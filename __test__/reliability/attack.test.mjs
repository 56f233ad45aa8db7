// Generated registered-query attacks, short version (long: stress/attack.mjs,
// 10,000 per engine): 300 queries per engine from the grammar in
// stress/lib/attack-grammar.mjs, with a seed that changes per run (printed
// in a failure, STRESS_ATTACK_SEED reproduces it). No answer may hold a
// cell of the other partition or of an internal table, nothing may be
// written, every error carries a code, every call settles within the
// storage's queryTimeoutMs plus a margin, no call stalls the event loop past
// a margin or grows the process's memory past maxResultBytes plus a stated
// slack, and a transaction stays usable after its query.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { engines } from '../support/engines.mjs';
import { TIME_SCALE } from '../support/emulation.mjs';
import { noShell } from '../support/sqlite-cli.mjs';
import { describeRun, runEngine } from '../../stress/attack.mjs';

const QUERIES = 300;
const seed = Number(process.env.STRESS_ATTACK_SEED ?? Date.now() % 1e9);

describe('reliability: generated registered-query attacks', () => {
  for (const engine of engines) {
    // The file engine's attacks ANALYZE the file through the sqlite3 shell.
    const skip = engine.name === 'sqlite-file' && noShell;
    test(`${engine.name}: ${QUERIES} generated attacks (seed ${seed}): no leak, write, uncoded error, hang, overrun, stall or memory overrun`, { skip }, async () => {
      const pgUrl = engine.dialect === 'postgres' ? engine.requireUrl() : undefined;
      // Debug builds on a shared machine: margins over the acceptance
      // figures (100 ms past the limit, 50 ms of stall), which the stress
      // run on a release build checks.
      const r = await runEngine(engine.name, { queries: QUERIES, seed, pgUrl, overrunMs: 500 * TIME_SCALE, stallMs: 150 * TIME_SCALE });
      const summary = describeRun(r);
      assert.equal(r.queries, QUERIES, summary);
      assert.ok(r.answered > QUERIES / 10, `too few answered to check anything: ${summary}`);
      const failures = r.examples.map((e) => `#${e.i} ${e.what} [${e.form ?? ''}] ${e.sql ?? ''} ${JSON.stringify(e.params ?? [])}: ${JSON.stringify(e.detail)}`);
      assert.deepEqual(
        { leaks: r.leaks, internal: r.internal, writes: r.writes, uncoded: r.uncoded, hangs: r.hangs, txUnusable: r.txBroken, crashes: r.crashes, overruns: r.overruns, stalls: r.stalls, memory: r.memory, failures },
        { leaks: 0, internal: 0, writes: 0, uncoded: 0, hangs: 0, txUnusable: 0, crashes: 0, overruns: 0, stalls: 0, memory: 0, failures: [] },
        summary,
      );
    });
  }
});
