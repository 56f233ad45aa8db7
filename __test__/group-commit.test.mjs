// Group commit on SQLite (lib/write-queue.js, SqliteEngine::hold/flush):
// a commit made while another lease waits is held in the open database
// transaction and acknowledged only with the COMMIT that makes it durable.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { hostPush, taskRow, within } from './support/harness.mjs';
import { NativeStorage } from './support/package.mjs';
import { fixtureSchema } from './support/schema.mjs';

const root = mkdtempSync(join(tmpdir(), 'syncular-group-'));
after(() => rmSync(root, { recursive: true, force: true }));
let files = 0;

async function open(opts = {}) {
  const path = join(root, `g-${files++}.db`);
  const storage = new NativeStorage({ url: `sqlite:${path}`, ...opts });
  await storage.ensureSchema(fixtureSchema());
  return { storage, path };
}

async function write(tx, rowId, commitId) {
  await tx.lockPartitionForPush();
  await tx.upsertRow('tasks', taskRow(rowId), { opIndex: 0 });
  return tx.appendCommit({ clientId: 'c', clientCommitId: commitId, actorId: 'a', createdAtMs: 1, changes: [] });
}

/** Settled state of a promise, without waiting for it. */
function track(promise) {
  const state = { settled: false, error: undefined };
  promise.then(
    () => {
      state.settled = true;
    },
    (err) => {
      state.settled = true;
      state.error = err;
    },
  );
  return state;
}

