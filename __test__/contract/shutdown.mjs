// Shutdown (README "Shutdown"), one matrix for every engine: close()
// refuses new calls at once with ERR_SYNCULAR_CLOSED; what was begun or
// submitted before it gets closeDrainMs to finish; what is still open then
// is rolled back; nothing is acknowledged after close() resolves, and
// nothing acknowledged before it is lost.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fixtureSchema } from '../support/schema.mjs';
import { taskRow, upsertChange } from '../support/harness.mjs';

const CLOSED = (err) => err?.code === 'ERR_SYNCULAR_CLOSED';
const delay = (ms) => new Promise((r) => setTimeout(r, ms));

/** Starts a push of row `id` and stops before its commit. */
async function openPush(storage, partition, id) {
  const tx = await storage.begin(partition);
  await tx.lockPartitionForPush();
  await tx.upsertRow('tasks', taskRow(id), { opIndex: 0 });
  await tx.appendCommit({
    clientId: 'c',
    clientCommitId: `cc-${id}`,
    actorId: 'a',
    createdAtMs: 1_700_000_000_000,
    changes: [upsertChange('tasks', taskRow(id))],
  });
  return tx;
}

export function define(engine) {
  describe('shutdown', () => {
    test('after close() every member refuses with ERR_SYNCULAR_CLOSED, and close() is idempotent', async () => {
      const storage = engine.create();
      await storage.ensureSchema(fixtureSchema());
      const closing = storage.close();
      const members = Object.keys(storage).filter((k) => typeof storage[k] === 'function' && k !== 'close');
      assert.ok(members.length >= 45, `${members.length} members`);
      for (const name of members) {
        let out;
        assert.doesNotThrow(() => {
          out = storage[name]('p1', 'tasks', 'r1');
        }, name);
        await assert.rejects(out, CLOSED, name);
      }
      // The fast path of an already-ensured version refuses too.
      await assert.rejects(storage.ensureSchema(fixtureSchema()), CLOSED);
      await closing;
      await storage.close();
      await assert.rejects(storage.begin('p1'), CLOSED);
    });

    test('a transaction open at close() may finish within the drain; close() waits for it', async () => {
      const storage = engine.create({ closeDrainMs: 5000 });
      await storage.ensureSchema(fixtureSchema());
      const tx = await openPush(storage, 'p1', 'r1');
      const order = [];
      const closing = storage.close().then(() => order.push('closed'));
      await delay(20);
      await tx.putPushResult('c', 'cc-r1', { status: 'applied', commitSeq: 1, results: [{ opIndex: 0, status: 'applied' }] });
      await tx.commit().then(() => order.push('committed'));
      await closing;
      assert.deepEqual(order, ['committed', 'closed']);
    });

    test('a transaction still open when the drain ends is rolled back; its calls answer ERR_SYNCULAR_CLOSED', async () => {
      const shared = engine.shared?.();
      const storage = shared ? shared.open({ closeDrainMs: 50 }) : engine.create({ closeDrainMs: 50 });
      await storage.ensureSchema(fixtureSchema());
      const tx = await openPush(storage, 'p1', 'r1');
      const started = Date.now();
      await storage.close();
      assert.ok(Date.now() - started >= 45, 'close() waited for the drain');
      await assert.rejects(tx.getRow('tasks', 'r1'), CLOSED);
      await assert.rejects(tx.commit(), CLOSED);
      await tx.rollback();
      if (shared) {
        const again = shared.open();
        try {
          await again.ensureSchema(fixtureSchema());
          assert.equal(await again.getRow('p1', 'tasks', 'r1'), undefined, 'the cut push left nothing');
          assert.equal(await again.getMaxCommitSeq('p1'), 0);
        } finally {
          await again.close();
        }
      }
    });

    test('writes submitted before close() land, and are there after reopening', { skip: !engine.shared && 'needs a database that outlives the storage' }, async () => {
      const shared = engine.shared();
      const storage = shared.open();
      await storage.ensureSchema(fixtureSchema());
      // Fired without await, as the host fires touchPartition.
      const touched = storage.touchPartition('p1', 123, 'epoch-x');
      const tx = await openPush(storage, 'p1', 'r1');
      const committed = tx.commit();
      await storage.close();
      await touched;
      await committed;
      const again = shared.open();
      try {
        await again.ensureSchema(fixtureSchema());
        assert.equal(await again.getPartitionLogEpoch('p1'), 'epoch-x');
        assert.ok(await again.getRow('p1', 'tasks', 'r1'));
        assert.equal(await again.getMaxCommitSeq('p1'), 1);
      } finally {
        await again.close();
      }
    });

    test('a begin asked for before close() is either handed out within the drain or refused, never after close() resolves', async () => {
      const storage = engine.create({ closeDrainMs: 50 });
      await storage.ensureSchema(fixtureSchema());
      const first = await openPush(storage, 'p1', 'r1');
      // Behind `first` on a single-writer engine; on others it may be granted at once.
      const second = storage.begin('p1');
      let settledAt;
      second.then(
        () => (settledAt = 'granted'),
        () => (settledAt = 'refused'),
      );
      let closedAt;
      await storage.close().then(() => {
        closedAt = settledAt;
      });
      assert.ok(closedAt !== undefined, 'the begin settled before close() resolved');
      const tx = await second.catch((err) => {
        assert.ok(CLOSED(err), `refused with ${err?.code}`);
        return undefined;
      });
      if (tx !== undefined) await assert.rejects(tx.getRow('tasks', 'r1'), CLOSED);
      await assert.rejects(first.commit(), CLOSED);
    });
  });
}
