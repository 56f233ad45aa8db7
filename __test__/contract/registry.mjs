// Partition registry (contract S2–S5, S46; storage-layout §12.1).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { rejectsPlain, withStorage } from '../support/harness.mjs';

export function define(engine) {
  describe('partition registry', () => {
    test('touchPartition stores the initial epoch once and refreshes only the timestamp', () =>
      withStorage(engine, async (storage) => {
        const first = await storage.touchPartition('p1', 1000, 'epoch-a');
        assert.deepStrictEqual({ ...first }, { partition: 'p1', logEpoch: 'epoch-a', epochRequired: false, lastAuthenticatedAtMs: 1000 });
        const second = await storage.touchPartition('p1', 2000, 'epoch-b');
        assert.deepStrictEqual({ ...second }, { partition: 'p1', logEpoch: 'epoch-a', epochRequired: false, lastAuthenticatedAtMs: 2000 });
        assert.equal(await storage.getPartitionLogEpoch('p1'), 'epoch-a');
      }));

    test('getPartitionLogEpoch is undefined when unregistered and does not refresh the timestamp', () =>
      withStorage(engine, async (storage) => {
        assert.strictEqual(await storage.getPartitionLogEpoch('p1'), undefined);
        await storage.touchPartition('p1', 1000, 'epoch-a');
        assert.equal(await storage.getPartitionLogEpoch('p1'), 'epoch-a');
        const [entry] = await storage.listPartitionRegistry();
        assert.equal(entry.lastAuthenticatedAtMs, 1000);
        assert.strictEqual(await storage.getPartitionLogEpoch('p2'), undefined);
      }));

    test('empty epochs are rejected with a plain Error', () =>
      withStorage(engine, async (storage) => {
        await rejectsPlain(storage.touchPartition('p1', 1000, ''), /epoch/);
        await rejectsPlain(storage.rotatePartitionLogEpoch('p1', '', 1000), /epoch/);
        assert.strictEqual(await storage.getPartitionLogEpoch('p1'), undefined);
        assert.deepEqual(await storage.listPartitions(), []);
      }));

    test('rotatePartitionLogEpoch sets a required epoch and deletes the partition client records', () =>
      withStorage(engine, async (storage) => {
        await storage.touchPartition('p1', 1000, 'epoch-a');
        const record = (clientId) => ({ clientId, actorId: 'u1', wireVersion: 3, cursor: 4, updatedAtMs: 10, subscriptions: [] });
        await storage.putClientRecord('p1', record('c1'));
        await storage.putClientRecord('p1', record('c2'));
        await storage.putClientRecord('p2', record('c1'));
        const rotated = await storage.rotatePartitionLogEpoch('p1', 'epoch-b', 3000);
        assert.deepStrictEqual({ ...rotated }, { partition: 'p1', logEpoch: 'epoch-b', epochRequired: true, lastAuthenticatedAtMs: 3000 });
        assert.equal(await storage.getPartitionLogEpoch('p1'), 'epoch-b');
        assert.strictEqual(await storage.getClientRecord('p1', 'c1'), undefined);
        assert.strictEqual(await storage.getClientRecord('p1', 'c2'), undefined);
        assert.deepEqual(await storage.listClientCursors('p1'), []);
        assert.ok(await storage.getClientRecord('p2', 'c1'), 'other partitions keep their records');
        // a later touch keeps the rotated epoch and the required flag
        const touched = await storage.touchPartition('p1', 4000, 'epoch-c');
        assert.deepStrictEqual({ ...touched }, { partition: 'p1', logEpoch: 'epoch-b', epochRequired: true, lastAuthenticatedAtMs: 4000 });
      }));

    test('rotatePartitionLogEpoch registers an unknown partition', () =>
      withStorage(engine, async (storage) => {
        const entry = await storage.rotatePartitionLogEpoch('fresh', 'e1', 5);
        assert.deepStrictEqual({ ...entry }, { partition: 'fresh', logEpoch: 'e1', epochRequired: true, lastAuthenticatedAtMs: 5 });
        assert.deepEqual(await storage.listPartitions(), ['fresh']);
      }));

    test('listPartitionRegistry and listPartitions are ordered by partition', () =>
      withStorage(engine, async (storage) => {
        assert.deepEqual(await storage.listPartitionRegistry(), []);
        assert.deepEqual(await storage.listPartitions(), []);
        await storage.touchPartition('p3', 30, 'e3');
        await storage.touchPartition('p1', 10, 'e1');
        await storage.rotatePartitionLogEpoch('p2', 'e2', 20);
        const entries = await storage.listPartitionRegistry();
        assert.deepStrictEqual(
          entries.map((e) => ({ ...e })),
          [
            { partition: 'p1', logEpoch: 'e1', epochRequired: false, lastAuthenticatedAtMs: 10 },
            { partition: 'p2', logEpoch: 'e2', epochRequired: true, lastAuthenticatedAtMs: 20 },
            { partition: 'p3', logEpoch: 'e3', epochRequired: false, lastAuthenticatedAtMs: 30 },
          ],
        );
        assert.deepEqual(await storage.listPartitions(), ['p1', 'p2', 'p3']);
      }));

    test('registry works without ensureSchema', () =>
      withStorage(
        engine,
        async (storage) => {
          await storage.touchPartition('p1', 1, 'e');
          assert.deepEqual(await storage.listPartitions(), ['p1']);
        },
        { ensure: false },
      ));
  });
}