describe('group commit (sqlite file)', () => {
  test('a commit made while another lease waits settles with the group, and readers see it only then', async () => {
    // A long bound: the rescue timer must not end the group mid-test.
    const { storage } = await open({ groupCommit: { maxWaitMs: 10_000 } });
    try {
      const tx1 = await storage.begin('p');
      assert.equal(await write(tx1, 'a', 'one'), 1);
      const waiting = storage.begin('p');
      const c1 = track(tx1.commit());
      const tx2 = await within(waiting, 5000, 'second lease');
      await new Promise((r) => setTimeout(r, 1));
      // Not yet durable: the group is still open with tx2 in it.
      assert.equal(c1.settled, false);
      assert.equal(await storage.getRow('p', 'tasks', 'a'), undefined, 'readers see only committed state');
      assert.equal(await storage.getMaxCommitSeq('p'), 0);
      // The second lease builds on the first one's staged work.
      assert.ok(await tx2.getRow('tasks', 'a'));
      assert.equal(await write(tx2, 'b', 'two'), 2);
      await tx2.commit();
      await new Promise((r) => setImmediate(r));
      assert.equal(c1.settled, true);
      assert.equal(c1.error, undefined);
      assert.ok(await storage.getRow('p', 'tasks', 'a'));
      assert.ok(await storage.getRow('p', 'tasks', 'b'));
      assert.equal(await storage.getMaxCommitSeq('p'), 2);
    } finally {
      await storage.close();
    }
  });

  test('a lease that rolls back undoes only its own work; the group still commits', async () => {
    const { storage } = await open({ groupCommit: { maxWaitMs: 10_000 } });
    try {
      const tx1 = await storage.begin('p');
      await write(tx1, 'a', 'one');
      const waiting = storage.begin('p');
      const c1 = tx1.commit();
      const tx2 = await waiting;
      assert.equal(await write(tx2, 'b', 'two'), 2);
      await tx2.rollback();
      await within(c1, 5000, 'held commit after the last lease rolled back');
      assert.ok(await storage.getRow('p', 'tasks', 'a'));
      assert.equal(await storage.getRow('p', 'tasks', 'b'), undefined);
      // The rolled-back seq is reused: the log stays dense.
      const tx3 = await storage.begin('p');
      assert.equal(await write(tx3, 'c', 'three'), 2);
      await tx3.commit();
      assert.equal(await storage.getMaxCommitSeq('p'), 2);
    } finally {
      await storage.close();
    }
  });

  test('a lone commit does not wait for company', async () => {
    const { storage } = await open({ groupCommit: { maxWaitMs: 10_000 } });
    try {
      const tx = await storage.begin('p');
      await write(tx, 'a', 'one');
      await within(tx.commit(), 1000, 'lone commit');
      assert.ok(await storage.getRow('p', 'tasks', 'a'));
    } finally {
      await storage.close();
    }
  });

  test('awaiting an earlier commit while holding a later, unused lease does not hang', async () => {
    const { storage } = await open({ groupCommit: { maxWaitMs: 2 } });
    try {
      const tx1 = await storage.begin('p');
      await write(tx1, 'a', 'one');
      const waiting = storage.begin('p');
      await within(tx1.commit(), 5000, 'commit awaited before using the next lease');
      assert.ok(await storage.getRow('p', 'tasks', 'a'));
      const tx2 = await waiting;
      assert.equal(await write(tx2, 'b', 'two'), 2);
      await tx2.commit();
      assert.equal(await storage.getMaxCommitSeq('p'), 2);
    } finally {
      await storage.close();
    }
  });

  test('a group is bounded in size', async () => {
    const { storage } = await open({ groupCommit: { maxSize: 2, maxWaitMs: 10_000 } });
    try {
      const tx1 = await storage.begin('p');
      await write(tx1, 'a', 'one');
      const b2 = storage.begin('p');
      const b3 = storage.begin('p');
      const c1 = track(tx1.commit());
      const tx2 = await b2;
      await write(tx2, 'b', 'two');
      // The second commit fills the group: it commits with tx3 still waiting.
      await within(tx2.commit(), 5000, 'commit that fills the group');
      assert.equal(c1.settled, true);
      const tx3 = await b3;
      await write(tx3, 'c', 'three');
      await tx3.commit();
      assert.equal(await storage.getMaxCommitSeq('p'), 3);
    } finally {
      await storage.close();
    }
  });

  test('a storage-level write is not held when a transaction is next in line', async () => {
    const { storage } = await open({ groupCommit: { maxWaitMs: 10_000 } });
    try {
      const tx1 = await storage.begin('p');
      const touch = storage.touchPartition('q', 1, 'e1');
      const next = storage.begin('p');
      await tx1.commit();
      // The write committed before the transaction took the lease, so that
      // transaction can read it outside of itself without waiting for it.
      await within(touch, 5000, 'storage-level write before a transaction');
      const tx2 = await next;
      assert.equal(await within(storage.getPartitionLogEpoch('q'), 5000, 'read during tx2'), 'e1');
      await tx2.commit();
    } finally {
      await storage.close();
    }
  });

  test('16 concurrent host pushes on one partition: all applied, seqs dense, all readable', async () => {
    const { storage } = await open();
    try {
      const pushes = Array.from({ length: 16 }, (_, w) =>
        (async () => {
          const out = [];
          for (let c = 0; c < 10; c++) {
            const r = await hostPush(storage, 'p', { clientId: `c${w}`, clientCommitId: `x${c}`, ops: [{ table: 'tasks', row: taskRow(`r${w}-${c}`) }] });
            out.push(r.commitSeq);
          }
          return out;
        })(),
      );
      const seqs = (await within(Promise.all(pushes), 30_000, 'concurrent pushes')).flat().sort((x, y) => x - y);
      assert.deepEqual(seqs, Array.from({ length: 160 }, (_, i) => i + 1));
      assert.equal(await storage.getMaxCommitSeq('p'), 160);
      assert.ok(await storage.getRow('p', 'tasks', 'r15-9'));
    } finally {
      await storage.close();
    }
  });

  test('closing with a group held by a running lease: the held commit becomes durable, the open lease is rolled back', async () => {
    const { storage, path } = await open({ groupCommit: { maxWaitMs: 10_000 }, closeDrainMs: 50 });
    const tx1 = await storage.begin('p');
    await write(tx1, 'a', 'one');
    const waiting = storage.begin('p');
    const c1 = tx1.commit();
    const tx2 = await waiting;
    await write(tx2, 'b', 'two');
    let acknowledged = false;
    c1.then(() => (acknowledged = true));
    await storage.close();
    // tx1 committed before close(): acknowledged before close() resolved.
    assert.equal(acknowledged, true);
    await c1;
    // tx2 was still open when the drain ended.
    await assert.rejects(tx2.commit(), (err) => err.code === 'ERR_SYNCULAR_CLOSED');
    const again = new NativeStorage({ url: `sqlite:${path}` });
    try {
      assert.equal(await again.getMaxCommitSeq('p'), 1);
    } finally {
      await again.close();
    }
  });

  test('groupCommit: false commits each lease on its own', async () => {
    const { storage } = await open({ groupCommit: false });
    try {
      const tx1 = await storage.begin('p');
      await write(tx1, 'a', 'one');
      const waiting = storage.begin('p');
      await within(tx1.commit(), 1000, 'commit without grouping');
      assert.ok(await storage.getRow('p', 'tasks', 'a'));
      const tx2 = await waiting;
      await tx2.rollback();
    } finally {
      await storage.close();
    }
  });

  test('bad groupCommit options are coded errors', () => {
    for (const groupCommit of [1, 'yes', { maxSize: 0 }, { maxSize: 1.5 }, { maxWaitMs: -1 }, { maxWaitMs: Infinity }]) {
      assert.throws(() => new NativeStorage({ url: 'sqlite::memory:', groupCommit }), (err) => err.code === 'ERR_SYNCULAR_INVALID_ARGUMENT');
    }
  });
});


