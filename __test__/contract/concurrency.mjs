// Queueing, submission order and the idempotency race (contract §6
// "Submission order", S6, T4, T8; storage-layout §11).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertSame, hostPush, taskRow, withStorage, within } from '../support/harness.mjs';

export function define(engine) {
  describe('concurrency', () => {
    test('two pushes under Promise.all both succeed with seqs 1 and 2', () =>
      withStorage(engine, async (storage) => {
        const [a, b] = await within(
          Promise.all([
            hostPush(storage, 'p1', { clientId: 'c1', clientCommitId: 'a', ops: [{ table: 'tasks', row: taskRow('ra') }] }),
            hostPush(storage, 'p1', { clientId: 'c2', clientCommitId: 'b', ops: [{ table: 'tasks', row: taskRow('rb') }] }),
          ]),
          10_000,
          'concurrent pushes',
        );
        assert.ok(a.applied && b.applied);
        assert.deepEqual([a.commitSeq, b.commitSeq].sort(), [1, 2]);
        assert.equal(await storage.getMaxCommitSeq('p1'), 2);
        assert.ok(await storage.getRow('p1', 'tasks', 'ra'));
        assert.ok(await storage.getRow('p1', 'tasks', 'rb'));
      }));

    test('many concurrent pushes across partitions get dense seqs per partition', () =>
      withStorage(engine, async (storage) => {
        const pushes = [];
        for (let i = 0; i < 24; i++) {
          const partition = `p${i % 3}`;
          pushes.push(hostPush(storage, partition, { clientId: 'c', clientCommitId: `cc${i}`, ops: [{ table: 'tasks', row: taskRow(`r${i}`) }] }));
        }
        const results = await within(Promise.all(pushes), 20_000, 'concurrent pushes');
        for (let p = 0; p < 3; p++) {
          const seqs = results.filter((_, i) => i % 3 === p).map((r) => r.commitSeq).sort((x, y) => x - y);
          assert.deepEqual(seqs, [1, 2, 3, 4, 5, 6, 7, 8]);
          assert.equal(await storage.getMaxCommitSeq(`p${p}`), 8);
        }
      }));

    test('begin() while a transaction is open waits instead of failing', () =>
      withStorage(engine, async (storage) => {
        const tx1 = await storage.begin('p1');
        await tx1.lockPartitionForPush();
        await tx1.upsertRow('tasks', taskRow('first'), { opIndex: 0 });
        const second = storage.begin('p1').then(async (tx2) => {
          await tx2.lockPartitionForPush();
          const seen = await tx2.getRow('tasks', 'first');
          const seq = await tx2.appendCommit({ clientId: 'c', clientCommitId: 'two', actorId: 'a', createdAtMs: 2, changes: [] });
          await tx2.commit();
          return { seen, seq };
        });
        await new Promise((r) => setTimeout(r, 50));
        const seq1 = await tx1.appendCommit({ clientId: 'c', clientCommitId: 'one', actorId: 'a', createdAtMs: 1, changes: [] });
        await tx1.commit();
        const { seen, seq } = await within(second, 5000, 'second transaction');
        assert.equal(seq1, 1);
        assert.equal(seq, 2);
        assert.ok(seen, 'the waiting push sees the first push once it holds the lock');
      }));

    test('a queued begin proceeds after the open transaction rolls back', () =>
      withStorage(engine, async (storage) => {
        const tx1 = await storage.begin('p1');
        await tx1.lockPartitionForPush();
        const second = storage.begin('p1').then(async (tx2) => {
          await tx2.lockPartitionForPush();
          await tx2.rollback();
          return 'ok';
        });
        await new Promise((r) => setTimeout(r, 20));
        await tx1.rollback();
        assert.equal(await within(second, 5000, 'queued begin'), 'ok');
      }));

    test('idempotency race: exactly one of two identical pushes applies, both see one result', () =>
      withStorage(engine, async (storage) => {
        const push = () =>
          hostPush(storage, 'p1', {
            clientId: 'c1',
            clientCommitId: 'same',
            ops: [{ table: 'tasks', row: taskRow('r1') }],
          });
        const [a, b] = await within(Promise.all([push(), push()]), 10_000, 'racing pushes');
        assert.equal([a, b].filter((x) => x.applied).length, 1, 'exactly one push applies');
        assertSame(a.result, b.result);
        assert.equal(a.result.status, 'applied');
        assert.equal(a.result.commitSeq, 1);
        assert.equal(await storage.getMaxCommitSeq('p1'), 1);
        // a later retry is answered from the store
        const c = await push();
        assert.equal(c.applied, false);
        assertSame(c.result, a.result);
      }));

    test('calls take effect in submission order without awaiting', () =>
      withStorage(engine, async (storage) => {
        const touch = storage.touchPartition('p1', 1, 'epoch-1');
        assert.equal(await storage.getPartitionLogEpoch('p1'), 'epoch-1');
        await touch;
        const h = storage.setHorizonSeq('p1', 9);
        assert.equal(await storage.getHorizonSeq('p1'), 9);
        await h;
        const put = storage.putClientRecord('p1', { clientId: 'c', actorId: 'a', wireVersion: 1, cursor: 1, updatedAtMs: 1, subscriptions: [] });
        const adv = storage.updateClientCursor('p1', 'c', 5, 5);
        assert.equal((await storage.getClientRecord('p1', 'c')).cursor, 5);
        await Promise.all([put, adv]);
      }));

    test('concurrent first ensureSchema calls and pushes all succeed', () =>
      withStorage(
        engine,
        async (storage) => {
          const { fixtureSchema } = await import('../support/schema.mjs');
          const work = [];
          for (let i = 0; i < 6; i++) {
            work.push(storage.ensureSchema(fixtureSchema()));
            work.push(
              storage.ensureSchema(fixtureSchema()).then(() =>
                hostPush(storage, 'p1', { clientId: 'c', clientCommitId: `cc${i}`, ops: [{ table: 'tasks', row: taskRow(`r${i}`) }] }),
              ),
            );
          }
          await within(Promise.all(work), 20_000, 'concurrent ensureSchema');
          assert.equal(await storage.getMaxCommitSeq('p1'), 6);
          assert.equal((await storage.readServeGate('p1', 1)).storedSchemaVersion, 1);
        },
        { ensure: false },
      ));

    test('a burst of mixed unawaited calls all settle', () =>
      withStorage(engine, async (storage) => {
        const calls = [];
        for (let i = 0; i < 50; i++) {
          calls.push(storage.touchPartition(`p${i % 5}`, i, `e${i % 5}`));
          calls.push(storage.getMaxCommitSeq(`p${i % 5}`));
          calls.push(storage.getRow(`p${i % 5}`, 'tasks', `r${i}`));
        }
        calls.push(hostPush(storage, 'p0', { clientId: 'c', clientCommitId: 'x', ops: [{ table: 'tasks', row: taskRow('r0') }] }));
        const results = await within(Promise.all(calls), 20_000, 'burst');
        assert.equal(results.length, 151);
        assert.deepEqual(await storage.listPartitions(), ['p0', 'p1', 'p2', 'p3', 'p4']);
      }));
  });
}
