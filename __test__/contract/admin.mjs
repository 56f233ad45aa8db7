// Admin console and blob reads (contract S40–S45; storage-layout §17, §16).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  assertSame,
  noteRow,
  rejectsClearly,
  rejectsPlain,
  taskRow,
  unknownTablePattern,
  upsertChange,
  withStorage,
  writeCommit,
} from '../support/harness.mjs';

const NOW = 1_700_000_000_000;
const BLOB_A = `sha256:${'a'.repeat(64)}`;
const BLOB_B = `sha256:${'b'.repeat(64)}`;
const BLOB_C = `sha256:${'c'.repeat(64)}`;

function client(clientId, updatedAtMs, extra = {}) {
  return {
    clientId,
    actorId: `actor-${clientId}`,
    wireVersion: 3,
    cursor: Math.floor(updatedAtMs / 10),
    updatedAtMs,
    subscriptions: [{ id: `s-${clientId}`, table: 'tasks', scopes: { project_id: ['p1'] } }],
    ...extra,
  };
}

/** Upsert rows and set their blob refs in one push-like transaction. */
async function writeWithRefs(storage, partition, entries) {
  const tx = await storage.begin(partition);
  try {
    await tx.lockPartitionForPush();
    const changes = [];
    for (const [opIndex, e] of entries.entries()) {
      if (e.row !== undefined) {
        await tx.upsertRow(e.table, e.row, { opIndex });
        changes.push(upsertChange(e.table, e.row));
      }
      await tx.setBlobRefs(e.table, e.rowId ?? e.row.rowId, e.blobs);
    }
    await tx.appendCommit({ clientId: 'c', clientCommitId: `cc-${Math.random()}`, actorId: 'a', createdAtMs: NOW, changes });
    await tx.commit();
  } catch (err) {
    await tx.rollback();
    throw err;
  }
}

