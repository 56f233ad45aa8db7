// N-API pitfalls (contract §6): undefined vs null, omitted optional fields,
// numbers not bigint, plain writable objects, promises everywhere.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { hostPush, norm, taskRow, withStorage, writeCommit } from '../support/harness.mjs';

// In-scope ServerStorage members, with valid arguments.
function storageCalls(schema) {
  return {
    ensureSchema: (s) => s.ensureSchema(schema),
    touchPartition: (s) => s.touchPartition('p1', 1, 'e1'),
    rotatePartitionLogEpoch: (s) => s.rotatePartitionLogEpoch('p9', 'e9', 1),
    listPartitionRegistry: (s) => s.listPartitionRegistry(),
    getPartitionLogEpoch: (s) => s.getPartitionLogEpoch('p1'),
    listPartitions: (s) => s.listPartitions(),
    getMaxCommitSeq: (s) => s.getMaxCommitSeq('p1'),
    getHorizonSeq: (s) => s.getHorizonSeq('p1'),
    setHorizonSeq: (s) => s.setHorizonSeq('p1', 0),
    pruneCommitsThrough: (s) => s.pruneCommitsThrough('p1', 0),
    getCommitSeqBefore: (s) => s.getCommitSeqBefore('p1', 1),
    getRow: (s) => s.getRow('p1', 'tasks', 'r'),
    getPushResult: (s) => s.getPushResult('p1', 'c', 'cc'),
    readCommitWindow: (s) => s.readCommitWindow('p1', { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterSeq: 0, throughSeq: 10, limitChanges: 10 }),
    latestScopedChangeSeq: (s) => s.latestScopedChangeSeq('p1', { table: 'tasks', scopeFilter: { project_id: ['p1'] } }),
    scanRows: (s) => s.scanRows('p1', { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterRowId: null, limit: 10 }),
    readServeGate: (s) => s.readServeGate('p1', 1),
    getClientRecord: (s) => s.getClientRecord('p1', 'c'),
    putClientRecord: (s) => s.putClientRecord('p1', { clientId: 'c', actorId: 'a', wireVersion: 1, cursor: 0, updatedAtMs: 0, subscriptions: [] }),
    listClientCursors: (s) => s.listClientCursors('p1'),
    advanceClientCursor: (s) => s.advanceClientCursor('p1', 'c', 'a', 'e1', 1, 1),
    updateClientCursor: (s) => s.updateClientCursor('p1', 'c', 2, 2),
    getActiveClientCursorFloor: (s) => s.getActiveClientCursorFloor('p1', 0),
    writerFenceAllows: (s) => s.writerFenceAllows('p1', 1),
  };
}

