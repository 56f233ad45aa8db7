// Bad input: wrong argument types, invalid numbers, unknown tables. Every
// case must be a rejected promise with a clear Error, never a synchronous
// throw or a crash, and the storage must keep working afterwards.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { hostPush, rejectsClearly, rejectsPlain, taskRow, unknownTablePattern, withStorage, within } from '../support/harness.mjs';

const goodWindow = { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterSeq: 0, throughSeq: 10, limitChanges: 10 };
const goodScan = { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterRowId: null, limit: 10 };

async function stillWorks(storage, label) {
  const before = await storage.getMaxCommitSeq('ok');
  const r = await within(
    hostPush(storage, 'ok', { clientId: 'c', clientCommitId: `after-${label}-${before}`, ops: [{ table: 'tasks', row: taskRow(`r-${before}`) }] }),
    5000,
    `push after ${label}`,
  );
  assert.equal(r.commitSeq, before + 1, `storage works after ${label}`);
}

export function define(engine) {
  describe('bad input', () => {
    test('storage members reject wrong argument types', () =>
      withStorage(engine, async (storage) => {
        const cases = {
          'getMaxCommitSeq(42)': () => storage.getMaxCommitSeq(42),
          'getMaxCommitSeq()': () => storage.getMaxCommitSeq(),
          'getHorizonSeq(null)': () => storage.getHorizonSeq(null),
          'getRow(p, 42, r)': () => storage.getRow('p1', 42, 'r'),
          'getRow(p, t, {})': () => storage.getRow('p1', 'tasks', {}),
          'getRow()': () => storage.getRow(),
          'getPushResult(p, 1, 2)': () => storage.getPushResult('p1', 1, 2),
          "touchPartition(p, 'x', e)": () => storage.touchPartition('p1', 'x', 'e'),
          'touchPartition(p, 1, 5)': () => storage.touchPartition('p1', 1, 5),
          'rotatePartitionLogEpoch(p, null, 1)': () => storage.rotatePartitionLogEpoch('p1', null, 1),
          'getPartitionLogEpoch({})': () => storage.getPartitionLogEpoch({}),
          "setHorizonSeq(p, 'x')": () => storage.setHorizonSeq('p1', 'x'),
          "pruneCommitsThrough(p, 'x')": () => storage.pruneCommitsThrough('p1', 'x'),
          'pruneCommitsThrough(p)': () => storage.pruneCommitsThrough('p1'),
          "getCommitSeqBefore(p, 'x')": () => storage.getCommitSeqBefore('p1', 'x'),
          'readCommitWindow(p, null)': () => storage.readCommitWindow('p1', null),
          'readCommitWindow bad scopeFilter': () => storage.readCommitWindow('p1', { ...goodWindow, scopeFilter: 'p1' }),
          'readCommitWindow NaN afterSeq': () => storage.readCommitWindow('p1', { ...goodWindow, afterSeq: 'zero' }),
          'readCommitWindow filter values not strings': () => storage.readCommitWindow('p1', { ...goodWindow, scopeFilter: { project_id: [1, 2] } }),
          'scanRows(p, undefined)': () => storage.scanRows('p1', undefined),
          'scanRows limit string': () => storage.scanRows('p1', { ...goodScan, limit: 'ten' }),
          'scanRows unknown table': () => storage.scanRows('p1', { ...goodScan, table: 'nope' }),
          'latestScopedChangeSeq(p, null)': () => storage.latestScopedChangeSeq('p1', null),
          'readServeGate(p, "1")': () => storage.readServeGate('p1', 'one'),
          'putClientRecord(p, null)': () => storage.putClientRecord('p1', null),
          'putClientRecord bad fields': () => storage.putClientRecord('p1', { clientId: 1, actorId: 'a', wireVersion: 1, cursor: 0, updatedAtMs: 0, subscriptions: [] }),
          'putClientRecord bad subscriptions': () => storage.putClientRecord('p1', { clientId: 'c', actorId: 'a', wireVersion: 1, cursor: 0, updatedAtMs: 0, subscriptions: 'none' }),
          'advanceClientCursor bad cursor': () => storage.advanceClientCursor('p1', 'c', 'a', 'e', 'x', 1),
          'updateClientCursor bad cursor': () => storage.updateClientCursor('p1', 'c', {}, 1),
          "getActiveClientCursorFloor(p, 'x')": () => storage.getActiveClientCursorFloor('p1', 'x'),
          'begin(42)': () => storage.begin(42),
          'begin()': () => storage.begin(),
        };
        for (const [label, call] of Object.entries(cases)) {
          await rejectsClearly(call, label);
        }
        await stillWorks(storage, 'bad storage calls');
      }));

    test('invalid sequence numbers are rejected and change nothing', () =>
      withStorage(engine, async (storage) => {
        await storage.touchPartition('p1', 1, 'e');
        for (const seq of [Number.NaN, -1, 2.5, Number.NEGATIVE_INFINITY]) {
          await rejectsClearly(() => storage.setHorizonSeq('p1', seq), `setHorizonSeq(${seq})`);
          await rejectsClearly(() => storage.pruneCommitsThrough('p1', seq), `pruneCommitsThrough(${seq})`);
          await rejectsClearly(() => storage.pruneCommitsThrough('p1', { logEpoch: 'e', throughSeq: seq }), `prune object ${seq}`);
        }
        assert.equal(await storage.getHorizonSeq('p1'), 0);
        for (const n of [Number.NaN, 1.5, 2 ** 60]) {
          await rejectsClearly(() => storage.readCommitWindow('p1', { ...goodWindow, afterSeq: n }), `readCommitWindow afterSeq ${n}`);
          await rejectsClearly(() => storage.readCommitWindow('p1', { ...goodWindow, throughSeq: n }), `readCommitWindow throughSeq ${n}`);
          await rejectsClearly(() => storage.readCommitWindow('p1', { ...goodWindow, limitChanges: n }), `readCommitWindow limitChanges ${n}`);
          await rejectsClearly(() => storage.scanRows('p1', { ...goodScan, limit: n }), `scanRows limit ${n}`);
          await rejectsClearly(() => storage.getCommitSeqBefore('p1', n), `getCommitSeqBefore ${n}`);
          await rejectsClearly(
            () => storage.putClientRecord('p1', { clientId: 'c', actorId: 'a', wireVersion: 1, cursor: n, updatedAtMs: 0, subscriptions: [] }),
            `putClientRecord cursor ${n}`,
          );
          await rejectsClearly(() => storage.advanceClientCursor('p1', 'c', 'a', 'e', n, 1), `advanceClientCursor ${n}`);
          await rejectsClearly(() => storage.updateClientCursor('p1', 'c', n, 1), `updateClientCursor ${n}`);
        }
        assert.equal(await storage.getClientRecord('p1', 'c'), undefined);
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        for (const n of [Number.NaN, 1.5, 2 ** 60]) {
          await rejectsClearly(() => tx.upsertRow('tasks', { ...taskRow('r'), serverVersion: n }), `upsertRow serverVersion ${n}`);
          await rejectsClearly(() => tx.appendCommit({ clientId: 'c', clientCommitId: 'cc', actorId: 'a', createdAtMs: n, changes: [] }), `appendCommit createdAtMs ${n}`);
          await rejectsClearly(
            () =>
              tx.appendCommit({
                clientId: 'c', clientCommitId: 'cc', actorId: 'a', createdAtMs: 1,
                changes: [{ table: 'tasks', rowId: 'r', op: 'upsert', rowVersion: n, scopes: { project_id: 'p1' }, payload: taskRow('r').payload }],
              }),
            `appendCommit rowVersion ${n}`,
          );
        }
        assert.equal(await tx.getRow('tasks', 'r'), undefined);
        await tx.rollback();
        assert.equal(await storage.getMaxCommitSeq('p1'), 0);
        await stillWorks(storage, 'invalid seqs');
      }));

    test('transaction members reject wrong argument types; the transaction can still roll back', () =>
      withStorage(engine, async (storage) => {
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        const cases = {
          'getRow(42, r)': () => tx.getRow(42, 'r'),
          'upsertRow(t, null)': () => tx.upsertRow('tasks', null),
          'upsertRow rowId number': () => tx.upsertRow('tasks', { ...taskRow('r'), rowId: 5 }),
          'upsertRow payload string': () => tx.upsertRow('tasks', { ...taskRow('r'), payload: 'abc' }),
          'upsertRow payload missing': () => tx.upsertRow('tasks', { rowId: 'r', serverVersion: 1, scopes: {} }),
          'upsertRow scopes not an object': () => tx.upsertRow('tasks', { ...taskRow('r'), scopes: 'p1' }),
          'upsertRow serverVersion string': () => tx.upsertRow('tasks', { ...taskRow('r'), serverVersion: 'one' }),
          'upsertRow columnVersions string': () => tx.upsertRow('tasks', { ...taskRow('r'), columnVersions: 'x' }),
          'deleteRow(t, 1)': () => tx.deleteRow('tasks', 1),
          'appendCommit(null)': () => tx.appendCommit(null),
          'appendCommit changes not array': () => tx.appendCommit({ clientId: 'c', clientCommitId: 'cc', actorId: 'a', createdAtMs: 1, changes: 'x' }),
          'appendCommit createdAtMs string': () => tx.appendCommit({ clientId: 'c', clientCommitId: 'cc', actorId: 'a', createdAtMs: 'now', changes: [] }),
          'appendCommit bad op': () =>
            tx.appendCommit({ clientId: 'c', clientCommitId: 'cc', actorId: 'a', createdAtMs: 1, changes: [{ table: 'tasks', rowId: 'r', op: 'merge', scopes: {} }] }),
          'putPushResult(c, cc, null)': () => tx.putPushResult('c', 'cc', null),
          'getTombstoneSeq(1, 2)': () => tx.getTombstoneSeq(1, 2),
          'setBlobRefs ids not array': () => tx.setBlobRefs('tasks', 'r', 'blob'),
          'scanRows(null)': () => tx.scanRows(null),
          'readServeGate("x")': () => tx.readServeGate('x'),
        };
        for (const [label, call] of Object.entries(cases)) {
          await rejectsClearly(call, `tx.${label}`);
        }
        // nothing was written by the failed calls
        assert.equal(await tx.getRow('tasks', 'r'), undefined);
        await tx.rollback();
        assert.equal(await storage.getMaxCommitSeq('p1'), 0);
        await stillWorks(storage, 'bad tx calls');
      }));

    test('unknown tables reject with a clear error in every row operation', () =>
      withStorage(engine, async (storage) => {
        await rejectsPlain(storage.getRow('p1', 'nope', 'r'), unknownTablePattern('nope'));
        await rejectsPlain(storage.scanRows('p1', { ...goodScan, table: 'nope' }), /unknown table/);
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        await rejectsPlain(tx.getRow('nope', 'r'), unknownTablePattern('nope'));
        await rejectsPlain(tx.upsertRow('nope', taskRow('r'), { opIndex: 0 }), unknownTablePattern('nope'));
        await rejectsPlain(tx.deleteRow('nope', 'r'), unknownTablePattern('nope'));
        await rejectsPlain(tx.scanRows({ ...goodScan, table: 'nope' }), /unknown table/);
        await rejectsPlain(tx.getRow('sync_tombstones', 'r'), unknownTablePattern('sync_tombstones'));
        await tx.upsertRow('tasks', taskRow('fine'), { opIndex: 1 });
        await tx.commit();
        assert.ok(await storage.getRow('p1', 'tasks', 'fine'));
        await stillWorks(storage, 'unknown tables');
      }));

    test('a failed begin does not leak the queue', () =>
      withStorage(engine, async (storage) => {
        for (let i = 0; i < 5; i++) await rejectsClearly(() => storage.begin(i), `begin(${i})`);
        const tx = await within(storage.begin('p1'), 5000, 'begin after failed begins');
        await tx.rollback();
        await stillWorks(storage, 'failed begins');
      }));

    test('a failed commit path (decode error) followed by rollback releases the queue', () =>
      withStorage(engine, async (storage) => {
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        await assert.rejects(tx.upsertRow('tasks', { ...taskRow('r'), payload: Uint8Array.of(0) }));
        await tx.rollback();
        await stillWorks(storage, 'decode error');
      }));

    test('a NUL character: kept on SQLite; a coded rejection on PostgreSQL, with nothing written', () =>
      withStorage(engine, async (storage) => {
        const pg = engine.dialect === 'postgres';
        const row = taskRow('nul', { title: 'a\u0000b' });
        if (pg) {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          let caught;
          await assert.rejects(tx.upsertRow('tasks', row, { opIndex: 0 }), (e) => ((caught = e), true));
          assert.equal(caught.code, 'sync.invalid_request', `${caught.code} ${caught.message}`);
          await tx.rollback();
          assert.equal(await storage.getRow('p1', 'tasks', 'nul'), undefined);
          // In a key: an invalid argument, not a raw SQLSTATE.
          await assert.rejects(storage.getMaxCommitSeq('p\u0000'), (e) => e.code === 'ERR_SYNCULAR_INVALID_ARGUMENT');
        } else {
          const r = await hostPush(storage, 'p1', { clientId: 'c', clientCommitId: 'nul', ops: [{ table: 'tasks', row }] });
          assert.equal(r.result.commitSeq, 1);
          assert.deepEqual((await storage.getRow('p1', 'tasks', 'nul')).payload, row.payload);
        }
        await stillWorks(storage, 'NUL');
      }));
  });
}