export function define(engine) {
  describe('admin reads', () => {
    test('listClientRecords: every record of the partition, most recently updated first', () =>
      withStorage(engine, async (storage) => {
        assert.deepEqual(await storage.listClientRecords('p1'), []);
        await storage.putClientRecord('p1', client('c1', 100));
        await storage.putClientRecord('p1', client('c2', 300));
        await storage.putClientRecord('p1', client('c3', 200, { subscriptions: [] }));
        await storage.putClientRecord('p2', client('c9', 999));
        const list = await storage.listClientRecords('p1');
        assertSame(list, [client('c2', 300), client('c3', 200, { subscriptions: [] }), client('c1', 100)]);
        await storage.advanceClientCursor('p1', 'c1', 'actor-c1', 'none', 99, 999); // unregistered: no change
        await storage.updateClientCursor('p1', 'c1', 50, 400);
        assert.deepEqual(
          (await storage.listClientRecords('p1')).map((c) => [c.clientId, c.cursor]),
          [
            ['c1', 50],
            ['c2', 30],
            ['c3', 20],
          ],
        );
      }));

    test('listCommitMetadata: newest first after afterSeq, limit, change counts and distinct tables', () =>
      withStorage(engine, async (storage) => {
        assert.deepEqual(await storage.listCommitMetadata('p1', { afterSeq: 0, limit: 10 }), []);
        await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('t1') }, { table: 'notes', row: noteRow('n1', 'p1', 'x') }, { table: 'tasks', row: taskRow('t2') }], {
          clientId: 'cl-1',
          clientCommitId: 'commit-1',
          actorId: 'actor-1',
          createdAtMs: NOW + 1,
        });
        await writeCommit(storage, 'p1', [{ table: 'notes', row: noteRow('n2', 'p1', 'y') }], {
          clientId: 'cl-2',
          clientCommitId: 'commit-2',
          actorId: 'actor-2',
          createdAtMs: NOW + 2,
        });
        await writeCommit(storage, 'p1', [], { clientId: 'cl-3', clientCommitId: 'commit-3', actorId: 'actor-3', createdAtMs: NOW + 3 });
        await writeCommit(storage, 'p2', [{ table: 'tasks', row: taskRow('t9') }]);
        const all = await storage.listCommitMetadata('p1', { afterSeq: 0, limit: 10 });
        assertSame(all, [
          { commitSeq: 3, clientId: 'cl-3', clientCommitId: 'commit-3', actorId: 'actor-3', createdAtMs: NOW + 3, changeCount: 0, tables: [] },
          { commitSeq: 2, clientId: 'cl-2', clientCommitId: 'commit-2', actorId: 'actor-2', createdAtMs: NOW + 2, changeCount: 1, tables: ['notes'] },
          { commitSeq: 1, clientId: 'cl-1', clientCommitId: 'commit-1', actorId: 'actor-1', createdAtMs: NOW + 1, changeCount: 3, tables: ['notes', 'tasks'] },
        ]);
        assert.deepEqual((await storage.listCommitMetadata('p1', { afterSeq: 1, limit: 10 })).map((m) => m.commitSeq), [3, 2]);
        assert.deepEqual((await storage.listCommitMetadata('p1', { afterSeq: 0, limit: 2 })).map((m) => m.commitSeq), [3, 2]);
        assert.deepEqual((await storage.listCommitMetadata('p1', { afterSeq: 3, limit: 10 })).map((m) => m.commitSeq), []);
        assert.deepEqual((await storage.listCommitMetadata('p1', { afterSeq: 0, limit: 0 })).map((m) => m.commitSeq), []);
        // table filter: commits touching it, with all their tables counted
        const tasks = await storage.listCommitMetadata('p1', { afterSeq: 0, limit: 10, table: 'tasks' });
        assertSame(tasks, [all[2]]);
        assert.deepEqual((await storage.listCommitMetadata('p1', { afterSeq: 0, limit: 10, table: 'notes' })).map((m) => m.commitSeq), [2, 1]);
        assert.deepEqual(await storage.listCommitMetadata('p1', { afterSeq: 0, limit: 10, table: 'nope' }), []);
        assert.equal((await storage.listCommitMetadata('p1', { afterSeq: 0, limit: 10, table: '' })).length, 3, 'empty table is no filter');
        // pruned commits are gone
        await storage.pruneCommitsThrough('p1', 1);
        assert.deepEqual((await storage.listCommitMetadata('p1', { afterSeq: 0, limit: 10 })).map((m) => m.commitSeq), [3, 2]);
      }));

    test('scopeActivity: commits touching one scope value, newest first, per table with counts', () =>
      withStorage(engine, async (storage) => {
        assert.deepEqual(await storage.scopeActivity('p1', { variable: 'project_id', value: 'p1', limit: 10 }), []);
        await writeCommit(
          storage,
          'p1',
          [
            { table: 'tasks', row: taskRow('t1', { project: 'p1' }) },
            { table: 'tasks', row: taskRow('t2', { project: 'p1' }) },
            { table: 'tasks', row: taskRow('t3', { project: 'p2' }) },
            { table: 'notes', row: noteRow('n1', 'p1', 'x') },
          ],
          { actorId: 'actor-1', createdAtMs: NOW + 1 },
        );
        await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('t4', { project: 'p2', owner: 'u7' }) }], { actorId: 'actor-2', createdAtMs: NOW + 2 });
        await writeCommit(storage, 'p1', [{ table: 'notes', row: noteRow('n2', 'p1', 'y') }], { actorId: 'actor-3', createdAtMs: NOW + 3 });
        await writeCommit(storage, 'p2', [{ table: 'tasks', row: taskRow('t1', { project: 'p1' }) }]);
        const p1 = await storage.scopeActivity('p1', { variable: 'project_id', value: 'p1', limit: 10 });
        // the change count covers every change of the table in the commit
        assertSame(p1, [
          { commitSeq: 3, table: 'notes', createdAtMs: NOW + 3, actorId: 'actor-3', changeCount: 1 },
          { commitSeq: 1, table: 'notes', createdAtMs: NOW + 1, actorId: 'actor-1', changeCount: 1 },
          { commitSeq: 1, table: 'tasks', createdAtMs: NOW + 1, actorId: 'actor-1', changeCount: 3 },
        ]);
        assertSame(await storage.scopeActivity('p1', { variable: 'project_id', value: 'p1', limit: 2 }), p1.slice(0, 2));
        assertSame(await storage.scopeActivity('p1', { variable: 'owner_id', value: 'u7', limit: 10 }), [
          { commitSeq: 2, table: 'tasks', createdAtMs: NOW + 2, actorId: 'actor-2', changeCount: 1 },
        ]);
        assert.deepEqual(await storage.scopeActivity('p1', { variable: 'project_id', value: 'p9', limit: 10 }), []);
        assert.deepEqual(await storage.scopeActivity('p1', { variable: 'nope', value: 'p1', limit: 10 }), []);
        await storage.pruneCommitsThrough('p1', 1);
        assert.deepEqual((await storage.scopeActivity('p1', { variable: 'project_id', value: 'p1', limit: 10 })).map((a) => a.commitSeq), [3]);
      }));

    test('getRowScopes: serverVersion and scopes without the payload; unknown tables fail', () =>
      withStorage(engine, async (storage) => {
        assert.strictEqual(await storage.getRowScopes('p1', 'tasks', 't1'), undefined);
        await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('t1', { project: 'p1', owner: 'u1' }) }, { table: 'notes', row: noteRow('n1', 'p3', 'x', { version: 4 }) }]);
        assertSame(await storage.getRowScopes('p1', 'tasks', 't1'), { serverVersion: 1, scopes: { project_id: 'p1', owner_id: 'u1' } });
        assertSame(await storage.getRowScopes('p1', 'notes', 'n1'), { serverVersion: 4, scopes: { project_id: 'p3' } });
        await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('t1', { project: 'p2', owner: 'u1' }, { version: 2 }) }]);
        assertSame(await storage.getRowScopes('p1', 'tasks', 't1'), { serverVersion: 2, scopes: { project_id: 'p2', owner_id: 'u1' } });
        assert.strictEqual(await storage.getRowScopes('p2', 'tasks', 't1'), undefined);
        await writeCommit(storage, 'p1', [{ table: 'tasks', delete: 't1', scopes: { project_id: 'p2' } }]);
        assert.strictEqual(await storage.getRowScopes('p1', 'tasks', 't1'), undefined);
        await rejectsPlain(storage.getRowScopes('p1', 'nope', 't1'), unknownTablePattern('nope'));
        await rejectsPlain(storage.getRowScopes('p1', 'sync_commits', '1'), unknownTablePattern('sync_commits'));
      }));

    test('getRowScopes before ensureSchema fails with unknown table', () =>
      withStorage(
        engine,
        async (storage) => {
          await rejectsPlain(storage.getRowScopes('p1', 'tasks', 't1'), unknownTablePattern('tasks'));
        },
        { ensure: false },
      ));

    test('listRowsReferencingBlob: live rows with their scopes; skips unknown tables and missing rows', () =>
      withStorage(engine, async (storage) => {
        assert.deepEqual(await storage.listRowsReferencingBlob('p1', BLOB_A), []);
        await writeWithRefs(storage, 'p1', [
          { table: 'tasks', row: taskRow('t2', { project: 'p2', owner: 'u2' }), blobs: [BLOB_A, BLOB_B] },
          { table: 'notes', row: noteRow('n1', 'p1', 'x'), blobs: [BLOB_A] },
          { table: 'tasks', rowId: 'never-written', blobs: [BLOB_A] },
          { table: 'ghost', rowId: 'g1', blobs: [BLOB_A] },
          { table: 'tasks', row: taskRow('t1', { project: 'p1', owner: 'u1' }), blobs: [BLOB_A, BLOB_A] },
        ]);
        await writeWithRefs(storage, 'p2', [{ table: 'tasks', row: taskRow('t9'), blobs: [BLOB_A] }]);
        assertSame(await storage.listRowsReferencingBlob('p1', BLOB_A), [
          { table: 'tasks', rowId: 't2', scopes: { project_id: 'p2', owner_id: 'u2' } },
          { table: 'notes', rowId: 'n1', scopes: { project_id: 'p1' } },
          { table: 'tasks', rowId: 't1', scopes: { project_id: 'p1', owner_id: 'u1' } },
        ]);
        assertSame(await storage.listRowsReferencingBlob('p1', BLOB_B), [{ table: 'tasks', rowId: 't2', scopes: { project_id: 'p2', owner_id: 'u2' } }]);
        assert.deepEqual(await storage.listRowsReferencingBlob('p1', BLOB_C), []);
        // a delete drops the row's references; scopes follow the row
        await writeCommit(storage, 'p1', [
          { table: 'tasks', delete: 't2', scopes: { project_id: 'p2' } },
          { table: 'notes', row: noteRow('n1', 'p7', 'x', { version: 2 }) },
        ]);
        assertSame(await storage.listRowsReferencingBlob('p1', BLOB_A), [
          { table: 'notes', rowId: 'n1', scopes: { project_id: 'p7' } },
          { table: 'tasks', rowId: 't1', scopes: { project_id: 'p1', owner_id: 'u1' } },
        ]);
        assert.deepEqual(await storage.listRowsReferencingBlob('p1', BLOB_B), []);
      }));

    test('listReferencedBlobIds: distinct ids of the partition', () =>
      withStorage(engine, async (storage) => {
        assert.deepEqual(await storage.listReferencedBlobIds('p1'), []);
        await writeWithRefs(storage, 'p1', [
          { table: 'tasks', row: taskRow('t1'), blobs: [BLOB_C, BLOB_A] },
          { table: 'notes', row: noteRow('n1', 'p1', 'x'), blobs: [BLOB_A] },
        ]);
        await writeWithRefs(storage, 'p2', [{ table: 'tasks', row: taskRow('t9'), blobs: [BLOB_B] }]);
        assert.deepEqual([...(await storage.listReferencedBlobIds('p1'))].sort(), [BLOB_A, BLOB_C]);
        assert.deepEqual(await storage.listReferencedBlobIds('p2'), [BLOB_B]);
        await writeWithRefs(storage, 'p1', [{ table: 'tasks', rowId: 't1', blobs: [] }]);
        assert.deepEqual(await storage.listReferencedBlobIds('p1'), [BLOB_A]);
      }));

    test('admin members reject bad input instead of throwing', () =>
      withStorage(engine, async (storage) => {
        const cases = {
          'listClientRecords(42)': () => storage.listClientRecords(42),
          'listCommitMetadata(p, null)': () => storage.listCommitMetadata('p1', null),
          'listCommitMetadata afterSeq string': () => storage.listCommitMetadata('p1', { afterSeq: 'x', limit: 1 }),
          'listCommitMetadata fractional limit': () => storage.listCommitMetadata('p1', { afterSeq: 0, limit: 1.5 }),
          'scopeActivity(p)': () => storage.scopeActivity('p1'),
          'scopeActivity value not string': () => storage.scopeActivity('p1', { variable: 'v', value: 1, limit: 1 }),
          'getRowScopes(p, 42, r)': () => storage.getRowScopes('p1', 42, 'r'),
          'listRowsReferencingBlob(p, {})': () => storage.listRowsReferencingBlob('p1', {}),
          'listReferencedBlobIds()': () => storage.listReferencedBlobIds(),
        };
        for (const [label, call] of Object.entries(cases)) await rejectsClearly(call, label);
      }));
  });
}
