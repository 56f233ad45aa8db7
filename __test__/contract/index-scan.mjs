// scanRowsByIndex on the storage (S33, committed state) and the
// transaction (T6, staged writes visible): storage-layout §7.6.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { rejectsPlain, rejectsQueryError, taskRow, withStorage, writeCommit } from '../support/harness.mjs';
import { accountsTable, notesTable, schema, tasksTable } from '../support/schema.mjs';

const P = 'part-1';

function indexedSchema() {
  return schema(1, [
    tasksTable({
      indexes: [
        { name: 'tasks_by_project', columns: ['project_id'] },
        { name: 'tasks_by_project_done', columns: ['project_id', 'done'] },
        { name: 'tasks_by_count', columns: ['count'] },
        { name: 'tasks_by_score_count', columns: ['score', 'count'] },
      ],
    }),
    accountsTable(),
    notesTable(),
  ]);
}

const ids = (rows) => rows.map((r) => r.rowId);

function q(index, values, extra = {}) {
  return { table: 'tasks', index, values, afterRowId: null, limit: 10, ...extra };
}

export function define(engine) {
  describe(`${engine.name}: scanRowsByIndex`, () => {
    const opts = { schema: indexedSchema() };

    test('exact, ordered by rowId, resumable, one partition', async () => {
      await withStorage(
        engine,
        async (storage) => {
          await writeCommit(storage, P, [
            { table: 'tasks', row: taskRow('r3', { project: 'p1' }) },
            { table: 'tasks', row: taskRow('r1', { project: 'p1' }) },
            { table: 'tasks', row: taskRow('r2', { project: 'p2' }) },
            { table: 'tasks', row: taskRow('r4', { project: 'p1' }, { columnVersions: new Uint8Array([3, 2]) }) },
          ]);
          await writeCommit(storage, 'other', [{ table: 'tasks', row: taskRow('r0', { project: 'p1' }) }]);
          const page1 = await storage.scanRowsByIndex(P, q('tasks_by_project', ['p1'], { limit: 2 }));
          assert.deepStrictEqual(ids(page1), ['r1', 'r3']);
          const row = page1[0];
          assert.deepStrictEqual(Object.keys(row), ['rowId', 'serverVersion', 'scopes', 'payload']);
          assert.deepStrictEqual(row.scopes, { project_id: 'p1', owner_id: 'u1' });
          assert.ok(row.payload instanceof Uint8Array);
          const page2 = await storage.scanRowsByIndex(P, q('tasks_by_project', ['p1'], { afterRowId: 'r3' }));
          assert.deepStrictEqual(ids(page2), ['r4']);
          assert.deepStrictEqual([...page2[0].columnVersions], [3, 2]);
          // afterRowId '' and undefined behave like null.
          assert.deepStrictEqual(ids(await storage.scanRowsByIndex(P, q('tasks_by_project', ['p1'], { afterRowId: '' }))), ['r1', 'r3', 'r4']);
          assert.deepStrictEqual(ids(await storage.scanRowsByIndex(P, q('tasks_by_project', ['p1'], { afterRowId: undefined }))), ['r1', 'r3', 'r4']);
          assert.deepStrictEqual(ids(await storage.scanRowsByIndex('other', q('tasks_by_project', ['p1']))), ['r0']);
          assert.deepStrictEqual(await storage.scanRowsByIndex(P, q('tasks_by_project', ['p9'])), []);
        },
        opts,
      );
    });

    test('compound, boolean and null values (§3.2; null or missing → IS NULL)', async () => {
      await withStorage(
        engine,
        async (storage) => {
          await writeCommit(storage, P, [
            { table: 'tasks', row: taskRow('a', { project: 'p1', done: true, count: 5, score: 1.5 }) },
            { table: 'tasks', row: taskRow('b', { project: 'p1', done: false, count: null }) },
            { table: 'tasks', row: taskRow('c', { project: 'p1', done: true, count: null, score: 1.5 }) },
          ]);
          assert.deepStrictEqual(ids(await storage.scanRowsByIndex(P, q('tasks_by_project_done', ['p1', true]))), ['a', 'c']);
          assert.deepStrictEqual(ids(await storage.scanRowsByIndex(P, q('tasks_by_project_done', ['p1', false]))), ['b']);
          assert.deepStrictEqual(ids(await storage.scanRowsByIndex(P, q('tasks_by_count', [null]))), ['b', 'c']);
          assert.deepStrictEqual(ids(await storage.scanRowsByIndex(P, q('tasks_by_count', [5]))), ['a']);
          assert.deepStrictEqual(ids(await storage.scanRowsByIndex(P, q('tasks_by_count', [5n]))), ['a']);
          assert.deepStrictEqual(ids(await storage.scanRowsByIndex(P, q('tasks_by_score_count', [1.5, null]))), ['c']);
          // A hole in the array is a missing value.
          // eslint-disable-next-line no-sparse-arrays
          assert.deepStrictEqual(ids(await storage.scanRowsByIndex(P, q('tasks_by_score_count', [, null]))), ['b']);
        },
        opts,
      );
    });

    test('validation order: invalid_limit → index_not_materialized → index_not_found → index_value_count_mismatch', async () => {
      await withStorage(
        engine,
        async (storage) => {
          const code = (query) => rejectsQueryError(storage.scanRowsByIndex(P, query), expectedCode(query));
          let expectedCode;
          for (const limit of [0, 1001, 1.5, -1, '10', undefined, NaN]) {
            expectedCode = () => 'sync.storage.invalid_limit';
            await code({ table: 'notes', index: 'missing', values: [], limit });
          }
          expectedCode = () => 'sync.storage.index_not_materialized';
          await code({ table: 'notes', index: 'missing', values: [], limit: 1 });
          expectedCode = () => 'sync.storage.index_not_found';
          await code({ table: 'tasks', index: 'missing', values: [], limit: 1000 });
          expectedCode = () => 'sync.storage.index_value_count_mismatch';
          await code(q('tasks_by_project', []));
          await code(q('tasks_by_project_done', ['p1']));
          await code(q('tasks_by_project', 'p1'));
          const err = await rejectsQueryError(storage.scanRowsByIndex(P, q('tasks_by_project', ['p1'], { limit: 1001 })), 'sync.storage.invalid_limit');
          assert.ok(!err.message.includes('tasks') && !err.message.includes('p1'));
          await rejectsPlain(storage.scanRowsByIndex(P, { ...q('x', ['p1']), table: 'ghosts' }), /unknown table "ghosts"/);
          await rejectsPlain(storage.scanRowsByIndex(P, { ...q('x', ['p1']), table: 'sync_commits' }), /unknown table "sync_commits"/);
        },
        opts,
      );
    });

    test('the transaction form sees staged upserts, moves and deletes', async () => {
      await withStorage(
        engine,
        async (storage) => {
          await writeCommit(storage, P, [
            { table: 'tasks', row: taskRow('r1', { project: 'p1' }) },
            { table: 'tasks', row: taskRow('r2', { project: 'p1' }) },
          ]);
          const tx = await storage.begin(P);
          try {
            await tx.deleteRow('tasks', 'r1');
            await tx.upsertRow('tasks', taskRow('r2', { project: 'p2' }, { version: 2 }));
            await tx.upsertRow('tasks', taskRow('r3', { project: 'p1' }));
            assert.deepStrictEqual(ids(await tx.scanRowsByIndex(q('tasks_by_project', ['p1']))), ['r3']);
            const moved = await tx.scanRowsByIndex(q('tasks_by_project', ['p2']));
            assert.deepStrictEqual(ids(moved), ['r2']);
            assert.equal(moved[0].serverVersion, 2);
            await rejectsQueryError(tx.scanRowsByIndex(q('tasks_by_project', ['p1'], { limit: 0 })), 'sync.storage.invalid_limit');
            if (engine.name === 'sqlite-file') {
              // Committed state is unchanged meanwhile.
              assert.deepStrictEqual(ids(await storage.scanRowsByIndex(P, q('tasks_by_project', ['p1']))), ['r1', 'r2']);
            }
          } finally {
            await tx.rollback();
          }
          assert.deepStrictEqual(ids(await storage.scanRowsByIndex(P, q('tasks_by_project', ['p1']))), ['r1', 'r2']);
          await assert.rejects(tx.scanRowsByIndex(q('tasks_by_project', ['p1'])), /transaction already finished/);
        },
        opts,
      );
    });
  });
}
