// The deferred append (src/postgres/deferred.rs, issue 27): under the
// partition lock appendCommit answers the next commitSeq at once and the
// append travels with the transaction's next batch (with the push result
// and COMMIT on a host's push). Whatever path an append takes, the log
// must read the same, and a transaction that does not commit must leave
// nothing behind.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { engines, freshPgSchema } from './support/engines.mjs';
import { NativeStorage } from './support/package.mjs';
import { fixtureSchema } from './support/schema.mjs';
import { taskRow, upsertChange, deleteChange, writeCommit } from './support/harness.mjs';
import { StorageConstraintError } from '../index.js';

const pg = engines.find((e) => e.dialect === 'postgres');

/** One connection: every transaction after the first runs on a session that prepared the statements. */
function open(schema = freshPgSchema()) {
  return new NativeStorage({ url: pg.requireUrl(), schema, maxConnections: 1 });
}

const hostile = ["quote ' and ''", 'back\\slash \\x00 E\'', 'ünïcödé 🚀', '$1 $$ $prepare$ ;COMMIT;', '{"json":"like"}'];
const projects = ['p1', ...hostile.map((s) => `p ${s}`)];

/** `partition`'s commits as the window reads them, without commitSeq, bytes as hex. */
async function log(storage, partition) {
  const w = await storage.readCommitWindow(partition, { table: 'tasks', scopeFilter: { project_id: projects }, afterSeq: 0, throughSeq: 1_000_000, limitChanges: 1000 });
  const hex = (_, v) => (v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v);
  return w.map(({ commitSeq, ...c }) => JSON.parse(JSON.stringify(c, hex)));
}

/**
 * A storage with the fixture schema and one commit in `p` (so the counter
 * row exists and the next append is deferred).
 */
async function withLog(storage) {
  await storage.ensureSchema(fixtureSchema());
  await writeCommit(storage, 'p', [{ table: 'tasks', row: taskRow('r0') }]);
}

/** A push on `p` up to its append: locked, `r1` written; returns the transaction and the answered commitSeq. */
async function appended(storage) {
  const tx = await storage.begin('p');
  await tx.lockPartitionForPush();
  await tx.upsertRow('tasks', taskRow('r1'), { opIndex: 0 });
  const seq = await tx.appendCommit({ clientId: 'c', clientCommitId: 'k1', actorId: 'a', createdAtMs: 1, changes: [] });
  return { tx, seq };
}

