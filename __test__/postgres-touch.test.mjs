// PostgreSQL: the host fires touchPartition without awaiting it, then reads.
// Once a partition is known registered, a touch refreshes only its registry
// row's timestamp, so reads that cannot see that (client records, the
// counter, the epoch) need not wait for the touch's round trip, while later
// writes and the registry listing still come after it. Before that, the
// first touch registers the partition's epoch, and the serve gate and the
// epoch read wait for it. A second connection holds the registry row (or
// the key being inserted) to keep the touch in flight.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { engines } from './support/engines.mjs';
import { fixtureSchema } from './support/schema.mjs';

const pgEngine = engines.find((e) => e.dialect === 'postgres');

/** Settles to 'pending' when `p` has not settled within `ms`. */
const within = (p, ms) => Promise.race([p.then(() => 'settled', () => 'failed'), new Promise((r) => setTimeout(() => r('pending'), ms))]);

const record = (cursor, updatedAtMs) => ({ clientId: 'c1', actorId: 'a1', wireVersion: 2, cursor, updatedAtMs, subscriptions: [] });

/** `p`'s value, or a failure when it is still held up after 5 s (it would wait for the blocker forever). */
const answers = (p, what) =>
  Promise.race([p, new Promise((_, reject) => setTimeout(() => reject(new Error(`${what} waited for the touch`)), 5_000).unref())]);

async function withBlocker(schema, fn) {
  const c = new pg.Client({ connectionString: pgEngine.url });
  await c.connect();
  try {
    await c.query(`SET search_path TO "${schema}"`);
    await fn(c);
  } finally {
    await c.query('ROLLBACK').catch(() => {});
    await c.end();
  }
}

test('postgres: a touch of a registered partition holds up no read, but later writes and the registry listing', { skip: pgEngine?.skip, timeout: 30_000 }, async () => {
  const { schema, open } = pgEngine.shared();
  const s = open();
  try {
    await s.ensureSchema(fixtureSchema());
    await s.touchPartition('p', 1, 'epoch-1');
    await s.putClientRecord('p', record(3, 1));
    await withBlocker(schema, async (c) => {
      await c.query('BEGIN');
      await c.query(`SELECT 1 FROM sync_partition_registry WHERE partition = 'p' FOR UPDATE`);
      const touch = s.touchPartition('p', 2, 'epoch-other');
      // Reads that cannot see a timestamp answer while the touch waits.
      assert.equal((await answers(s.getClientRecord('p', 'c1'), 'getClientRecord'))?.cursor, 3);
      assert.equal(await answers(s.getMaxCommitSeq('p'), 'getMaxCommitSeq'), 0);
      assert.equal(await answers(s.getPartitionLogEpoch('p'), 'getPartitionLogEpoch'), 'epoch-1');
      assert.equal((await answers(s.readServeGate('p', 1), 'readServeGate')).logEpoch, 'epoch-1');
      // A later write of the partition, and the registry listing, wait for it.
      const put = s.putClientRecord('p', record(4, 2));
      const listed = s.listPartitionRegistry();
      assert.equal(await within(touch, 300), 'pending', 'the touch waits for the row lock');
      assert.equal(await within(put, 50), 'pending', 'a later write waits for the touch');
      assert.equal(await within(listed, 50), 'pending', 'the registry listing waits for the touch');
      await c.query('ROLLBACK');
      const entry = await touch;
      assert.equal(entry.logEpoch, 'epoch-1', 'a touch never changes the epoch');
      assert.equal(entry.lastAuthenticatedAtMs, 2);
      await put;
      const list = await listed;
      assert.equal(list.find((e) => e.partition === 'p')?.lastAuthenticatedAtMs, 2, 'the listing saw the touch');
      assert.equal((await s.getClientRecord('p', 'c1'))?.cursor, 4);
    });
  } finally {
    await s.close();
  }
});

test('postgres: the first touch of a partition holds up its serve gate and epoch reads', { skip: pgEngine?.skip, timeout: 30_000 }, async () => {
  const { schema, open } = pgEngine.shared();
  const s = open();
  try {
    await s.ensureSchema(fixtureSchema());
    await s.touchPartition('other', 1, 'epoch-o');
    await withBlocker(schema, async (c) => {
      await c.query('BEGIN');
      // The same key inserted and not committed: the touch's insert waits for it.
      await c.query(
        `INSERT INTO sync_partition_registry (partition, log_epoch, epoch_required, last_authenticated_at_ms) VALUES ('fresh', 'epoch-blocker', false, 1)`,
      );
      const touch = s.touchPartition('fresh', 5, 'epoch-f');
      const epoch = s.getPartitionLogEpoch('fresh');
      const gate = s.readServeGate('fresh', 1);
      // Another partition's reads do not wait.
      assert.equal(await answers(s.getPartitionLogEpoch('other'), 'another partition\'s epoch read'), 'epoch-o');
      assert.equal(await within(epoch, 300), 'pending', 'the epoch read waits for the first touch');
      assert.equal(await within(gate, 50), 'pending', 'the serve gate waits for the first touch');
      await c.query('ROLLBACK');
      assert.equal((await touch).logEpoch, 'epoch-f');
      assert.equal(await epoch, 'epoch-f', 'the epoch read saw the registration');
      assert.equal((await gate).logEpoch, 'epoch-f');
    });
  } finally {
    await s.close();
  }
});