export function define(engine) {
  describe('N-API pitfalls', () => {
    test('absent values are undefined (never null); the cursor floor is null', () =>
      withStorage(engine, async (storage) => {
        assert.strictEqual(await storage.getRow('p1', 'tasks', 'x'), undefined);
        assert.strictEqual(await storage.getPushResult('p1', 'c', 'x'), undefined);
        assert.strictEqual(await storage.getClientRecord('p1', 'c'), undefined);
        assert.strictEqual(await storage.getPartitionLogEpoch('p1'), undefined);
        assert.strictEqual((await storage.readServeGate('p1', 1)).logEpoch, undefined);
        assert.strictEqual(await storage.getActiveClientCursorFloor('p1', 0), null);
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        assert.strictEqual(await tx.getRow('tasks', 'x'), undefined);
        assert.strictEqual(await tx.getPushResult('c', 'x'), undefined);
        assert.strictEqual(await tx.getTombstoneSeq('tasks', 'x'), undefined);
        assert.strictEqual((await tx.readServeGate(1)).logEpoch, undefined);
        assert.strictEqual(await tx.clearTombstone('tasks', 'x'), undefined);
        await tx.rollback();
      }));

    test('optional fields are omitted, not null or present-undefined', () =>
      withStorage(engine, async (storage) => {
        await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('r1') }]);
        await writeCommit(storage, 'p1', [{ table: 'tasks', delete: 'r1', scopes: { project_id: 'p1' } }]);
        await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('r2') }]);
        const row = await storage.getRow('p1', 'tasks', 'r2');
        assert.equal('columnVersions' in row, false);
        const [scanned] = await storage.scanRows('p1', { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterRowId: null, limit: 10 });
        assert.equal('columnVersions' in scanned, false);
        const w = await storage.readCommitWindow('p1', { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterSeq: 0, throughSeq: 10, limitChanges: 10 });
        const del = w[1].changes[0];
        assert.equal(del.op, 'delete');
        assert.equal('rowVersion' in del, false);
        assert.equal('payload' in del, false);
        assert.equal(typeof w[0].changes[0].rowVersion, 'number');

        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        await tx.commitRejectedPushResult('c', 'rej', {
          status: 'rejected',
          results: [{ opIndex: 0, status: 'error', code: 'sync.constraint_violation', message: 'x', retryable: false }],
        });
        const rejected = await storage.getPushResult('p1', 'c', 'rej');
        for (const key of ['commitSeq', 'recordedAtMs', 'cacheIdentity']) assert.equal(key in rejected, false, key);
        assert.equal('details' in rejected.results[0], false);
      }));

    test('numbers are JS numbers, never bigint', () =>
      withStorage(engine, async (storage) => {
        const touched = await storage.touchPartition('p1', 1_700_000_000_000, 'e1');
        const pushed = await hostPush(storage, 'p1', {
          clientId: 'c',
          clientCommitId: 'cc',
          createdAtMs: 1_700_000_000_001,
          ops: [{ table: 'tasks', row: taskRow('r1', {}, { version: 123456789012 }) }],
        });
        await storage.putClientRecord('p1', { clientId: 'c', actorId: 'a', wireVersion: 3, cursor: 9_007_199_254_740_000, updatedAtMs: 1_700_000_000_002, subscriptions: [] });
        const values = {
          touched,
          pushed,
          row: await storage.getRow('p1', 'tasks', 'r1'),
          max: await storage.getMaxCommitSeq('p1'),
          horizon: await storage.getHorizonSeq('p1'),
          before: await storage.getCommitSeqBefore('p1', 2e12),
          window: await storage.readCommitWindow('p1', { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterSeq: 0, throughSeq: 10, limitChanges: 10 }),
          latest: await storage.latestScopedChangeSeq('p1', { table: 'tasks', scopeFilter: { project_id: ['p1'] } }),
          client: await storage.getClientRecord('p1', 'c'),
          cursors: await storage.listClientCursors('p1'),
          floor: await storage.getActiveClientCursorFloor('p1', 0),
          registry: await storage.listPartitionRegistry(),
          gate: await storage.readServeGate('p1', 1),
          prune: await storage.pruneCommitsThrough('p1', { logEpoch: 'e1', throughSeq: 0 }),
          legacyPrune: await storage.pruneCommitsThrough('p1', 0),
        };
        norm(values); // throws on bigint
        assert.equal(values.row.serverVersion, 123456789012);
        assert.equal(values.client.cursor, 9_007_199_254_740_000);
        assert.equal(values.floor, 9_007_199_254_740_000);
        assert.equal(values.window[0].createdAtMs, 1_700_000_000_001);
        assert.equal(typeof values.max, 'number');
        assert.equal(typeof values.pushed.result.commitSeq, 'number');
        assert.equal(typeof values.legacyPrune, 'number');
      }));

    test('the storage is a plain, extensible object; methods can be reassigned', () =>
      withStorage(engine, async (storage) => {
        assert.equal(Object.isFrozen(storage), false);
        assert.equal(Object.isSealed(storage), false);
        assert.equal(Object.isExtensible(storage), true);
        const original = storage.begin;
        let calls = 0;
        storage.begin = async function (partition) {
          calls++;
          return original.call(this, partition);
        };
        const originalGetRow = storage.getRow;
        storage.getRow = (...args) => originalGetRow.apply(storage, args);
        storage.custom = 42;
        const r = await hostPush(storage, 'p1', { clientId: 'c', clientCommitId: 'cc', ops: [{ table: 'tasks', row: taskRow('r1') }] });
        assert.equal(r.commitSeq, 1);
        assert.equal(calls, 1);
        assert.ok(await storage.getRow('p1', 'tasks', 'r1'));
        storage.begin = original;
        delete storage.custom;
      }));

    test('works through a Proxy that replaces some methods and forwards the rest', () =>
      withStorage(engine, async (storage) => {
        let begins = 0;
        const proxy = new Proxy(storage, {
          get(target, prop, receiver) {
            if (prop === 'begin') {
              return async (partition) => {
                begins++;
                return target.begin(partition);
              };
            }
            if (prop === 'getHorizonSeq') return async () => 777;
            return Reflect.get(target, prop, receiver);
          },
        });
        const r = await hostPush(proxy, 'p1', { clientId: 'c', clientCommitId: 'cc', ops: [{ table: 'tasks', row: taskRow('r1') }] });
        assert.equal(r.applied, true);
        assert.equal(begins, 1);
        assert.equal(await proxy.getHorizonSeq('p1'), 777);
        assert.equal(await proxy.getMaxCommitSeq('p1'), 1);
        assert.ok(await proxy.getRow('p1', 'tasks', 'r1'));
        assert.deepEqual(await proxy.listPartitions(), []);
      }));

    test('transactions are plain objects too, and work through a Proxy', () =>
      withStorage(engine, async (storage) => {
        const tx = await storage.begin('p1');
        assert.equal(Object.isFrozen(tx), false);
        assert.equal(Object.isExtensible(tx), true);
        const originalGetRow = tx.getRow;
        let reads = 0;
        tx.getRow = async (...args) => {
          reads++;
          return originalGetRow.apply(tx, args);
        };
        const proxied = new Proxy(tx, { get: (t, p, r) => Reflect.get(t, p, r) });
        await proxied.lockPartitionForPush();
        await proxied.upsertRow('tasks', taskRow('r1'), { opIndex: 0 });
        assert.ok(await proxied.getRow('tasks', 'r1'));
        assert.equal(reads, 1);
        await proxied.appendCommit({ clientId: 'c', clientCommitId: 'cc', actorId: 'a', createdAtMs: 1, changes: [] });
        await proxied.commit();
        assert.ok(await storage.getRow('p1', 'tasks', 'r1'));
      }));

    test('every in-scope storage member returns a promise', () =>
      withStorage(engine, async (storage) => {
        for (const [name, call] of Object.entries(storageCalls(undefined))) {
          assert.equal(typeof storage[name], 'function', `${name} is a function`);
        }
        const { fixtureSchema } = await import('../support/schema.mjs');
        for (const [name, call] of Object.entries(storageCalls(fixtureSchema()))) {
          const p = call(storage);
          assert.ok(p instanceof Promise || (p && typeof p.then === 'function'), `${name} returns a promise`);
          await p;
        }
        const tx = storage.begin('p1');
        assert.ok(tx instanceof Promise || typeof tx.then === 'function');
        const t = await tx;
        const txCalls = {
          lockPartitionForPush: () => t.lockPartitionForPush(),
          getRow: () => t.getRow('tasks', 'r'),
          getTombstoneSeq: () => t.getTombstoneSeq('tasks', 'r'),
          clearTombstone: () => t.clearTombstone('tasks', 'r'),
          getPushResult: () => t.getPushResult('c', 'cc'),
          scanRows: () => t.scanRows({ table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterRowId: null, limit: 1 }),
          upsertRow: () => t.upsertRow('tasks', taskRow('r')),
          deleteRow: () => t.deleteRow('tasks', 'r'),
          setBlobRefs: () => t.setBlobRefs('tasks', 'r', []),
          prefetchRows: () => t.prefetchRows('tasks', ['r']),
          readServeGate: () => t.readServeGate(1),
          appendCommit: () => t.appendCommit({ clientId: 'c', clientCommitId: 'cc', actorId: 'a', createdAtMs: 1, changes: [] }),
          putPushResult: () => t.putPushResult('c', 'cc', { status: 'applied', commitSeq: 1, results: [] }),
          commit: () => t.commit(),
          rollback: () => t.rollback(),
        };
        for (const [name, call] of Object.entries(txCalls)) {
          const p = call();
          assert.ok(p && typeof p.then === 'function', `tx.${name} returns a promise`);
          await p;
        }
        assert.equal(typeof t.lockPartitionForCommitValidation, 'function');
        assert.equal(typeof t.commitRejectedPushResult, 'function');
        const closing = storage.begin('p1').then((x) => x.rollback());
        await closing;
      }));

    test('writerFenceAllows is true when no fence exists', () =>
      withStorage(engine, async (storage) => {
        assert.strictEqual(await storage.writerFenceAllows('p1', 0), true);
        assert.strictEqual(await storage.writerFenceAllows('p1', 5), true);
      }));
  });
}
