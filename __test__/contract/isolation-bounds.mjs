// Two boundaries of registered queries and point reads that hold whatever
// the caller sends (issue 19, classes 3 and 5):
// - a partition is a string, always: a storage-level member refuses any
//   other value with ERR_SYNCULAR_INVALID_ARGUMENT, and never takes a
//   number for a transaction lease (which would read inside another
//   tenant's open push, uncommitted rows included);
// - a registered query stops near its time limit even when one function
//   call is made expensive by its arguments, and a query that turns out
//   expensive does not hold the host's event loop.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { taskRow, withStorage, writeCommit } from '../support/harness.mjs';
import { OWN, VICTIM, VICTIM_MARK, scanAnswer, seedTenants } from '../support/isolation.mjs';
import { TIME_SCALE } from '../support/emulation.mjs';
import { noShell } from '../support/sqlite-cli.mjs';
import { measured } from '../support/measure.mjs';

const INVALID = 'ERR_SYNCULAR_INVALID_ARGUMENT';
const TIMEOUT = 'ERR_SYNCULAR_QUERY_TIMEOUT';

// Storage members whose first argument is not a partition.
const UNPARTITIONED = new Set(['ensureSchema', 'listPartitionRegistry', 'listPartitions', 'ping', 'stats', 'backup', 'restoreLayout', 'close']);

