// Shutdown (README "Shutdown"), one matrix for every engine: close()
// refuses new calls at once with ERR_SYNCULAR_CLOSED; what was begun or
// submitted before it gets closeDrainMs to finish; what is still open then
// is rolled back; nothing is acknowledged after close() resolves, and
// nothing acknowledged before it is lost.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fixtureSchema } from '../support/schema.mjs';
import { stillPending, taskRow, upsertChange } from '../support/harness.mjs';

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
      const order = [];
      const touched = storage.touchPartition('p1', 123, 'epoch-x').then(() => order.push('touched'));
      const tx = await openPush(storage, 'p1', 'r1');
      const committed = tx.commit().then(() => order.push('committed'));
      await storage.close().then(() => order.push('closed'));
      await touched;
      await committed;
      // Acknowledged before close() resolved, never after.
      assert.deepEqual(order.slice().sort(), ['closed', 'committed', 'touched']);
      assert.equal(order.at(-1), 'closed', order.join(', '));
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

    test('a begin still queued when the drain ends is refused with ERR_SYNCULAR_CLOSED before close() resolves', async () => {
      // One connection on PostgreSQL, so the second begin waits as it does
      // behind SQLite's one write lease.
      const storage = engine.create({ closeDrainMs: 50, ...(engine.dialect === 'postgres' ? { maxConnections: 1 } : {}) });
      await storage.ensureSchema(fixtureSchema());
      const first = await openPush(storage, 'p1', 'r1');
      const order = [];
      const second = storage.begin('p2');
      const outcome = second.then(
        (tx) => (order.push('granted'), { tx }),
        (err) => (order.push('refused'), { err }),
      );
      assert.ok(await stillPending(second, 100), 'the second begin waits for the first transaction');
      await storage.close().then(() => order.push('closed'));
      const { tx, err } = await outcome;
      if (tx !== undefined) await tx.rollback();
      assert.deepEqual(order, ['refused', 'closed']);
      assert.ok(CLOSED(err), `refused with ${err?.code}: ${err?.message}`);
      await assert.rejects(first.commit(), CLOSED);
    });

    test('a call of a transaction still running when the drain ends is cut: it rejects with ERR_SYNCULAR_CLOSED before close() resolves', async () => {
      // A registered query that runs for seconds (its own limit: 20 s).
      const sql =
        engine.dialect === 'postgres'
          ? 'SELECT count(*) AS c FROM generate_series(1, 400000000) AS s(n)'
          : 'WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 2000000000) SELECT count(*) AS c FROM s';
      const storage = engine.create({ closeDrainMs: 50, queryTimeoutMs: 20_000 });
      await storage.ensureSchema(fixtureSchema());
      const tx = await storage.begin('p1');
      await tx.lockPartitionForPush();
      const order = [];
      const running = tx.queryAuthoritative({ sql, params: [], tables: [] }).then(
        () => order.push('answered'),
        (err) => (order.push('refused'), err),
      );
      await delay(200);
      const started = Date.now();
      await storage.close().then(() => order.push('closed'));
      const took = Date.now() - started;
      const err = await running;
      assert.deepEqual(order, ['refused', 'closed']);
      assert.ok(CLOSED(err), `refused with ${err?.code}: ${err?.message}`);
      assert.ok(took < 5000, `close() took ${took} ms: the running call was not cut`);
    });

    test('a call of a transaction waiting on another transaction\'s lock when the drain ends rejects with ERR_SYNCULAR_CLOSED before close() resolves', { skip: engine.dialect !== 'postgres' && 'one writer: a second transaction cannot be open to wait on the first' }, async () => {
      const storage = engine.create({ closeDrainMs: 50 });
      await storage.ensureSchema(fixtureSchema());
      const first = await openPush(storage, 'p1', 'r1');
      const second = await storage.begin('p1');
      const order = [];
      const waiting = second.lockPartitionForPush();
      const outcome = waiting.then(
        () => order.push('locked'),
        (err) => (order.push('refused'), err),
      );
      assert.ok(await stillPending(waiting, 100), 'the second lock waits for the first transaction');
      await storage.close().then(() => order.push('closed'));
      const err = await outcome;
      assert.deepEqual(order, ['refused', 'closed']);
      assert.ok(CLOSED(err), `refused with ${err?.code}: ${err?.message}`);
      await assert.rejects(first.commit(), CLOSED);
      await assert.rejects(second.getRow('tasks', 'r1'), CLOSED);
    });

    test('a storage-level write still queued when the drain ends is refused with ERR_SYNCULAR_CLOSED before close() resolves; it never lands', async () => {
      const shared = engine.shared?.();
      const storage = shared ? shared.open({ closeDrainMs: 50 }) : engine.create({ closeDrainMs: 50 });
      await storage.ensureSchema(fixtureSchema());
      await storage.setHorizonSeq('p1', 1);
      const tx = await openPush(storage, 'p1', 'r1');
      // Waits for the open transaction (SQLite: its write lease;
      // PostgreSQL: p1's row lock). Fired without await, as a host does.
      const order = [];
      const write = storage.setHorizonSeq('p1', 7);
      const outcome = write.then(
        () => order.push('landed'),
        (err) => (order.push('refused'), err),
      );
      assert.ok(await stillPending(write, 100), 'the write waits for the open transaction');
      await storage.close().then(() => order.push('closed'));
      const err = await outcome;
      assert.deepEqual(order, ['refused', 'closed']);
      assert.ok(CLOSED(err), `refused with ${err?.code}: ${err?.message}`);
      await assert.rejects(tx.commit(), CLOSED);
      if (shared) {
        const again = shared.open();
        try {
          await again.ensureSchema(fixtureSchema());
          assert.equal(await again.getHorizonSeq('p1'), 1, 'the refused write left nothing');
          assert.equal(await again.getRow('p1', 'tasks', 'r1'), undefined);
        } finally {
          await again.close();
        }
      }
    });
  });
}
