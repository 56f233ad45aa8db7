// Transaction hygiene (README "Shutdown" / options): a transaction left open
// is reported at warn on `syncular::tx` with its partition, age and last
// member; past `transactionTimeoutMs` it is rolled back and its calls answer
// ERR_SYNCULAR_TX_TIMEOUT; reads never wait for an open transaction by
// itself.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fixtureSchema } from '../support/schema.mjs';
import { taskRow } from '../support/harness.mjs';

const delay = (ms) => new Promise((r) => setTimeout(r, ms));

export function define(engine) {
  describe('transaction hygiene', () => {
    test('a transaction left open is logged at warn once, with partition, age and last member', async () => {
      const records = [];
      const storage = engine.create({ transactionWarnMs: 40, logger: (r) => records.push(r), logFilter: 'syncular::tx=warn' });
      try {
        await storage.ensureSchema(fixtureSchema());
        const tx = await storage.begin('p-left');
        await tx.getRow('tasks', 'r1');
        await delay(250);
        const warned = records.filter((r) => r.target === 'syncular::tx');
        assert.equal(warned.length, 1, JSON.stringify(records));
        const [w] = warned;
        assert.equal(w.level, 'warn');
        assert.equal(w.fields.partition, 'p-left');
        assert.equal(w.fields.last_member, 'getRow');
        assert.equal(w.fields.rolled_back, false);
        assert.ok(w.fields.age_ms >= 40, `age ${w.fields.age_ms}`);
        await tx.rollback();
      } finally {
        await storage.close();
      }
    });

    test('past transactionTimeoutMs it is rolled back: its calls answer ERR_SYNCULAR_TX_TIMEOUT, writes go on', async () => {
      const storage = engine.create({ transactionTimeoutMs: 80 });
      try {
        await storage.ensureSchema(fixtureSchema());
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        await tx.upsertRow('tasks', taskRow('forgotten'), { opIndex: 0 });
        await delay(300);
        await assert.rejects(tx.getRow('tasks', 'forgotten'), { code: 'ERR_SYNCULAR_TX_TIMEOUT' });
        await assert.rejects(tx.commit(), { code: 'ERR_SYNCULAR_TX_TIMEOUT' });
        await tx.rollback();
        // The write lease is free again: a storage-level write and a new transaction run.
        await storage.touchPartition('p1', 5, 'e');
        const next = await storage.begin('p1');
        await next.rollback();
        assert.equal(await storage.getRow('p1', 'tasks', 'forgotten'), undefined);
      } finally {
        await storage.close();
      }
    });

    test('a read does not wait for an open transaction', async () => {
      const storage = engine.create();
      try {
        await storage.ensureSchema(fixtureSchema());
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        const answered = await Promise.race([storage.getMaxCommitSeq('p1').then(() => true), delay(2000).then(() => false)]);
        assert.equal(answered, true);
        await tx.rollback();
      } finally {
        await storage.close();
      }
    });

    test('a read waits only for the writes of its own partition: writes queued behind an open transaction stall no other partition', async () => {
      const storage = engine.create();
      try {
        await storage.ensureSchema(fixtureSchema());
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        // As the host fires them, without await. The write on p1 waits for
        // the transaction (SQLite: the one write lease; PostgreSQL: p1's
        // row lock); the touch of p2 is queued after it.
        const horizon = storage.setHorizonSeq('p1', 7);
        const touched = storage.touchPartition('p2', 5, 'epoch-p2');
        const landed = Promise.all([horizon, touched]);
        landed.catch(() => {}); // awaited below; a failed assertion must not hide behind it
        const answered = await Promise.race([storage.getMaxCommitSeq('p3').then(() => true), delay(1000).then(() => false)]);
        assert.equal(answered, true, 'a read of p3 waited for writes of p1 and p2 queued behind the open transaction');
        const scan = await Promise.race([storage.scanRows('p3', { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterRowId: null, limit: 10 }).then(() => true), delay(1000).then(() => false)]);
        assert.equal(scan, true, 'a scan of p3 waited');
        if (engine.dialect === 'postgres') {
          // Many writers: the touch of p2 does not queue behind the blocked write on p1.
          const epoch = await Promise.race([storage.getPartitionLogEpoch('p2'), delay(1000).then(() => 'stalled')]);
          assert.equal(epoch, 'epoch-p2', 'the touch of p2 waited for the write blocked on p1');
        }
        // Read-your-writes: reads submitted after a write see it once it lands.
        const epochRead = storage.getPartitionLogEpoch('p2');
        const horizonRead = storage.getHorizonSeq('p1');
        const registryRead = storage.listPartitions();
        await tx.rollback();
        assert.equal(await epochRead, 'epoch-p2');
        assert.equal(await horizonRead, 7);
        assert.ok((await registryRead).includes('p2'), 'an unpartitioned read sees every write submitted before it');
        await landed;
      } finally {
        await storage.close();
      }
    });
  });
}
