// Sequence counters, horizon and pruning (contract S7–S11, storage-layout §9).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  appendOnly,
  assertRow,
  deleteChange,
  rejectsQueryError,
  taskRow,
  upsertChange,
  withStorage,
  writeCommit,
} from '../support/harness.mjs';

const FILTER = { project_id: ['p1'] };
const scopes = { project_id: 'p1', owner_id: 'u1' };

async function windowSeqs(storage, partition = 'p1') {
  const w = await storage.readCommitWindow(partition, { table: 'tasks', scopeFilter: FILTER, afterSeq: 0, throughSeq: 1_000_000, limitChanges: 1000 });
  return w.map((c) => c.commitSeq);
}

/** Five commits: r1..r5 upserted, commit 3 also deletes "d3" (tombstone at 3). */
async function fiveCommits(storage, partition = 'p1') {
  for (let i = 1; i <= 5; i++) {
    const changes = [upsertChange('tasks', taskRow(`r${i}`))];
    if (i === 3) changes.push(deleteChange('tasks', 'd3', scopes));
    await writeCommit(storage, partition, [{ table: 'tasks', row: taskRow(`r${i}`) }], {
      changes,
      createdAtMs: i * 1000,
      clientCommitId: `cc${i}`,
    });
  }
  const tx = await storage.begin(partition);
  await tx.lockPartitionForPush();
  await tx.putPushResult('c1', 'cc1', { status: 'applied', commitSeq: 1, results: [] });
  await tx.commit();
}

async function tombstone(storage, partition, rowId) {
  const tx = await storage.begin(partition);
  try {
    return await tx.getTombstoneSeq('tasks', rowId);
  } finally {
    await tx.rollback();
  }
}

