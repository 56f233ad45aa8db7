// PostgreSQL-only isolation of registered queries, against a live server:
// what the engine enforces beyond the shared rewrite (a parse-tree guard
// that binds every table to the call's partition, a confined search_path,
// a time limit, a savepoint around the transaction-bound form). Runs
// whenever the contract suite's postgres engine does (SYNCULAR_TEST_PG_URL;
// required under CI=true, see support/engines.mjs).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { engines } from './support/engines.mjs';
import { taskRow, withStorage, within, writeCommit } from './support/harness.mjs';
import { Psql } from '../stress/lib/sql.mjs';
import { fixtureSchema, notesTable, schema as makeSchema, tasksTable } from './support/schema.mjs';

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


/**
 * Many tenants, with statistics: 50 victim partitions of 40 rows whose
 * `title` fails every cast and time-zone lookup ("secret-<p>-<i>"), and
 * the attacker's own partition holding as many rows as all of them
 * together ("1": a valid integer, time zone offset and number), so that,
 * once ANALYZEd, the planner picks a sequential scan for the attacker's
 * partition: the case where a user term could meet other tenants' rows.
 */
const ATTACKER = 'attacker';
const VICTIMS = 50;
const ROWS = 40;

/** A storage on a fresh schema whose name the test knows (for ANALYZE). */
async function withTenants(opts, fn) {
  const { schema, open } = pg.shared();
  const storage = open(opts);
  try {
    await storage.ensureSchema(fixtureSchema());
    await seedTenants(storage, schema);
    return await fn(storage);
  } finally {
    await storage.close();
  }
}

async function seedTenants(storage, schema) {
  const commit = (partition, ids, title) =>
    writeCommit(
      storage,
      partition,
      ids.map((id) => ({ table: 'tasks', row: taskRow(id, { title: title(id), project: 'p1', count: 1 }) })),
    );
  const jobs = [];
  for (let p = 0; p < VICTIMS; p++) {
    const ids = Array.from({ length: ROWS }, (_, i) => `v${p}-${i}`);
    jobs.push(() => commit(`victim-${p}`, ids, (id) => `secret-${id}`));
  }
  for (let b = 0; b < VICTIMS; b++) {
    const ids = Array.from({ length: ROWS }, (_, i) => `a${b}-${i}`);
    jobs.push(() => commit(ATTACKER, ids, () => '1'));
  }
  // Attacker commits serialize on its partition lock; four at a time.
  const queue = [...jobs];
  await Promise.all([0, 1, 2, 3].map(async () => {
    while (queue.length) await queue.shift()();
  }));
  const psql = new Psql(pg.url, { schema });
  try {
    await psql.exec('ANALYZE tasks');
  } finally {
    await psql.close();
  }
}

/** Runs `sql` as `run` does; its error, if any, must not carry another partition's values. */
async function noLeak(run, sql, label) {
  try {
    const r = await run(q(sql, [], ['tasks']));
    const text = JSON.stringify(r.rows);
    assert.ok(!text.includes('secret'), `${label}: ${sql} returned another partition's rows: ${text.slice(0, 200)}`);
    return 'ok';
  } catch (e) {
    assert.ok(
      !String(e.message).includes('secret') && !String(e.message).includes('victim'),
      `${label}: ${sql} leaked another partition's value: ${e.code} ${e.message}`,
    );
    return e.code;
  }
}

