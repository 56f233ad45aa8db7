// Concurrency, short versions (issue 7 §2; long: stress/concurrency.mjs).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runSameCommit, runTwoProcesses, runWorkers } from '../../stress/lib/concurrency.mjs';
import { engines } from '../support/engines.mjs';
import { noShell } from '../support/sqlite-cli.mjs';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

// PostgreSQL joins with SYNCULAR_TEST_PG_URL (required under CI=true; see engines.mjs).
const pg = engines.find((e) => e.dialect === 'postgres');

describe('reliability: concurrency', () => {
  for (const [name, url] of [
    ['sqlite-file', undefined],
    ['sqlite-memory', 'sqlite::memory:'],
  ]) {
    test(`${name}: 64 concurrent deliveries of one commit apply once and replay 63 times`, async () => {
      const f = await runSameCommit({ rounds: 2, n: 64, url });
      assert.deepEqual(f, { deliveries: 128, applies: 2, replays: 126, mismatched: 0, extraCommits: 0 });
    });
  }

  test('two processes on one SQLite file and partition: nothing lost or duplicated, dense log, no lock errors', { skip: noShell }, async () => {
    // Every run must be correct; the scenario counts once a process has
    // waited for the other one's write lock. With the whole suite running
    // beside it, one process can be starved for most of a run, so up to
    // three runs are made for that wait to happen.
    let waited = 0;
    for (let run = 0; run < 3 && waited === 0; run++) {
      const f = await runTwoProcesses({ ms: 1200, inflight: 4 });
      assert.deepEqual(f.problems, []);
      assert.equal(f.lost, 0);
      assert.equal(f.duplicates, 0);
      assert.equal(f.gaps, 0);
      assert.equal(f.lockedErrors, 0);
      assert.equal(f.otherErrors, 0);
      assert.equal(f.commits, f.acked);
      assert.ok(f.perProcess.every((n) => n > 0), `both processes committed: ${f.perProcess}`);
      assert.ok(f.switches > 0, 'the two writers interleaved');
      waited = f.lockWaits;
    }
    assert.ok(waited > 0, 'a process waited for the other one\'s write lock (off-thread, a begin answered later) in one of three runs');
  });

  // Two processes creating one file met in the switch to WAL (each holding
  // SHARED and wanting to write page 1), and SQLite answered one of them
  // SQLITE_BUSY at once: "cannot open the SQLite database: database is
  // locked", in about 1 run in 12 of the test above; the open now tries the
  // switch again (conn.rs). This test did not hit that race in 36 rounds on
  // the build without the retry: it guards the behaviour, the test above
  // showed the bug.
  test('processes creating one new file at the same moment all open it', async () => {
    const program = `
      import { NativeStorage } from ${JSON.stringify(join(root, '__test__/support/package.mjs'))};
      import { fixtureSchema } from ${JSON.stringify(join(root, '__test__/support/schema.mjs'))};
      const s = new NativeStorage({ url: 'sqlite:' + process.argv[1] });
      await s.ensureSchema(fixtureSchema()).then(() => s.close()).then(() => console.log('ok'), (e) => { console.log(e.code + ': ' + e.message); process.exitCode = 1; });
    `;
    const dir = mkdtempSync(join(tmpdir(), 'syncular-create-'));
    try {
      for (let round = 0; round < 12; round++) {
        const path = join(dir, `new-${round}.db`);
        const outs = await Promise.all(
          Array.from({ length: 4 }, () => new Promise((resolve) => {
            execFile(process.execPath, ['--input-type=module', '-e', program, path], (err, stdout, stderr) => resolve(`${stdout.trim()}${err ? ` (${stderr.trim().slice(0, 200)})` : ''}`));
          })),
        );
        assert.deepEqual(outs, ['ok', 'ok', 'ok', 'ok'], `round ${round}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('worker_threads: the addon in several workers at once, each with its own storage, exits cleanly', async () => {
    const f = await runWorkers({ workers: 5, pushes: 15 });
    assert.deepEqual(f.problems, []);
    assert.equal(f.crashed, 0);
    assert.ok(f.finished >= 4, `${f.finished} workers finished`);
  });
});

if (pg) {
  describe('reliability: concurrency (postgres)', () => {
    test('64 concurrent deliveries of one commit apply once and replay 63 times', async () => {
      const f = await runSameCommit({ rounds: 2, n: 64, pgUrl: pg.requireUrl() });
      assert.deepEqual(f, { deliveries: 128, applies: 2, replays: 126, mismatched: 0, extraCommits: 0 });
    });

    test('two processes (two pools) on one schema and partition: nothing lost or duplicated, dense log, no errors', async () => {
      const f = await runTwoProcesses({ ms: 1200, inflight: 4, pgUrl: pg.requireUrl() });
      assert.equal(f.engine, 'postgres');
      assert.deepEqual(f.problems, []);
      assert.equal(f.lost + f.duplicates + f.gaps, 0);
      assert.equal(f.lockedErrors + f.otherErrors, 0);
      assert.equal(f.commits, f.acked);
      assert.ok(f.perProcess.every((n) => n > 0), `both processes committed: ${f.perProcess}`);
      assert.ok(f.switches > 0, 'the two writers interleaved');
    });
  });
}