/** Settles `fn()` as { ok, value } or { ok: false, error }; a synchronous throw counts as a rejection. */
async function settle(fn) {
  try {
    return { ok: true, value: await fn() };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * The longest gap between ticks of a 5 ms interval while `fn` runs, less
 * the time the thread waited for a CPU (see `measured`).
 */
async function maxStall(fn) {
  const r = await measured(fn);
  return { out: r.ok ? { ok: true, value: r.value } : { ok: false, error: r.error }, stall: r.stall };
}

export function define(engine) {
  const sqlite = engine.dialect === 'sqlite';

  describe(`${engine.name}: a partition is a string`, () => {
    test("a number where a partition belongs never reads inside another tenant's open transaction", async () => {
      await withStorage(engine, async (storage) => {
        await seedTenants(storage);
        // The victim's push is open, with a row not yet committed.
        const tx = await storage.begin(VICTIM);
        try {
          await tx.lockPartitionForPush();
          await tx.upsertRow('tasks', taskRow(`${VICTIM_MARK}-uncommitted`, { title: `${VICTIM_MARK} uncommitted`, project: 'p' }));
          const problems = [];
          for (let lease = -1; lease <= 32; lease += 1) {
            const calls = {
              getRow: () => storage.getRow(lease, 'tasks', `${VICTIM_MARK}-uncommitted`),
              getPushResult: () => storage.getPushResult(lease, 'c', 'k'),
              scanRows: () => storage.scanRows(lease, { table: 'tasks', scopeFilter: { project: 'p' }, limit: 10 }),
              scanRowsByIndex: () => storage.scanRowsByIndex(lease, { table: 'tasks', index: 'tasks_by_title', values: [`${VICTIM_MARK} uncommitted`], limit: 10 }),
              readServeGate: () => storage.readServeGate(lease, 1),
              queryAuthoritative: () => storage.queryAuthoritative(lease, { sql: 'SELECT id, title FROM tasks', params: [], tables: ['tasks'] }),
            };
            for (const [name, call] of Object.entries(calls)) {
              const r = await settle(call);
              if (r.ok) problems.push(`${name}(${lease}) answered ${JSON.stringify(scanAnswer({ rows: [r.value ?? {}] }))}`);
              else if (r.error?.code !== INVALID) problems.push(`${name}(${lease}) → ${r.error?.code} ${r.error?.message}`);
            }
          }
          assert.deepEqual(problems, []);
        } finally {
          await tx.rollback();
        }
      });
    });

    test('every storage-level member refuses a partition that is not a string', async () => {
      await withStorage(engine, async (storage) => {
        await seedTenants(storage);
        const members = Object.keys(storage).filter((k) => typeof storage[k] === 'function' && !UNPARTITIONED.has(k));
        assert.ok(members.length > 40, `only ${members.length} members`);
        const problems = [];
        for (const name of members) {
          for (const bad of [0, 1, 7.5, null, undefined, true, {}, ['p'], 1n, new String(OWN)]) {
            const r = await settle(() => storage[name](bad, 'tasks', 'x', 1, 1, 1));
            if (r.ok) problems.push(`${name}(${String(bad)}) answered`);
            else if (r.error?.code !== INVALID) problems.push(`${name}(${String(bad)}) → ${r.error?.code} ${r.error?.message}`);
          }
        }
        assert.deepEqual(problems, []);
        // A string partition still works.
        assert.equal((await storage.getRow(OWN, 'tasks', 'own-1'))?.rowId, 'own-1');
      });
    });
  });

  describe(`${engine.name}: registered queries stop near their limit`, { skip: !sqlite && 'PostgreSQL: __test__/postgres-isolation.test.mjs' }, () => {
    // Each row makes a 400 KB string (under this query's value limit) and
    // searches it for a needle that is almost there: seconds per row with
    // SQLite's own instr, where the progress handler cannot interrupt.
    const slowRows =
      "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) AS n FROM r WHERE instr(printf('%.*c', 400000, 'a'), printf('%.*c', 100000, 'a') || 'b') = 0";

    for (const form of ['storage', 'tx']) {
      test(`${form}: one expensive call per row still stops at the time limit, off the event loop`, async () => {
        await withStorage(
          engine,
          async (storage) => {
            await seedTenants(storage);
            const run = async (sql) => {
              if (form === 'storage') return storage.queryAuthoritative(OWN, { sql, params: [], tables: [] });
              const tx = await storage.begin(OWN);
              try {
                return await tx.queryAuthoritative({ sql, params: [], tables: [] });
              } finally {
                await tx.rollback();
              }
            };
            const started = performance.now();
            const { out, stall } = await maxStall(() => run(slowRows));
            const took = performance.now() - started;
            assert.equal(out.ok, false);
            assert.equal(out.error.code, TIMEOUT, out.error.message);
            // The limit is 200 ms; one instruction costs at most milliseconds
            // (times TIME_SCALE on a slower, emulated machine).
            assert.ok(took < 1500 * TIME_SCALE, `took ${took.toFixed(0)} ms`);
            assert.ok(stall < 250 * TIME_SCALE, `event loop stalled ${stall.toFixed(0)} ms`);

            // Sizes set by an argument are bounded (under 1 MiB): not built,
            // and the query fails naming the value bound (printf too, where
            // SQLite's own would answer NULL).
            const sized = [
              "SELECT printf('%.*c', 2000000000, 'x') AS s",
              "SELECT printf('%1000000000d', 1) AS s",
              "SELECT length(printf('%.*c', 1000000, 'x')) AS s",
              "SELECT length(printf('%.*c', 400000, 'x') || printf('%.*c', 400000, 'x')) AS s",
              "SELECT length(replace(printf('%.*c', 400000, 'x'), 'x', 'xx')) AS s",
            ];
            for (const sql of sized) {
              const t = performance.now();
              const r = await maxStall(() => run(sql));
              assert.equal(r.out.error?.code, 'ERR_SYNCULAR_QUERY_RESULT_TOO_LARGE', sql);
              assert.match(r.out.error.message, /a value of more than \d+ bytes/, sql);
              assert.ok(performance.now() - t < 1000 * TIME_SCALE, sql);
              assert.ok(r.stall < 250 * TIME_SCALE, `${sql}: event loop stalled ${r.stall.toFixed(0)} ms`);
            }
            // Within the bounds, the same functions answer.
            const ok = await run("SELECT instr(printf('%.*c', 400000, 'a'), printf('%.*c', 200000, 'a') || 'b') AS n, length(replace(printf('%.*c', 100000, 'a'), 'aa', 'b')) AS m");
            assert.deepEqual(ok.rows, [{ n: 0, m: 50000 }]);
          },
          { opts: { queryTimeoutMs: 200 } },
        );
      });
    }

    test('functions that fail with their argument never print another tenant\'s value (analyzed file, many tenants)', { skip: (!engine.shared && 'needs a file') || noShell }, async () => {
      const shared = engine.shared();
      let storage = shared.open();
      try {
        await storage.ensureSchema((await import('../support/schema.mjs')).fixtureSchema());
        // The caller's rows are valid JSON paths; every other tenant's titles are not.
        await writeCommit(storage, OWN, [{ table: 'tasks', row: taskRow('own-1', { title: '$', project: 'p' }) }]);
        for (let t = 0; t < 20; t += 1) {
          const ops = [];
          for (let k = 0; k < 50; k += 1) ops.push({ table: 'tasks', row: taskRow(`v${t}-${k}`, { title: `${VICTIM_MARK} ${t}.${k}`, project: 'p' }) });
          await writeCommit(storage, `${VICTIM}-${t}`, ops);
        }
        await storage.close();
        execFileSync('sqlite3', [shared.path, 'ANALYZE']);
        storage = shared.open();
        await storage.ensureSchema((await import('../support/schema.mjs')).fixtureSchema());
        const problems = [];
        for (const sql of [
          "SELECT id FROM tasks WHERE json_extract('{}', title) IS NULL",
          "SELECT id FROM tasks WHERE json_extract('{}', title) IS NULL ORDER BY title",
          "SELECT id FROM tasks WHERE title > '' AND json_extract('{}', title) IS NULL ORDER BY score",
          "SELECT count(*) AS n FROM tasks WHERE likelihood(json_extract('{}', title) IS NULL, 0.99)",
          "SELECT a.id FROM tasks a JOIN tasks b ON json_extract('{}', b.title) IS NULL",
          "SELECT max(json_extract('{}', title)) AS m FROM tasks GROUP BY project_id",
        ]) {
          const r = await settle(() => storage.queryAuthoritative(OWN, { sql, params: [], tables: ['tasks'] }));
          const text = r.ok ? JSON.stringify(r.value.rows) : String(r.error?.message);
          if (text.includes(VICTIM_MARK)) problems.push(`${sql} → ${text.slice(0, 160)}`);
        }
        assert.deepEqual(problems, []);
      } finally {
        await storage.close();
      }
    });

    test('an own value of 200 KB (under the 1 MiB value limit) is still answered', async () => {
      await withStorage(engine, async (storage) => {
        await writeCommit(storage, OWN, [{ table: 'tasks', row: taskRow('big', { title: 'x'.repeat(200_000), project: 'p' }) }]);
        const r = await storage.queryAuthoritative(OWN, { sql: 'SELECT length(title) AS n FROM tasks', params: [], tables: ['tasks'] });
        assert.deepEqual(r.rows, [{ n: 200_000 }]);
        const t = await storage.queryAuthoritative(OWN, { sql: 'SELECT title FROM tasks', params: [], tables: ['tasks'] });
        assert.equal(t.rows[0].title.length, 200_000);
      });
    });
  });
}
