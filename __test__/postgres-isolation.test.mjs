// PostgreSQL-only isolation of registered queries, against a live server:
// what the engine enforces beyond the shared rewrite (a parse-tree guard
// that binds every table to the call's partition, a confined search_path,
// a time limit, a savepoint around the transaction-bound form). Runs
// whenever the contract suite's postgres engine does (SYNCULAR_TEST_PG_URL;
// required under CI=true, see support/engines.mjs).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { engines } from './support/engines.mjs';
import { taskRow, withStorage, writeCommit } from './support/harness.mjs';

const pg = engines.find((e) => e.dialect === 'postgres');
const P1 = 'iso-1';
const P2 = 'iso-2';

async function seed(storage) {
  await writeCommit(storage, P1, [
    { table: 'tasks', row: taskRow('t1', { title: 'one', project: 'p1' }) },
    { table: 'tasks', row: taskRow('t2', { title: 'two', project: 'p1' }) },
  ]);
  await writeCommit(storage, P2, [{ table: 'tasks', row: taskRow('t9', { title: 'other partition', project: 'p9' }) }]);
}

const q = (sql, params = [], tables = []) => ({ sql, params, tables });

async function titles(storage, partition) {
  const r = await storage.queryAuthoritative(partition, q('SELECT id, title FROM tasks ORDER BY id', [], ['tasks']));
  return r.rows.map((row) => `${row.id}:${row.title}`);
}

/** Rejects with a plain Error carrying `code`. */
async function rejectsCode(promise, code, label) {
  let caught;
  await assert.rejects(promise, (e) => {
    caught = e;
    return true;
  }, label);
  assert.equal(caught.code, code, `${label}: ${caught.code} ${caught.message}`);
  return caught;
}

