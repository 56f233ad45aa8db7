// Registered authoritative queries (storage-layout §13; contract S32, T7):
// both request forms, binds, result values, the snapshot cursor, the
// transaction-bound form, the serve gate hook, and the refused attack shapes.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SyncError } from '../support/package.mjs';
import { encodeRow } from '../support/codec.mjs';
import { rejectsPlain, taskRow, within, withStorage, writeCommit } from '../support/harness.mjs';
import { ACCOUNT_COLUMNS } from '../support/schema.mjs';

const P1 = 'part-1';
const P2 = 'part-2';

/** A relation plan naming every occurrence of `needle` (UTF-16 offsets). */
function planOf(sql, table, needle = table, alias) {
  const relations = [];
  let from = 0;
  for (;;) {
    const start = sql.indexOf(needle, from);
    if (start < 0) break;
    const r = { table, start, end: start + needle.length };
    if (alias !== undefined) r.alias = alias;
    relations.push(r);
    from = start + needle.length;
  }
  return { sql, relations };
}

async function seed(storage) {
  await writeCommit(storage, P1, [
    { table: 'tasks', row: taskRow('t1', { title: 'one', project: 'p1', count: 3 }) },
    { table: 'tasks', row: taskRow('t2', { title: 'two', project: 'p2' }) },
  ]);
  await writeCommit(storage, P1, [{ table: 'accounts', row: { ...accountRow('a1') } }]);
  await writeCommit(storage, P2, [{ table: 'tasks', row: taskRow('t1', { title: 'other partition', project: 'p1' }) }]);
}

function accountRow(id) {
  return { rowId: id, serverVersion: 1, scopes: { org_id: 'o1' }, payload: encodeRow(ACCOUNT_COLUMNS, { id, org_id: 'o1', email: `${id}@x` }) };
}

/** The error a refused query must carry. */
async function rejectsRefused(promise, label) {
  let caught;
  await assert.rejects(promise, (err) => {
    caught = err;
    return true;
  }, label);
  assert.ok(caught instanceof Error, label);
  assert.ok(
    caught.code === 'ERR_SYNCULAR_QUERY_REFUSED' ||
      (caught.code === 'ERR_SYNCULAR_QUERY_PLAN' && /one SELECT/.test(caught.message)),
    `${label}: got ${caught.code} ${caught.message}`,
  );
  return caught;
}