const LEAKY = [
  // Equal in cost to the partition filter: evaluated first on a plain
  // flattened subquery's sequential scan.
  "SELECT id FROM tasks WHERE timezone(title, TIMESTAMPTZ '2020-01-01 00:00+00') IS NULL",
  "SELECT id FROM tasks WHERE date_trunc(title, TIMESTAMPTZ '2020-01-01 00:00+00') IS NULL",
  "SELECT id FROM tasks WHERE date_part(title, TIMESTAMPTZ '2020-01-01 00:00+00') IS NULL",
  "SELECT id FROM tasks WHERE to_date(title, 'YYYY') IS NULL",
  "SELECT id FROM tasks WHERE to_timestamp(title, 'YYYY') IS NULL",
  "SELECT id FROM tasks WHERE CASE WHEN title IS NULL THEN NULL ELSE timezone(title, TIMESTAMPTZ '2020-01-01 00:00+00') END IS NULL",
  // Extra terms narrow it to one row at a time.
  "SELECT id FROM tasks WHERE timezone(title, TIMESTAMPTZ '2020-01-01 00:00+00') IS NULL AND id = 'v7-3'",
  // Casts (dearer than the filter today, but the guarantee must not rest on cost).
  'SELECT id FROM tasks WHERE title::int = 1',
  "SELECT id FROM tasks WHERE (title || '')::int > 0 AND id = 'x'",
  'SELECT id FROM tasks WHERE CAST(title AS numeric) > 0',
  "SELECT id FROM tasks WHERE CASE WHEN count = 1 THEN title::int END = 1",
  'SELECT t.id FROM tasks t JOIN tasks u ON u.id = t.id WHERE t.title::int = 1',
  'SELECT id FROM (SELECT id, title FROM tasks) s WHERE timezone(title, TIMESTAMPTZ \'2020-01-01 00:00+00\') IS NULL',
  "WITH s AS (SELECT * FROM tasks) SELECT id FROM s WHERE timezone(title, TIMESTAMPTZ '2020-01-01 00:00+00') IS NULL",
];