if (pg) {
  describe('postgres: registered query isolation', () => {
    test('a data-modifying CTE hidden from the rewrite writes nothing, in a transaction or not', async () => {
      await withStorage(pg, async (storage) => {
        await seed(storage);
        // The rewrite reads E'\'' as a string ending at the backslash, so
        // the DELETE looks like string text to it; PostgreSQL does not.
        const hidden = q("WITH x AS (SELECT E'\\''), d AS (DELETE FROM tasks RETURNING 1) SELECT count(*) AS n FROM d -- '");
        const tx = await storage.begin(P1);
        await tx.lockPartitionForPush();
        await rejectsCode(tx.queryAuthoritative(hidden), 'ERR_SYNCULAR_QUERY_REFUSED', 'tx form');
        // The transaction goes on, and commits what it wrote itself.
        await tx.upsertRow('tasks', taskRow('t3', { title: 'three', project: 'p1' }), { opIndex: 0 });
        await tx.commit();
        await rejectsCode(storage.queryAuthoritative(P1, hidden), 'ERR_SYNCULAR_QUERY_REFUSED', 'storage form');
        assert.deepStrictEqual(await titles(storage, P1), ['t1:one', 't2:two', 't3:three']);
        assert.deepStrictEqual(await titles(storage, P2), ['t9:other partition']);
      });
    });

    test('a failing query inside a transaction leaves the transaction usable', async () => {
      await withStorage(pg, async (storage) => {
        await seed(storage);
        const tx = await storage.begin(P1);
        await tx.lockPartitionForPush();
        await assert.rejects(tx.queryAuthoritative(q('SELECT 1 / 0 AS x')), /division by zero/);
        const r = await tx.queryAuthoritative(q('SELECT count(*) AS n FROM tasks', [], ['tasks']));
        assert.equal(r.rows[0].n, 2);
        await tx.upsertRow('tasks', taskRow('t3', { title: 'three', project: 'p1' }), { opIndex: 0 });
        await tx.commit();
        assert.deepStrictEqual(await titles(storage, P1), ['t1:one', 't2:two', 't3:three']);
      });
    });

    test('syntax the rewrite misreads still reads one partition only', async () => {
      await withStorage(pg, async (storage) => {
        await seed(storage);
        // With no declared table the rewrite leaves these alone; the
        // guard binds them to the caller's partition.
        for (const sql of [
          'SELECT id FROM ONLY tasks ORDER BY id',
          'SELECT id FROM (TABLE tasks) t ORDER BY id',
          'SELECT id FROM U&"t\\0061sks" ORDER BY id',
          'SELECT id FROM /* /* */ tasks */ tasks ORDER BY id',
        ]) {
          let r;
          try {
            r = await storage.queryAuthoritative(P1, q(sql));
          } catch (e) {
            assert.ok(['ERR_SYNCULAR_QUERY_REFUSED', 'ERR_SYNCULAR_QUERY_PLAN'].includes(e.code), `${sql}: ${e.code} ${e.message}`);
            continue;
          }
          assert.deepStrictEqual(r.rows.map((row) => row.id), ['t1', 't2'], sql);
        }
        for (const sql of [
          'SELECT * FROM U&"sync\\005fcommits"',
          "SELECT query_to_xml('select * from tasks', true, true, '') AS x",
          "SELECT table_to_xml('sync_commits', true, true, '') AS x",
          "SELECT pg_read_file('PG_VERSION') AS x",
          'SELECT * FROM pg_catalog.pg_authid',
          'SELECT ctid, xmin FROM tasks',
          'SELECT * FROM tasks FOR UPDATE',
          'SELECT * INTO stolen FROM tasks',
        ]) {
          await assert.rejects(storage.queryAuthoritative(P1, q(sql)), (e) => {
            assert.ok(['ERR_SYNCULAR_QUERY_REFUSED', 'ERR_SYNCULAR_QUERY_PLAN'].includes(e.code), `${sql}: ${e.code} ${e.message}`);
            return true;
          });
        }
      });
    });

    test('set_config is refused and no setting outlives a query on the pooled connection', async () => {
      await withStorage(
        pg,
        async (storage) => {
          await seed(storage);
          for (const sql of [
            "SELECT set_config('search_path', 'pg_catalog', false) AS x",
            "SELECT current_setting('search_path') AS x",
          ]) {
            await rejectsCode(storage.queryAuthoritative(P1, q(sql)), 'ERR_SYNCULAR_QUERY_REFUSED', sql);
            const tx = await storage.begin(P1);
            await rejectsCode(tx.queryAuthoritative(q(sql)), 'ERR_SYNCULAR_QUERY_REFUSED', `tx: ${sql}`);
            await tx.rollback();
          }
          // Each query runs with search_path confined and a time limit;
          // on the one pooled connection, the storage's own statements
          // still find its tables afterwards, in and out of transactions.
          for (let i = 0; i < 3; i++) {
            await storage.queryAuthoritative(P1, q('SELECT count(*) AS n FROM tasks', [], ['tasks']));
            const tx = await storage.begin(P1);
            await tx.lockPartitionForPush();
            await tx.queryAuthoritative(q('SELECT count(*) AS n FROM tasks', [], ['tasks']));
            await tx.upsertRow('tasks', taskRow(`n${i}`, { title: 'new', project: 'p1' }), { opIndex: 0 });
            await tx.commit();
          }
          assert.equal((await titles(storage, P1)).length, 5);
          assert.equal(await storage.getMaxCommitSeq(P1), 1);
        },
        { opts: { maxConnections: 1 } },
      );
    });

    test('parameters bind by each call’s own types on one connection', async () => {
      await withStorage(
        pg,
        async (storage) => {
          const v = async (param) => (await storage.queryAuthoritative(P1, q('SELECT ? AS v', [param]))).rows[0].v;
          assert.equal(await v(1.5), 1.5);
          assert.equal(await v(42), 42);
          assert.equal(await v('a string'), 'a string');
          assert.equal(await v(null), null);
          assert.equal(await v(2.25), 2.25);
          const tx = await storage.begin(P1);
          assert.equal((await tx.queryAuthoritative(q('SELECT ? AS v', [1.5]))).rows[0].v, 1.5);
          assert.equal((await tx.queryAuthoritative(q('SELECT ? AS v', [42]))).rows[0].v, 42);
          assert.equal((await tx.queryAuthoritative(q('SELECT ? AS v', ['s']))).rows[0].v, 's');
          await tx.rollback();
        },
        { opts: { maxConnections: 1 } },
      );
    });

    test('a runaway recursive CTE stops at the time limit with its code; other calls keep working', async () => {
      await withStorage(
        pg,
        async (storage) => {
          await seed(storage);
          const runaway = q('WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) AS c FROM r');
          const stopped = rejectsCode(storage.queryAuthoritative(P1, runaway), 'ERR_SYNCULAR_QUERY_TIMEOUT', 'storage form');
          // Meanwhile, on the other connection.
          assert.deepStrictEqual(await titles(storage, P1), ['t1:one', 't2:two']);
          const err = await stopped;
          assert.match(err.message, /300 ms/);
          assert.deepStrictEqual(await titles(storage, P2), ['t9:other partition']);
          // In a transaction: the transaction survives the timeout.
          const tx = await storage.begin(P1);
          await tx.lockPartitionForPush();
          await rejectsCode(tx.queryAuthoritative(runaway), 'ERR_SYNCULAR_QUERY_TIMEOUT', 'tx form');
          await tx.upsertRow('tasks', taskRow('t3', { title: 'three', project: 'p1' }), { opIndex: 0 });
          await tx.commit();
          assert.deepStrictEqual(await titles(storage, P1), ['t1:one', 't2:two', 't3:three']);
        },
        { opts: { maxConnections: 2, queryTimeoutMs: 300 } },
      );
    });
  });
}