/** Attack shapes: [label, request] (legacy and plan forms). */
function attacks() {
  const legacy = (sql, tables = ['tasks']) => ({ sql, params: [], tables });
  const plan = (sql, needle = 'tasks', last = false) => {
    const start = last ? sql.lastIndexOf(needle) : sql.indexOf(needle);
    return { plan: { sql, relations: [{ table: 'tasks', start, end: start + needle.length }] }, params: [], tables: ['tasks'] };
  };
  return [
    ['legacy: join to a quoted name', legacy('SELECT a.id FROM tasks a JOIN "tasks" b ON a.id = b.id')],
    ['legacy: subquery with a bracketed name', legacy('SELECT id FROM tasks WHERE id IN (SELECT id FROM [tasks])')],
    ['legacy: CTE naming the table in another case', legacy('WITH x AS (SELECT * FROM TASKS) SELECT id FROM x')],
    ['legacy: backtick name with alias', legacy('SELECT t.id FROM `tasks` AS t')],
    ['legacy: string-literal name', legacy("SELECT id FROM 'tasks'")],
    ['legacy: comma join', legacy('SELECT b.title FROM tasks a, "tasks" b')],
    ['legacy: database-qualified', legacy('SELECT id FROM main.tasks')],
    ['legacy: IN table', legacy('SELECT id FROM tasks WHERE id IN tasks')],
    ['legacy: internal table', legacy('SELECT * FROM sync_commits', [])],
    ['legacy: internal table joined', legacy('SELECT * FROM tasks JOIN "sync_changes" c ON 1')],
    ['legacy: sqlite_master', legacy('SELECT * FROM sqlite_master', [])],
    ['legacy: multi-statement', legacy('SELECT id FROM tasks; DELETE FROM tasks')],
    ['legacy: write via CTE', legacy('WITH x AS (SELECT 1) DELETE FROM tasks')],
    ['legacy: insert', legacy('INSERT INTO tasks SELECT * FROM tasks')],
    ['legacy: pragma', legacy('PRAGMA table_info(tasks)', [])],
    ['legacy: attach', legacy("ATTACH 'other.db' AS o", [])],
    ['legacy: comment hides the gap', legacy('SELECT id FROM tasks JOIN/**/sync_row_scopes ON 1')],
    ['legacy: line comment before the name', legacy('SELECT id FROM tasks JOIN -- x\n "tasks" t2 ON 1')],
    ['plan: second occurrence outside the plan (join)', plan('SELECT a.id FROM tasks a JOIN tasks b ON a.id = b.id')],
    ['plan: subquery outside the plan', plan('SELECT id FROM tasks WHERE id IN (SELECT id FROM "tasks")')],
    ['plan: CTE outside the plan', plan('WITH x AS (SELECT id FROM TASKS) SELECT id FROM tasks', 'tasks', true)],
    ['plan: internal table', plan('SELECT id FROM tasks JOIN sync_push_results r ON 1')],
    ['plan: multi-statement', plan('SELECT id FROM tasks; DROP TABLE tasks')],
    ['plan: update', plan('WITH x AS (SELECT id FROM tasks) UPDATE accounts SET email = 1')],
  ];
}