export function define(engine) {
  describe('horizon and pruning', () => {
    test('getMaxCommitSeq and getHorizonSeq are 0 for an unknown partition', () =>
      withStorage(engine, async (storage) => {
        assert.strictEqual(await storage.getMaxCommitSeq('nowhere'), 0);
        assert.strictEqual(await storage.getHorizonSeq('nowhere'), 0);
      }));

    test('setHorizonSeq never lowers the horizon and deletes nothing', () =>
      withStorage(engine, async (storage) => {
        await fiveCommits(storage);
        await storage.setHorizonSeq('p1', 3);
        assert.equal(await storage.getHorizonSeq('p1'), 3);
        await storage.setHorizonSeq('p1', 2);
        assert.equal(await storage.getHorizonSeq('p1'), 3);
        await storage.setHorizonSeq('p1', 4);
        assert.equal(await storage.getHorizonSeq('p1'), 4);
        assert.equal(await storage.getHorizonSeq('p2'), 0);
        assert.deepEqual(await windowSeqs(storage), [1, 2, 3, 4, 5]);
        await storage.setHorizonSeq('fresh', 7);
        assert.equal(await storage.getHorizonSeq('fresh'), 7);
        assert.equal(await storage.getMaxCommitSeq('fresh'), 0);
      }));

    test('legacy pruneCommitsThrough(partition, seq) returns a count and raises the horizon', () =>
      withStorage(engine, async (storage) => {
        await fiveCommits(storage);
        const removed = await storage.pruneCommitsThrough('p1', 3);
        assert.strictEqual(removed, 3);
        assert.equal(await storage.getHorizonSeq('p1'), 3);
        assert.deepEqual(await windowSeqs(storage), [4, 5]);
        assert.equal(await tombstone(storage, 'p1', 'd3'), undefined, 'tombstones at or below the seq are pruned');
        assert.strictEqual(await storage.pruneCommitsThrough('p1', 3), 0);
        assert.strictEqual(await storage.pruneCommitsThrough('p1', 1), 0);
        assert.equal(await storage.getHorizonSeq('p1'), 3, 'a lower legacy prune does not lower the horizon');
        assert.equal(await storage.getMaxCommitSeq('p1'), 5);
        // rows and push results survive
        assertRow(await storage.getRow('p1', 'tasks', 'r1'), taskRow('r1'));
        assert.equal((await storage.getPushResult('p1', 'c1', 'cc1')).commitSeq, 1);
        // new commits continue the sequence
        assert.equal(await appendOnly(storage, 'p1', []), 6);
      }));

    test('pruneCommitsThrough({ logEpoch, throughSeq }) checks the epoch and reports the horizons', () =>
      withStorage(engine, async (storage) => {
        await storage.touchPartition('p1', 1, 'epoch-1');
        await fiveCommits(storage);
        assert.equal(await tombstone(storage, 'p1', 'd3'), 3);
        assert.deepEqual(await storage.pruneCommitsThrough('p1', { logEpoch: 'epoch-1', throughSeq: 2 }), {
          previousHorizonSeq: 0,
          horizonSeq: 2,
          removedCommits: 2,
        });
        assert.deepEqual(await windowSeqs(storage), [3, 4, 5]);
        assert.equal(await tombstone(storage, 'p1', 'd3'), 3, 'tombstone above the horizon is kept');
        assert.deepEqual(await storage.pruneCommitsThrough('p1', { logEpoch: 'epoch-1', throughSeq: 3 }), {
          previousHorizonSeq: 2,
          horizonSeq: 3,
          removedCommits: 1,
        });
        assert.equal(await tombstone(storage, 'p1', 'd3'), undefined);
        assert.deepEqual(await storage.pruneCommitsThrough('p1', { logEpoch: 'epoch-1', throughSeq: 1 }), {
          previousHorizonSeq: 3,
          horizonSeq: 3,
          removedCommits: 0,
        });
        assert.equal(await storage.getHorizonSeq('p1'), 3);
        assert.equal(await storage.getMaxCommitSeq('p1'), 5);
        assertRow(await storage.getRow('p1', 'tasks', 'r2'), taskRow('r2'));
        assert.ok(await storage.getPushResult('p1', 'c1', 'cc1'));
      }));

    test('a prune below an already raised horizon still cleans up to the horizon', () =>
      withStorage(engine, async (storage) => {
        await storage.touchPartition('p1', 1, 'epoch-1');
        await fiveCommits(storage);
        await storage.setHorizonSeq('p1', 4);
        assert.deepEqual(await windowSeqs(storage), [1, 2, 3, 4, 5]);
        assert.deepEqual(await storage.pruneCommitsThrough('p1', { logEpoch: 'epoch-1', throughSeq: 1 }), {
          previousHorizonSeq: 4,
          horizonSeq: 4,
          removedCommits: 4,
        });
        assert.deepEqual(await windowSeqs(storage), [5]);
        assert.equal(await tombstone(storage, 'p1', 'd3'), undefined);
      }));

    test('epoch mismatch or an unregistered partition → prune_epoch_mismatch, nothing deleted', () =>
      withStorage(engine, async (storage) => {
        await fiveCommits(storage);
        await fiveCommits(storage, 'p2');
        await rejectsQueryError(storage.pruneCommitsThrough('p1', { logEpoch: 'epoch-1', throughSeq: 3 }), 'sync.storage.prune_epoch_mismatch');
        await storage.touchPartition('p1', 1, 'epoch-1');
        await rejectsQueryError(storage.pruneCommitsThrough('p1', { logEpoch: 'epoch-2', throughSeq: 3 }), 'sync.storage.prune_epoch_mismatch');
        await storage.touchPartition('p2', 1, 'epoch-2');
        await rejectsQueryError(storage.pruneCommitsThrough('p1', { logEpoch: 'epoch-2', throughSeq: 3 }), 'sync.storage.prune_epoch_mismatch');
        assert.equal(await storage.getHorizonSeq('p1'), 0);
        assert.deepEqual(await windowSeqs(storage), [1, 2, 3, 4, 5]);
        assert.equal(await tombstone(storage, 'p1', 'd3'), 3);
        // after rotation the old epoch no longer prunes, the new one does
        await storage.rotatePartitionLogEpoch('p1', 'epoch-3', 2);
        await rejectsQueryError(storage.pruneCommitsThrough('p1', { logEpoch: 'epoch-1', throughSeq: 3 }), 'sync.storage.prune_epoch_mismatch');
        assert.equal((await storage.pruneCommitsThrough('p1', { logEpoch: 'epoch-3', throughSeq: 3 })).removedCommits, 3);
        assert.deepEqual(await windowSeqs(storage, 'p2'), [1, 2, 3, 4, 5], 'other partition untouched');
      }));

    test('invalid prune cursors → invalid_prune_cursor before anything else', () =>
      withStorage(engine, async (storage) => {
        await storage.touchPartition('p1', 1, 'epoch-1');
        await fiveCommits(storage);
        const bad = [
          { logEpoch: 'epoch-1', throughSeq: -1 },
          { logEpoch: 'epoch-1', throughSeq: 1.5 },
          { logEpoch: 'epoch-1', throughSeq: Number.NaN },
          { logEpoch: 'epoch-1', throughSeq: Number.POSITIVE_INFINITY },
          { logEpoch: 'epoch-1', throughSeq: Number.MAX_SAFE_INTEGER + 1 },
          { logEpoch: 'epoch-1', throughSeq: '3' },
          { logEpoch: 'epoch-1' },
          { logEpoch: '', throughSeq: 3 },
          { logEpoch: 7, throughSeq: 3 },
          { throughSeq: 3 },
          // unregistered partition with an invalid cursor: validation comes first
        ];
        for (const query of bad) {
          await rejectsQueryError(storage.pruneCommitsThrough('p1', query), 'sync.storage.invalid_prune_cursor');
        }
        await rejectsQueryError(storage.pruneCommitsThrough('unregistered', { logEpoch: '', throughSeq: 1 }), 'sync.storage.invalid_prune_cursor');
        assert.equal(await storage.getHorizonSeq('p1'), 0);
        assert.deepEqual(await windowSeqs(storage), [1, 2, 3, 4, 5]);
        // still works afterwards
        assert.equal((await storage.pruneCommitsThrough('p1', { logEpoch: 'epoch-1', throughSeq: 0 })).removedCommits, 0);
      }));

    test('legacy prune and setHorizonSeq reject invalid sequence numbers', () =>
      withStorage(engine, async (storage) => {
        await fiveCommits(storage);
        for (const seq of [Number.NaN, -1, 1.5, Number.POSITIVE_INFINITY]) {
          await assert.rejects(storage.pruneCommitsThrough('p1', seq), Error, `prune ${seq}`);
          await assert.rejects(storage.setHorizonSeq('p1', seq), Error, `setHorizonSeq ${seq}`);
        }
        assert.equal(await storage.getHorizonSeq('p1'), 0);
        assert.deepEqual(await windowSeqs(storage), [1, 2, 3, 4, 5]);
      }));

    test('getCommitSeqBefore is strict and 0 when none', () =>
      withStorage(engine, async (storage) => {
        assert.strictEqual(await storage.getCommitSeqBefore('p1', 10_000), 0);
        await fiveCommits(storage); // createdAtMs 1000..5000
        assert.strictEqual(await storage.getCommitSeqBefore('p1', 1000), 0);
        assert.strictEqual(await storage.getCommitSeqBefore('p1', 1001), 1);
        assert.strictEqual(await storage.getCommitSeqBefore('p1', 3000), 2);
        assert.strictEqual(await storage.getCommitSeqBefore('p1', 3001), 3);
        assert.strictEqual(await storage.getCommitSeqBefore('p1', 1e15), 5);
        assert.strictEqual(await storage.getCommitSeqBefore('p2', 1e15), 0);
        await storage.pruneCommitsThrough('p1', 5);
        assert.strictEqual(await storage.getCommitSeqBefore('p1', 1e15), 0);
      }));
  });
}