describe('WAL checkpoints off the JS thread (sqlite file)', () => {
  test('the WAL stays bounded across many commits, with checkpoints on their own thread', async () => {
    const { statSync } = await import('node:fs');
    const { storage, path } = await open({ synchronous: 'normal' });
    // The writer's own checkpoint runs at 4,000 pages (BACKSTOP_PAGES in
    // src/sqlite/checkpointer.rs) of 4 KiB. A checkpoint beside a busy
    // writer can miss its chance to restart the WAL for a while (the file
    // keeps its high-water mark), so the bound is three backstops: far
    // below what these commits write, which grows with their number.
    const bound = 3 * 4000 * 4096;
    const commits = 2000;
    try {
      let written;
      for (let k = 0; k < commits; k++) {
        await hostPush(storage, 'p', { clientId: 'c', clientCommitId: `k${k}`, ops: [{ table: 'tasks', row: taskRow(`r${k}`, { title: 'x'.repeat(200) }) }] });
        // The first 50 commits stay below the backstop: the WAL holds all
        // of them (at most), so this underestimates the rate, never over.
        if (k === 49) written = (statSync(`${path}-wal`).size / 50) * commits;
      }
      assert.ok(written > 2 * bound, `the commits wrote ~${(written / 2 ** 20).toFixed(0)} MB of WAL: too little to test the bound`);
      const wal = statSync(`${path}-wal`).size;
      assert.ok(wal < bound, `WAL is ${(wal / 2 ** 20).toFixed(1)} MB after ~${(written / 2 ** 20).toFixed(0)} MB written`);
      assert.equal(await storage.getMaxCommitSeq('p'), commits);
      // stats() reports the checkpoint thread's passes and what they left.
      const { wal: w } = await storage.stats();
      assert.ok(w.checkpoints >= 1, `checkpoints ${w.checkpoints}`);
      assert.ok(Number.isSafeInteger(w.checkpointLagFrames) && w.checkpointLagFrames >= 0, `checkpointLagFrames ${w.checkpointLagFrames}`);
      assert.ok(w.bytes > 0 && w.bytes === statSync(`${path}-wal`).size, `wal.bytes ${w.bytes}`);
    } finally {
      await storage.close();
    }
  });

  test('checkpoints follow the WAL\'s growth in pages, not the number of commits', async () => {
    const { storage } = await open({ synchronous: 'normal' });
    try {
      // 3,000 commits of one page each (the registry row): 3,000 pages of
      // WAL, so a request per 1,000 pages asks the thread 3 times, each
      // for at most 3 passes. A request per 64 commits asked 46 times.
      for (let k = 0; k < 3000; k++) await storage.touchPartition('p', 1_000_000 + k, 'epoch');
      const { wal: w } = await storage.stats();
      assert.ok(w.checkpoints >= 1 && w.checkpoints <= 9, `checkpoints ${w.checkpoints}`);
      assert.equal((await storage.listPartitionRegistry()).find((e) => e.partition === 'p')?.lastAuthenticatedAtMs, 1_002_999);
    } finally {
      await storage.close();
    }
  });
});