if (pg) {
  describe('postgres: the deferred append', () => {
    test('a commit reads the same in the log whether its append was deferred or not', async () => {
      const storage = open();
      try {
        await storage.ensureSchema(fixtureSchema());
        const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
        const ops = hostile.map((s, i) => ({ table: 'tasks', row: taskRow(`r${i}${s}`, { title: s, project: `p ${s}` }) }));
        const meta = { clientId: `c ${hostile[0]}`, clientCommitId: hostile[1], actorId: hostile[2], createdAtMs: 5 };
        const changes = [...ops.map((o) => upsertChange('tasks', o.row)), deleteChange('tasks', `gone ${hostile[3]}`, { project_id: `p ${hostile[4]}` })];
        changes[0] = { ...changes[0], payload: new Uint8Array(all) };
        // In "a" the commit is the partition's first: no counter row to read, so its append goes at once.
        assert.equal(await writeCommit(storage, 'a', ops, { ...meta, changes }), 1);
        // In "b" a first commit makes the counter row; the second is deferred.
        await writeCommit(storage, 'b', [{ table: 'tasks', row: taskRow('warm') }]);
        assert.equal(await writeCommit(storage, 'b', ops, { ...meta, changes }), 2);
        const a = await log(storage, 'a');
        const b = await log(storage, 'b');
        assert.equal(a.length, 1);
        assert.equal(a[0].changes.length, 6);
        assert.equal(a[0].changes[0].payload, all.toString('hex'));
        assert.equal(b.length, 2);
        assert.deepEqual(b[1], a[0]);
        assert.equal(await storage.getMaxCommitSeq('b'), 2);
      } finally {
        await storage.close();
      }
    });

    test('what the transaction sends next sees the append; a second append follows it', async () => {
      const storage = open();
      try {
        await withLog(storage);
        const tx = await storage.begin('p');
        await tx.lockPartitionForPush();
        await tx.upsertRow('tasks', taskRow('r1'), { opIndex: 0 });
        const first = await tx.appendCommit({ clientId: 'c', clientCommitId: 'k1', actorId: 'a', createdAtMs: 1, changes: [upsertChange('tasks', taskRow('r1'))] });
        assert.equal(first, 2);
        // An upsert after the append: the append goes first, in order.
        await tx.upsertRow('tasks', taskRow('r2'), { opIndex: 0 });
        const second = await tx.appendCommit({ clientId: 'c', clientCommitId: 'k2', actorId: 'a', createdAtMs: 1, changes: [upsertChange('tasks', taskRow('r2'))] });
        assert.equal(second, 3);
        await tx.commit();
        assert.equal(await storage.getMaxCommitSeq('p'), 3);
        const ids = (await log(storage, 'p')).flatMap((c) => c.changes.map((ch) => ch.rowId));
        assert.deepEqual(ids, ['r0', 'r1', 'r2']);
      } finally {
        await storage.close();
      }
    });

    test('rollback and a rejected push leave no trace of an append that was never sent', async () => {
      const storage = open();
      try {
        await withLog(storage);
        let { tx, seq } = await appended(storage);
        assert.equal(seq, 2);
        await tx.rollback();
        assert.equal(await storage.getMaxCommitSeq('p'), 1);
        assert.equal(await storage.getRow('p', 'tasks', 'r1'), undefined);

        ({ tx, seq } = await appended(storage));
        assert.equal(seq, 2);
        await tx.commitRejectedPushResult('c', 'k1', { status: 'rejected', recordedAtMs: 1, cacheIdentity: 'x', results: [] });
        assert.equal(await storage.getMaxCommitSeq('p'), 1, 'the rejection discarded the append');
        assert.equal(await storage.getRow('p', 'tasks', 'r1'), undefined);
        assert.equal((await storage.getPushResult('p', 'c', 'k1')).status, 'rejected');

        // The next push takes the number the discarded ones were given.
        assert.equal(await writeCommit(storage, 'p', [{ table: 'tasks', row: taskRow('r2') }]), 2);
      } finally {
        await storage.close();
      }
    });

    test('a fence raised after the lock fails the commit that carries the append, and nothing is recorded', async () => {
      const schema = freshPgSchema();
      const storage = open(schema);
      const other = open(schema);
      try {
        await withLog(storage);
        const { tx, seq } = await appended(storage);
        assert.equal(seq, 2);
        // Another process's checkpoint at version 2 fences this writer (version 1) out of p.
        await other.declareCheckpoint('p', 'cp', 2, 1000);
        await tx.putPushResult('c', 'k1', { status: 'applied', commitSeq: 2, recordedAtMs: 1, cacheIdentity: 'x', results: [] });
        await assert.rejects(tx.commit(), (e) => /sync\.storage\.writer_fence_rejected/.test(e.message) && !(e instanceof StorageConstraintError));
        await tx.rollback();
        assert.equal(await storage.getMaxCommitSeq('p'), 1);
        assert.equal(await storage.getRow('p', 'tasks', 'r1'), undefined);
        assert.equal(await storage.getPushResult('p', 'c', 'k1'), undefined);
        // Fenced now: the append itself rejects (read under the lock, not deferred).
        await assert.rejects(writeCommit(storage, 'p', [{ table: 'tasks', row: taskRow('r1') }]), /sync\.storage\.writer_fence_rejected/);
        assert.equal(await storage.getMaxCommitSeq('p'), 1);
      } finally {
        await storage.close();
        await other.close();
      }
    });
  });
}