export function define(engine) {
  describe(`${engine.name}: queryAuthoritative`, () => {
    test('before ensureSchema it fails with a plain Error', async () => {
      await withStorage(
        engine,
        async (storage) => {
          await rejectsPlain(
            storage.queryAuthoritative(P1, { sql: 'SELECT 1', params: [], tables: [] }),
            /ensureSchema\(schema\) must run before registered queries/,
          );
        },
        { ensure: false },
      );
    });

    test('legacy { sql }: one partition, numbered binds, snapshot cursor', async () => {
      await withStorage(engine, async (storage) => {
        await seed(storage);
        const r = await storage.queryAuthoritative(P1, {
          sql: 'SELECT id, title, count FROM tasks WHERE project_id = ?1 OR project_id = ?1 ORDER BY id',
          params: ['p1'],
          tables: ['tasks'],
        });
        assert.deepStrictEqual(r, { rows: [{ id: 't1', title: 'one', count: 3 }], maxCommitSeq: 2 });
        const other = await storage.queryAuthoritative(P2, {
          sql: "SELECT '?; FROM tasks' AS marker, t.title FROM tasks t /* FROM tasks */ -- ?\n",
          params: [],
          tables: ['tasks'],
        });
        assert.deepStrictEqual(other, { rows: [{ marker: '?; FROM tasks', title: 'other partition' }], maxCommitSeq: 1 });
        // The host's 0.15.x wrapper with its LIMIT parameter.
        const wrapped = await storage.queryAuthoritative(P1, {
          sql: 'SELECT * FROM (SELECT t.id, a.email FROM tasks t JOIN accounts a ON 1 = 1 WHERE t.id = ?) AS "_syncular_registered_query" LIMIT ?',
          params: ['t2', 2],
          tables: ['tasks', 'accounts'],
        });
        assert.deepStrictEqual(wrapped.rows, [{ id: 't2', email: 'a1@x' }]);
        assert.equal((await storage.queryAuthoritative('nobody', { sql: 'SELECT id FROM tasks', params: [], tables: ['tasks'] })).maxCommitSeq, 0);
      });
    });

    test('0.24 plan: relations at UTF-16 offsets, aliases, quoted names', async () => {
      await withStorage(engine, async (storage) => {
        await seed(storage);
        const sql = 'SELECT \'😀é\' AS smile, t.title FROM "tasks" AS t WHERE t.id = ? ORDER BY t.id';
        const start = sql.indexOf('"tasks"');
        const r = await storage.queryAuthoritative(P1, {
          plan: { sql, relations: [{ table: 'tasks', start, end: start + 7, alias: 't' }] },
          params: ['t1'],
          tables: ['tasks'],
        });
        assert.deepStrictEqual(r, { rows: [{ smile: '😀é', title: 'one' }], maxCommitSeq: 2 });
        const joined = 'SELECT tasks.id, accounts.email FROM tasks JOIN accounts ON 1 = 1 ORDER BY tasks.id';
        const plan = planOf(joined, 'tasks', 'tasks ');
        const a = joined.indexOf('accounts ON');
        plan.relations.push({ table: 'accounts', start: a, end: a + 8 });
        // ' tasks ' occurs once as a relation; fix its end to the name.
        plan.relations[0].end -= 1;
        const j = await storage.queryAuthoritative(P1, { plan, params: [], tables: ['accounts', 'tasks'] });
        assert.deepStrictEqual(j.rows, [{ id: 't1', email: 'a1@x' }, { id: 't2', email: 'a1@x' }]);
      });
    });

    test('plan validation messages (plain Errors)', async () => {
      await withStorage(engine, async (storage) => {
        const q = (body) => storage.queryAuthoritative(P1, body);
        const sql = 'SELECT id FROM tasks';
        await rejectsPlain(q({ plan: null, params: [], tables: ['tasks'] }), /requires generated relation plans/);
        await rejectsPlain(q({ params: [], tables: ['tasks'] }), /requires generated relation plans/);
        await rejectsPlain(q({ plan: { sql, relations: [{ table: 'tasks', start: 15, end: 30 }] }, params: [], tables: ['tasks'] }), /relation boundaries do not match/);
        await rejectsPlain(q({ plan: { sql, relations: [{ table: 'tasks', start: '15', end: 20 }] }, params: [], tables: ['tasks'] }), /relation boundaries do not match/);
        await rejectsPlain(q({ plan: planOf(sql, 'tasks'), params: [], tables: [] }), /table metadata does not match/);
        await rejectsPlain(q({ plan: { sql, relations: [{ table: 'tasks', start: 7, end: 9 }] }, params: [], tables: ['tasks'] }), /relation name does not match/);
        await rejectsPlain(q({ plan: planOf(sql, 'tasks'), params: [], tables: ['tasks', 'accounts'] }), /table metadata does not match/);
        const ghost = 'SELECT id FROM ghosts';
        await rejectsPlain(q({ plan: planOf(ghost, 'ghosts'), params: [], tables: ['ghosts'] }), /targets an unknown table/);
        const notes = 'SELECT id FROM notes';
        await rejectsPlain(q({ plan: planOf(notes, 'notes'), params: [], tables: ['notes'] }), /non-materialized table/);
        await rejectsPlain(q({ plan: planOf('SELECT id FROM tasks WHERE id = ?2', 'tasks'), params: ['x'], tables: ['tasks'] }), /bind metadata does not match/);
        // Legacy messages.
        await rejectsPlain(q({ sql: 'SELECT 1; SELECT 2', params: [], tables: [] }), /must be one SELECT/);
        await rejectsPlain(q({ sql: 'SELECT id FROM notes', params: [], tables: ['notes'] }), /non-materialized table/);
        await rejectsPlain(q({ sql: 'SELECT id FROM tasks', params: [], tables: ['accounts'] }), /table metadata does not match/);
        await rejectsPlain(q({ sql: 'SELECT id FROM tasks WHERE id = ?', params: [undefined], tables: ['tasks'] }), /bind metadata does not match/);
        await rejectsPlain(q({ sql: 'SELECT id FROM tasks WHERE id = :id', params: ['x'], tables: ['tasks'] }), /bind metadata does not match/);
      });
    });

    test('binds every AuthoritativeQueryValue and returns driver-shaped values', async () => {
      await withStorage(engine, async (storage) => {
        const bytes = new Uint8Array([0, 1, 255]);
        const pg = engine.dialect === 'postgres';
        // SQLite reports the bound storage class; PostgreSQL the bound type
        // (its catalog functions are refused, so compare through CASTs).
        const r = await storage.queryAuthoritative(P1, {
          sql: pg
            ? "SELECT ? AS s, CASE WHEN CAST(?2 AS TEXT) = ?2 THEN 'text' END AS s_t, ? AS i, CASE WHEN CAST(?3 AS BIGINT) = ?3 THEN 'integer' END AS i_t, ? AS f, CASE WHEN CAST(?4 AS DOUBLE PRECISION) = ?4 THEN 'real' END AS f_t, ? AS big, CASE WHEN CAST(?5 AS BIGINT) = ?5 THEN 'integer' END AS big_t, ? AS yes, ? AS no, ? AS blob, CAST(? AS TEXT) AS nul"
            : 'SELECT ? AS s, typeof(?2) AS s_t, ? AS i, typeof(?3) AS i_t, ? AS f, typeof(?4) AS f_t, ? AS big, typeof(?5) AS big_t, ? AS yes, ? AS no, ? AS blob, ? AS nul',
          params: ['text', 'text', 42, 1.5, 9007199254740993n, true, false, bytes, null],
          tables: [],
        });
        const row = r.rows[0];
        assert.equal(row.s, 'text');
        if (pg) assert.equal(row.s_t, 'text');
        assert.equal(row.i, 42);
        assert.equal(row.i_t, 'integer');
        assert.equal(row.f, 1.5);
        assert.equal(row.f_t, 'real');
        assert.equal(row.big, 9007199254740993n);
        assert.equal(row.big_t, 'integer');
        assert.equal(row.yes, 1);
        assert.equal(row.no, 0);
        assert.ok(row.blob instanceof Uint8Array);
        assert.deepStrictEqual([...row.blob], [0, 1, 255]);
        assert.equal(row.nul, null);
        assert.equal(r.maxCommitSeq, 0);

        const v = await storage.queryAuthoritative(P1, {
          sql: `SELECT 9007199254740991 AS safe, -9007199254740993 AS neg, 9223372036854775807 AS max, 2.5 AS r, ${pg ? "decode('0a0b', 'hex')" : "x'0a0b'"} AS b, NULL AS n, 'é' AS t`,
          params: [],
          tables: [],
        });
        const w = v.rows[0];
        assert.equal(typeof w.safe, 'number');
        assert.equal(w.safe, Number.MAX_SAFE_INTEGER);
        assert.equal(w.neg, -9007199254740993n);
        assert.equal(w.max, 9223372036854775807n);
        assert.equal(w.r, 2.5);
        assert.deepStrictEqual([...w.b], [10, 11]);
        assert.equal(w.n, null);
        assert.equal(w.t, 'é');
        await assert.rejects(storage.queryAuthoritative(P1, { sql: 'SELECT ?', params: [{}], tables: [] }));
        await assert.rejects(storage.queryAuthoritative(P1, { sql: 'SELECT ?', params: [2n ** 64n], tables: [] }));
      });
    });

    test('maxCommitSeq and rows come from one snapshot', async () => {
      await withStorage(engine, async (storage) => {
        await seed(storage);
        const q = storage.queryAuthoritative(P1, { sql: 'SELECT count(*) AS n FROM tasks', params: [], tables: ['tasks'] });
        const w = writeCommit(storage, P1, [{ table: 'tasks', row: taskRow('t9') }]);
        const [r] = await Promise.all([q, w]);
        // Either before or after the write, never a mix.
        assert.ok(
          (r.rows[0].n === 2 && r.maxCommitSeq === 2) || (r.rows[0].n === 3 && r.maxCommitSeq === 3),
          JSON.stringify(r),
        );
        const after = await storage.queryAuthoritative(P1, { sql: 'SELECT count(*) AS n FROM tasks', params: [], tables: ['tasks'] });
        assert.deepStrictEqual(after, { rows: [{ n: 3 }], maxCommitSeq: 3 });
      });
    });

    test('tx.queryAuthoritative sees staged writes inside a push, without deadlock', async () => {
      await withStorage(engine, async (storage) => {
        await seed(storage);
        const tx = await storage.begin(P1);
        try {
          await tx.lockPartitionForPush();
          await tx.upsertRow('tasks', taskRow('t3', { title: 'staged' }), { opIndex: 0 });
          await tx.deleteRow('tasks', 't2');
          const plan = planOf('SELECT id, title FROM tasks ORDER BY id', 'tasks');
          const inside = await within(tx.queryAuthoritative({ plan, params: [], tables: ['tasks'] }), 2000, 'tx query');
          assert.deepStrictEqual(inside, {
            rows: [
              { id: 't1', title: 'one' },
              { id: 't3', title: 'staged' },
            ],
            maxCommitSeq: 2,
          });
          // The storage-level call during the push neither waits nor fails.
          const outside = await within(
            storage.queryAuthoritative(P1, { sql: 'SELECT id FROM tasks ORDER BY id', params: [], tables: ['tasks'] }),
            2000,
            'storage query during a push',
          );
          if (engine.name === 'sqlite-file') {
            assert.deepStrictEqual(outside.rows, [{ id: 't1' }, { id: 't2' }]);
          }
          const seq = await tx.appendCommit({ clientId: 'c', clientCommitId: 'x', actorId: 'a', createdAtMs: 1, changes: [] });
          assert.equal(seq, 3);
          const legacy = await tx.queryAuthoritative({ sql: 'SELECT count(*) AS n FROM tasks', params: [], tables: ['tasks'] });
          assert.deepStrictEqual(legacy, { rows: [{ n: 2 }], maxCommitSeq: 3 });
          await tx.commit();
        } finally {
          await tx.rollback();
        }
        const done = await storage.queryAuthoritative(P1, { sql: 'SELECT id FROM tasks ORDER BY id', params: [], tables: ['tasks'] });
        assert.deepStrictEqual(done, { rows: [{ id: 't1' }, { id: 't3' }], maxCommitSeq: 3 });
        // The other partition is untouched and invisible.
        const tx2 = await storage.begin(P2);
        const r2 = await tx2.queryAuthoritative({ sql: 'SELECT title FROM tasks', params: [], tables: ['tasks'] });
        assert.deepStrictEqual(r2, { rows: [{ title: 'other partition' }], maxCommitSeq: 1 });
        await tx2.rollback();
        await assert.rejects(tx2.queryAuthoritative({ sql: 'SELECT 1', params: [], tables: [] }), /transaction already finished/);
      });
    });

    test('serve gate: read in the snapshot, evaluated by the host, refusal thrown', async () => {
      const calls = [];
      let refuse;
      const host = {
        SyncError,
        serveGateRefusal: (gate, running, checkpoints) => {
          calls.push({ gate, running, checkpoints });
          return refuse;
        },
        serveNotReadyError: (refusal) => new SyncError('sync.schema_not_ready', 'not ready', JSON.stringify(refusal)),
      };
      await withStorage(
        engine,
        async (storage) => {
          await storage.touchPartition(P1, 1, 'epoch-1');
          const body = { sql: 'SELECT id FROM tasks', params: [], tables: ['tasks'] };
          const declarations = [{ partition: P1, name: 'cp', schemaVersion: 1 }];
          assert.deepStrictEqual((await storage.queryAuthoritative(P1, body, declarations)).rows, []);
          assert.equal(calls.length, 1);
          assert.deepStrictEqual(calls[0].gate, { storedSchemaVersion: 1, logEpoch: 'epoch-1', pending: [] });
          assert.equal(calls[0].running, 1);
          assert.equal(calls[0].checkpoints, declarations);
          refuse = { kind: 'schema', stored: 2, running: 1 };
          const err = await storage.queryAuthoritative(P1, body).then(
            () => assert.fail('expected a refusal'),
            (e) => e,
          );
          assert.ok(err instanceof SyncError);
          assert.equal(err.code, 'sync.schema_not_ready');
          // A refusal wins over a failing query.
          const bad = await storage.queryAuthoritative(P1, { sql: 'SELECT nope FROM tasks', params: [], tables: ['tasks'] }).then(
            () => assert.fail('expected a refusal'),
            (e) => e,
          );
          assert.equal(bad.code, 'sync.schema_not_ready');
          refuse = undefined;
          await assert.rejects(storage.queryAuthoritative(P1, { sql: 'SELECT nope FROM tasks', params: [], tables: ['tasks'] }), /no such column|column "nope" does not exist/);
          // Transactions never gate.
          const before = calls.length;
          const tx = await storage.begin(P1);
          await tx.queryAuthoritative(body);
          await tx.rollback();
          assert.equal(calls.length, before);
        },
        { opts: { errors: host } },
      );
      // Hosts without the functions (0.15.x) are not gated.
      await withStorage(engine, async (storage) => {
        const r = await storage.queryAuthoritative(P1, { sql: 'SELECT 1 AS one', params: [], tables: [] }, []);
        assert.deepStrictEqual(r, { rows: [{ one: 1 }], maxCommitSeq: 0 });
      });
    });

    test('attack shapes are refused with a coded error (storage and transaction)', async () => {
      await withStorage(engine, async (storage) => {
        await seed(storage);
        for (const [label, body] of attacks()) {
          await rejectsRefused(storage.queryAuthoritative(P1, body), label);
          const tx = await storage.begin(P1);
          try {
            await rejectsRefused(tx.queryAuthoritative(body), `tx ${label}`);
          } finally {
            await tx.rollback();
          }
        }
        // Nothing was written and the other partition's row is intact.
        const r = await storage.queryAuthoritative(P2, { sql: 'SELECT title FROM tasks', params: [], tables: ['tasks'] });
        assert.deepStrictEqual(r.rows, [{ title: 'other partition' }]);
        const all = await storage.queryAuthoritative(P1, { sql: 'SELECT count(*) AS n FROM tasks', params: [], tables: ['tasks'] });
        assert.equal(all.rows[0].n, 2);
      });
    });

    test('keywords inside literals and comments are inert; _sync columns are not exposed', async () => {
      await withStorage(engine, async (storage) => {
        await seed(storage);
        const r = await storage.queryAuthoritative(P1, {
          sql: "SELECT 'DELETE FROM tasks; DROP TABLE sync_commits' AS s, replace(title, 'o', '0') AS t FROM tasks /* PRAGMA x; */ WHERE id = 't1' -- ATTACH\n",
          params: [],
          tables: ['tasks'],
        });
        assert.deepStrictEqual(r.rows, [{ s: 'DELETE FROM tasks; DROP TABLE sync_commits', t: '0ne' }]);
        const star = await storage.queryAuthoritative(P1, { sql: "SELECT * FROM tasks WHERE id = 't1'", params: [], tables: ['tasks'] });
        assert.ok(Object.keys(star.rows[0]).every((k) => !k.startsWith('_sync')), Object.keys(star.rows[0]).join());
        await assert.rejects(storage.queryAuthoritative(P1, { sql: 'SELECT _sync_payload FROM tasks', params: [], tables: ['tasks'] }));
      });
    });
  });
}