if (pg) {
  describe('postgres: registered query isolation', () => {
    test('error-carrying functions over analyzed tables with many tenants never see another partition (storage form)', async () => {
      await withTenants(
        { maxConnections: 4 },
        async (storage) => {
          const leaks = [];
          for (const sql of LEAKY) {
            for (let round = 0; round < 6; round++) {
              // Six runs: custom plans, then the generic plan a cached statement may switch to.
              try {
                await noLeak((query) => storage.queryAuthoritative(ATTACKER, query), sql, `storage, run ${round}`);
              } catch (e) {
                leaks.push(e.message);
                break;
              }
            }
          }
          assert.deepStrictEqual(leaks, []);
          // The attacker's own rows are all there, and only those.
          const r = await storage.queryAuthoritative(ATTACKER, q('SELECT count(*) AS n, min(title) AS lo, max(title) AS hi FROM tasks', [], ['tasks']));
          assert.deepStrictEqual(r.rows, [{ n: VICTIMS * ROWS, lo: '1', hi: '1' }]);
          const v = await storage.queryAuthoritative('victim-7', q("SELECT count(*) AS n FROM tasks WHERE title LIKE 'secret-v7-%'", [], ['tasks']));
          assert.equal(v.rows[0].n, ROWS);
        },
      );
    });

    test('error-carrying functions over analyzed tables with many tenants never see another partition (transaction form)', async () => {
      await withTenants(
        { maxConnections: 4 },
        async (storage) => {
          const tx = await storage.begin(ATTACKER);
          await tx.lockPartitionForPush();
          // A staged, uncommitted row of the attacker's own is visible; nothing of another partition is.
          await tx.upsertRow('tasks', taskRow('staged', { title: '1', project: 'p1' }), { opIndex: 0 });
          const leaks = [];
          for (const sql of LEAKY) {
            for (let round = 0; round < 6; round++) {
              try {
                await noLeak((query) => tx.queryAuthoritative(query), sql, `tx, run ${round}`);
              } catch (e) {
                leaks.push(e.message);
                break;
              }
            }
          }
          assert.deepStrictEqual(leaks, []);
          const r = await tx.queryAuthoritative(q('SELECT count(*) AS n FROM tasks', [], ['tasks']));
          assert.equal(r.rows[0].n, VICTIMS * ROWS + 1);
          await tx.commit();
          const after = await storage.queryAuthoritative(ATTACKER, q('SELECT count(*) AS n FROM tasks', [], ['tasks']));
          assert.equal(after.rows[0].n, VICTIMS * ROWS + 1);
        },
      );
    });

    test('the views a session creates follow transactions, savepoints and schema changes', async () => {
      await withStorage(
        pg,
        async (storage) => {
          await seed(storage);
          // First use on the one connection: inside a push transaction that
          // then rolls back, taking the views it created with it.
          let tx = await storage.begin(P1);
          await tx.lockPartitionForPush();
          assert.equal((await tx.queryAuthoritative(q('SELECT count(*) AS n FROM tasks', [], ['tasks']))).rows[0].n, 2);
          await tx.rollback();
          // Storage form: views missing again, created again.
          assert.deepStrictEqual(await titles(storage, P2), ['t9:other partition']);
          // A failing query inside the transaction leaves its setting and
          // the transaction as they were; the next query sees its own partition.
          tx = await storage.begin(P2);
          await tx.lockPartitionForPush();
          await assert.rejects(tx.queryAuthoritative(q('SELECT 1 / 0 AS x')), /division by zero/);
          const r = await tx.queryAuthoritative(q('SELECT id FROM tasks ORDER BY id', [], ['tasks']));
          assert.deepStrictEqual(r.rows.map((row) => row.id), ['t9']);
          await tx.upsertRow('tasks', taskRow('t10', { title: 'ten', project: 'p9' }), { opIndex: 0 });
          await tx.commit();
          assert.deepStrictEqual(await titles(storage, P2), ['t10:ten', 't9:other partition']);
          assert.deepStrictEqual(await titles(storage, P1), ['t1:one', 't2:two']);
          // Retiring a table that the session's views read: the views go
          // with it, the others keep working.
          await storage.queryAuthoritative(P1, q('SELECT count(*) AS n FROM accounts', [], ['accounts']));
          await storage.ensureSchema(makeSchema(2, [tasksTable(), notesTable()]));
          assert.deepStrictEqual(await titles(storage, P1), ['t1:one', 't2:two']);
        },
        { opts: { maxConnections: 1 } },
      );
    });

    test('functions whose cost an argument sets take bounded literal sizes; long texts are refused before any work', async () => {
      await withStorage(pg, async (storage) => {
        await seed(storage);
        const refusedSql = [
          ["SELECT length(lpad('x', 200000000)) AS n", []],
          ["SELECT length(rpad('x', 10001)) AS n", []],
          ["SELECT length(repeat('x', ?)) AS n", [100_000_000]],
          ['SELECT length(lpad(title, count)) AS n FROM tasks', []],
          ["SELECT length(pg_catalog.lpad('x', 20000000 + 0)) AS n", []],
          ["SELECT length(lpad('x', CAST(200000000 AS int))) AS n", []],
          ["SELECT length(format('%200000000s', 'x')) AS n", []],
          ["SELECT length(format('%-10001s|', 'x')) AS n", []],
          ["SELECT length(format('%*s', ?, 'x')) AS n", [200_000_000]],
          ["SELECT length(format('%1$*2$s', 'x', 200000000)) AS n", []],
          ['SELECT length(format(?, 1)) AS n', ['%200000000s']],
        ];
        for (const [sql, params] of refusedSql) {
          const tables = sql.includes('tasks') ? ['tasks'] : [];
          await rejectsCode(storage.queryAuthoritative(P1, q(sql, params, tables)), 'ERR_SYNCULAR_QUERY_REFUSED', sql);
          const tx = await storage.begin(P1);
          await rejectsCode(tx.queryAuthoritative(q(sql, params, tables)), 'ERR_SYNCULAR_QUERY_REFUSED', `tx: ${sql}`);
          await tx.rollback();
        }
        // Within the bounds they run as before.
        const ok = await storage.queryAuthoritative(
          P1,
          q("SELECT length(lpad('x', 10000)) AS a, length(rpad('x', 3, '-')) AS b, length(repeat('ab', 10000)) AS c, format('%5s|%-3s|%2$s|%%', 'x', 'y') AS d"),
        );
        assert.deepStrictEqual(ok.rows, [{ a: 10000, b: 3, c: 20000, d: '    x|y  |y|%' }]);
        // A 20,000-term chain is refused before the rewrite or the parser reads it.
        const chain = `SELECT id FROM tasks WHERE ${Array(20_000).fill("id = '1'").join(' OR ')}`;
        const started = performance.now();
        const e = await rejectsCode(storage.queryAuthoritative(P1, q(chain, [], ['tasks'])), 'ERR_SYNCULAR_QUERY_REFUSED', 'chain');
        assert.match(e.message, /longer than 32768 bytes/);
        assert.ok(performance.now() - started < 1000, `refused after ${performance.now() - started} ms`);
        // Near the limit, still accepted.
        const near = `SELECT count(*) AS n FROM tasks WHERE ${Array(2_000).fill("id = 't1'").join(' OR ')}`;
        assert.equal((await storage.queryAuthoritative(P1, q(near, [], ['tasks']))).rows[0].n, 1);
      });
    });

    test('queries at the size bounds stop at the time limit, within a stated bound', async () => {
      const LIMIT = 200;
      // The bound this engine states: a registered query ends (with its
      // timeout code) no later than queryTimeoutMs + 250 ms; asserted
      // with a generous margin for a loaded machine.
      const MARGIN = 2000;
      await withStorage(
        pg,
        async (storage) => {
          await seed(storage);
          for (const sql of [
            "SELECT count(lpad('x', 10000)) AS n FROM generate_series(1, 100000000) g",
            "SELECT count(format('%10000s', g)) AS n FROM generate_series(1, 100000000) g",
            "SELECT length(string_agg(repeat('x', 10000), '')) AS n FROM generate_series(1, 100000000) g",
            "SELECT count(*) AS n FROM generate_series(1, 100000000000) g",
            'WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) AS n FROM r',
            // Beyond the bounds: refused at once (they used to run for
            // seconds inside one call).
            "SELECT length(lpad('x', 400000000)) AS n",
            "SELECT length(format('%400000000s', 'x')) AS n",
          ]) {
            for (const form of ['storage', 'tx']) {
              const started = performance.now();
              let tx;
              if (form === 'tx') tx = await storage.begin(P1);
              const run = form === 'tx' ? tx.queryAuthoritative(q(sql)) : storage.queryAuthoritative(P1, q(sql));
              const e = await rejectsCode(within(run, LIMIT + MARGIN + 10_000, sql), sql.includes('400000000') ? 'ERR_SYNCULAR_QUERY_REFUSED' : 'ERR_SYNCULAR_QUERY_TIMEOUT', `${form}: ${sql}`);
              assert.ok(e);
              const took = performance.now() - started;
              assert.ok(took < LIMIT + MARGIN, `${form}: ${sql} ran ${Math.round(took)} ms against a ${LIMIT} ms limit`);
              if (tx) await tx.rollback();
            }
          }
        },
        { opts: { queryTimeoutMs: LIMIT } },
      );
    });

    test('close() does not wait for a statement that ignores cancellation', async () => {
      const storage = pg.create({ queryTimeoutMs: 60_000, maxConnections: 2 });
      await storage.ensureSchema(fixtureSchema());
      // Linear functions over a string of 200 MB the query built itself:
      // calls of a second or more, inside which PostgreSQL does not check
      // for cancellation (a residual limit docs/bounds.md names).
      const slow = q(
        "SELECT length(upper(h)) + length(upper(h || 'x')) + length(upper(h || 'y')) AS p FROM (SELECT string_agg(repeat('a', 10000), '') AS h FROM generate_series(1, 20000)) x",
      );
      const running = storage.queryAuthoritative(P1, slow).then(
        () => 'ok',
        (e) => e.code,
      );
      // Inside upper() by now (the string takes about a second to build).
      await new Promise((r) => setTimeout(r, 2500));
      const started = performance.now();
      await within(storage.close(), 20_000, 'close');
      const took = performance.now() - started;
      assert.ok(took < 1500, `close() took ${Math.round(took)} ms`);
      await running;
    });

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
