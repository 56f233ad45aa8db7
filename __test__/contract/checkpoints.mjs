// RFC 0007: backfill checkpoints, the writer fence and the serve gate
// (contract S12–S19, T13, T16, T17; storage-layout §14).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  appendOnly,
  rejectsQueryError,
  taskRow,
  upsertChange,
  noteRow,
  withStorage,
  writeCommit,
} from '../support/harness.mjs';
import { fixtureSchema } from '../support/schema.mjs';
import { StorageConstraintError, StorageQueryError } from '../support/package.mjs';
import { hostErrors, HostStorageQueryError } from './errors.mjs';

/** contract.md §1.1 `serveGateRefusal`, as the host implements it. */
export function serveGateRefusal(gate, runningSchemaVersion, checkpoints) {
  if (gate.storedSchemaVersion > runningSchemaVersion) {
    return { kind: 'schema', stored: gate.storedSchemaVersion, running: runningSchemaVersion };
  }
  for (const p of gate.pending) {
    if (!(checkpoints ?? []).some((d) => d.partition === p.partition && d.name === p.name)) {
      return { kind: 'checkpoint', partition: p.partition, name: p.name };
    }
  }
  return undefined;
}

const byKey = (a, b) => `${a.partition}\u0000${a.name}`.localeCompare(`${b.partition}\u0000${b.name}`);
export const sortedPending = (gate) => [...gate.pending].sort(byKey);

/** A commit touching `tasks` (row id `id`) in `partition`. */
export const taskCommit = (storage, partition, id, meta = {}) =>
  appendOnly(storage, partition, [upsertChange('tasks', taskRow(id))], meta);
/** A commit touching only `notes`. */
const noteCommit = (storage, partition, id) => appendOnly(storage, partition, [upsertChange('notes', noteRow(id, 'p1', id))]);

/** The raw error an appendCommit raises, or undefined when it succeeds (the transaction is rolled back either way). */
export async function appendError(storage, partition) {
  const tx = await storage.begin(partition);
  try {
    await tx.lockPartitionForPush();
    await tx.appendCommit({ clientId: 'c', clientCommitId: `cc-${Math.random()}`, actorId: 'a', createdAtMs: 1, changes: [] });
    return undefined;
  } catch (err) {
    return err;
  } finally {
    await tx.rollback();
  }
}

export function assertFenceRejection(err) {
  assert.ok(err instanceof Error, `expected the fence to reject, got ${err}`);
  assert.match(err.message, /sync\.storage\.writer_fence_rejected/);
  assert.ok(!(err instanceof StorageConstraintError), 'the fence error is not a StorageConstraintError');
  assert.ok(!(err instanceof StorageQueryError), 'the fence error is a raw engine error, not a StorageQueryError');
}

export function define(engine) {
  describe('RFC 0007 checkpoints', () => {
    describe('declareCheckpoint and readCheckpoints', () => {
      test('inserts a declared row, raises the fence, and is idempotent', () =>
        withStorage(engine, async (storage) => {
          assert.deepEqual(await storage.readCheckpoints('p1'), []);
          assert.equal(await storage.writerFenceAllows('p1', 0), true);
          const row = await storage.declareCheckpoint('p1', 'beta', 3, 1000);
          const expected = {
            partition: 'p1', name: 'beta', schemaVersion: 3, state: 'declared',
            watermark: 0, ownerEpoch: 0, observedRows: 0, updatedAtMs: 1000,
          };
          assert.deepStrictEqual({ ...row }, expected);
          assert.equal(await storage.writerFenceAllows('p1', 2), false);
          assert.equal(await storage.writerFenceAllows('p1', 3), true);
          assert.equal(await storage.writerFenceAllows('p2', 0), true, 'the fence is per partition');
          // Again, with another version and time: the existing row is returned unchanged.
          assert.deepStrictEqual({ ...(await storage.declareCheckpoint('p1', 'beta', 5, 2000)) }, expected);
          assert.equal(await storage.writerFenceAllows('p1', 4), false, 'redeclaring still raises the fence');
          // A lower version never lowers the fence.
          await storage.declareCheckpoint('p1', 'alpha', 1, 3000);
          assert.equal(await storage.writerFenceAllows('p1', 4), false);
          assert.equal(await storage.writerFenceAllows('p1', 5), true);
          const rows = await storage.readCheckpoints('p1');
          assert.deepEqual(rows.map((r) => r.name), ['alpha', 'beta'], 'ordered by name');
          assert.deepStrictEqual({ ...rows[1] }, expected);
          assert.deepEqual(await storage.readCheckpoints('p2'), []);
        }));

      test('an activated row is never reset by a later declaration', () =>
        withStorage(engine, async (storage) => {
          await storage.declareCheckpoint('p1', 'cp', 1, 1000);
          assert.equal(await storage.activateCheckpoint('p1', 'cp', 0, 0, [], 2000), 'activated');
          const again = await storage.declareCheckpoint('p1', 'cp', 1, 3000);
          assert.equal(again.state, 'activated');
          assert.equal(again.updatedAtMs, 2000);
        }));
    });

    describe('claimCheckpoint', () => {
      test('declared → backfilling, owner epoch rises on every claim, schemaVersion and updatedAtMs set', () =>
        withStorage(engine, async (storage) => {
          await storage.declareCheckpoint('p1', 'cp', 2, 1000);
          const first = await storage.claimCheckpoint('p1', 'cp', 2, 2000);
          assert.deepStrictEqual({ ...first }, {
            partition: 'p1', name: 'cp', schemaVersion: 2, state: 'backfilling',
            watermark: 0, ownerEpoch: 1, observedRows: 0, updatedAtMs: 2000,
          });
          assert.equal(await storage.advanceCheckpoint('p1', 'cp', 1, 7, 70, 2500), true);
          const second = await storage.claimCheckpoint('p1', 'cp', 3, 3000);
          assert.equal(second.state, 'backfilling', 'a backfilling row stays backfilling');
          assert.equal(second.ownerEpoch, 2);
          assert.equal(second.schemaVersion, 3);
          assert.equal(second.updatedAtMs, 3000);
          assert.equal(second.watermark, 7, 'a claim keeps the progress');
          assert.equal(second.observedRows, 70);
          assert.deepStrictEqual({ ...(await storage.readCheckpoints('p1'))[0] }, { ...second });
        }));

      test('absent or activated → StorageQueryError sync.storage.checkpoint_not_declared', () =>
        withStorage(engine, async (storage) => {
          await rejectsQueryError(storage.claimCheckpoint('p1', 'nope', 1, 1000), 'sync.storage.checkpoint_not_declared');
          await storage.declareCheckpoint('p2', 'cp', 1, 1000);
          await rejectsQueryError(storage.claimCheckpoint('p1', 'cp', 1, 1000), 'sync.storage.checkpoint_not_declared');
          const claimed = await storage.claimCheckpoint('p2', 'cp', 1, 2000);
          assert.equal(await storage.activateCheckpoint('p2', 'cp', claimed.ownerEpoch, 0, [], 3000), 'activated');
          const before = await storage.readCheckpoints('p2');
          await rejectsQueryError(storage.claimCheckpoint('p2', 'cp', 1, 4000), 'sync.storage.checkpoint_not_declared');
          assert.deepEqual(await storage.readCheckpoints('p2'), before, 'a refused claim writes nothing');
        }));

      test('two concurrent claims get distinct epochs; exactly one owner survives', () =>
        withStorage(engine, async (storage) => {
          await storage.declareCheckpoint('p1', 'cp', 1, 1000);
          const [a, b] = await Promise.all([
            storage.claimCheckpoint('p1', 'cp', 1, 2000),
            storage.claimCheckpoint('p1', 'cp', 1, 2001),
          ]);
          assert.deepEqual([a.ownerEpoch, b.ownerEpoch].sort(), [1, 2]);
          const [loser, winner] = a.ownerEpoch < b.ownerEpoch ? [a, b] : [b, a];
          assert.equal(await storage.advanceCheckpoint('p1', 'cp', loser.ownerEpoch, 5, 50, 3000), false);
          assert.equal(await storage.advanceCheckpoint('p1', 'cp', winner.ownerEpoch, 4, 40, 3001), true);
          assert.equal(await storage.activateCheckpoint('p1', 'cp', loser.ownerEpoch, 5, [], 4000), 'stale');
          assert.equal((await storage.readCheckpoints('p1'))[0].state, 'backfilling');
          assert.equal(await storage.activateCheckpoint('p1', 'cp', winner.ownerEpoch, 4, [], 4001), 'activated');
          const [row] = await storage.readCheckpoints('p1');
          assert.equal(row.state, 'activated');
          assert.equal(row.ownerEpoch, winner.ownerEpoch);
          assert.equal(row.watermark, 4);
        }));

      test('claims queue with other writes in submission order', () =>
        withStorage(engine, async (storage) => {
          // Declared and claimed without awaiting in between: each call sees the one before.
          const declared = storage.declareCheckpoint('p1', 'cp', 1, 1000);
          const claims = [1, 2, 3, 4].map((i) => storage.claimCheckpoint('p1', 'cp', 1, 1000 + i));
          await declared;
          assert.deepEqual((await Promise.all(claims)).map((c) => c.ownerEpoch), [1, 2, 3, 4]);
        }));
    });

    describe('advanceCheckpoint', () => {
      test('compare-and-set on the owner epoch; a superseded owner gets false and writes nothing', () =>
        withStorage(engine, async (storage) => {
          assert.equal(await storage.advanceCheckpoint('p1', 'absent', 0, 1, 1, 1000), false);
          await storage.declareCheckpoint('p1', 'cp', 1, 1000);
          assert.equal(await storage.advanceCheckpoint('p1', 'cp', 0, 2, 20, 1500), true, 'no state filter: a declared row at epoch 0');
          await storage.claimCheckpoint('p1', 'cp', 1, 2000);
          await storage.claimCheckpoint('p1', 'cp', 1, 2100);
          assert.equal(await storage.advanceCheckpoint('p1', 'cp', 2, 9, 90, 2200), true);
          const before = await storage.readCheckpoints('p1');
          assert.equal(before[0].watermark, 9);
          assert.equal(before[0].observedRows, 90);
          assert.equal(before[0].updatedAtMs, 2200);
          assert.equal(await storage.advanceCheckpoint('p1', 'cp', 1, 100, 1000, 3000), false);
          assert.equal(await storage.advanceCheckpoint('p1', 'cp', 3, 100, 1000, 3000), false, 'a future epoch is not the owner either');
          assert.deepEqual(await storage.readCheckpoints('p1'), before, 'a stale owner writes nothing');
          assert.equal(await storage.advanceCheckpoint('p2', 'cp', 2, 100, 1000, 3000), false, 'bound to the partition');
        }));

      test('no state filter: the owner may still advance an activated row', () =>
        withStorage(engine, async (storage) => {
          await storage.declareCheckpoint('p1', 'cp', 1, 1000);
          const c = await storage.claimCheckpoint('p1', 'cp', 1, 2000);
          assert.equal(await storage.activateCheckpoint('p1', 'cp', c.ownerEpoch, 3, [], 3000), 'activated');
          assert.equal(await storage.advanceCheckpoint('p1', 'cp', c.ownerEpoch, 8, 1, 4000), true);
          const [row] = await storage.readCheckpoints('p1');
          assert.equal(row.state, 'activated');
          assert.equal(row.watermark, 8);
        }));

      test('transaction form: commits with the transaction, is discarded by rollback, bound to its partition', () =>
        withStorage(engine, async (storage) => {
          await storage.declareCheckpoint('p1', 'cp', 1, 1000);
          await storage.declareCheckpoint('p2', 'cp', 1, 1000);
          const owner = await storage.claimCheckpoint('p1', 'cp', 1, 2000);
          await storage.claimCheckpoint('p2', 'cp', 1, 2000);

          const rolled = await storage.begin('p1');
          await rolled.lockPartitionForPush();
          await rolled.upsertRow('tasks', taskRow('r1'));
          assert.equal(await rolled.advanceCheckpoint('cp', owner.ownerEpoch, 5, 50, 3000), true);
          await rolled.rollback();
          assert.equal((await storage.readCheckpoints('p1'))[0].watermark, 0, 'rolled back with the transaction');

          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.upsertRow('tasks', taskRow('r1'));
          const seq = await tx.appendCommit({ clientId: 'c', clientCommitId: 'cc1', actorId: 'a', createdAtMs: 1, changes: [upsertChange('tasks', taskRow('r1'))] });
          assert.equal(await tx.advanceCheckpoint('cp', owner.ownerEpoch - 1, 99, 99, 3500), false, 'stale owner: false, no throw');
          assert.equal(await tx.advanceCheckpoint('cp', owner.ownerEpoch, seq, 1, 4000), true);
          await tx.commit();
          const [row] = await storage.readCheckpoints('p1');
          assert.equal(row.watermark, seq);
          assert.equal(row.observedRows, 1);
          assert.equal(row.updatedAtMs, 4000);
          assert.ok((await storage.getRow('p1', 'tasks', 'r1')) !== undefined, 'the row writes committed with it');
          const [other] = await storage.readCheckpoints('p2');
          assert.equal(other.watermark, 0, 'the other partition is untouched');
          assert.equal(other.updatedAtMs, 2000);
        }));
    });

    describe('sourceCoverageSeq and hasSourceChangesAbove', () => {
      test('sourceCoverageSeq is the newest retained change to the tables, 0 when none', () =>
        withStorage(engine, async (storage) => {
          assert.equal(await storage.sourceCoverageSeq('p1', ['tasks']), 0);
          await taskCommit(storage, 'p1', 'r1'); // 1
          await noteCommit(storage, 'p1', 'n1'); // 2
          await taskCommit(storage, 'p1', 'r2'); // 3
          await noteCommit(storage, 'p1', 'n2'); // 4
          await taskCommit(storage, 'p2', 'r9'); // p2: 1
          assert.equal(await storage.sourceCoverageSeq('p1', ['tasks']), 3);
          assert.equal(await storage.sourceCoverageSeq('p1', ['notes']), 4);
          assert.equal(await storage.sourceCoverageSeq('p1', ['tasks', 'notes']), 4);
          assert.equal(await storage.sourceCoverageSeq('p1', ['accounts']), 0);
          assert.equal(await storage.sourceCoverageSeq('p1', []), 0);
          assert.equal(await storage.sourceCoverageSeq('p2', ['tasks']), 1);
          assert.equal(await storage.sourceCoverageSeq('p3', ['tasks']), 0);
        }));

      test('clean / changed / unverifiable; horizon == seq is clean; empty tables are clean', () =>
        withStorage(engine, async (storage) => {
          assert.equal(await storage.hasSourceChangesAbove('p1', ['tasks'], 0), 'clean', 'empty log');
          await taskCommit(storage, 'p1', 'r1'); // 1
          await taskCommit(storage, 'p1', 'r2'); // 2
          await noteCommit(storage, 'p1', 'n1'); // 3
          assert.equal(await storage.hasSourceChangesAbove('p1', ['tasks'], 1), 'changed');
          assert.equal(await storage.hasSourceChangesAbove('p1', ['accounts', 'tasks'], 1), 'changed');
          assert.equal(await storage.hasSourceChangesAbove('p1', ['tasks'], 2), 'clean');
          assert.equal(await storage.hasSourceChangesAbove('p1', ['notes'], 2), 'changed');
          assert.equal(await storage.hasSourceChangesAbove('p1', ['accounts'], 0), 'clean');
          assert.equal(await storage.hasSourceChangesAbove('p2', ['tasks'], 0), 'clean', 'other partitions do not count');
          await storage.touchPartition('p1', 1, 'e1');
          await storage.pruneCommitsThrough('p1', { logEpoch: 'e1', throughSeq: 2 });
          assert.equal(await storage.hasSourceChangesAbove('p1', ['tasks'], 2), 'clean', 'horizon == seq');
          assert.equal(await storage.hasSourceChangesAbove('p1', ['tasks'], 1), 'unverifiable', 'the pruned window is never clean');
          assert.equal(await storage.hasSourceChangesAbove('p1', ['accounts'], 0), 'unverifiable');
          assert.equal(await storage.hasSourceChangesAbove('p1', ['notes'], 1), 'changed', 'a retained change wins over the horizon');
          assert.equal(await storage.hasSourceChangesAbove('p1', [], 0), 'clean', 'empty tables');
        }));
    });

    describe('activateCheckpoint', () => {
      test('a declared, never-claimed row activates with ownerEpoch 0; re-activation is stale', () =>
        withStorage(engine, async (storage) => {
          await taskCommit(storage, 'p1', 'r1');
          await storage.declareCheckpoint('p1', 'cp', 1, 1000);
          assert.equal(await storage.activateCheckpoint('p1', 'cp', 0, 1, ['tasks'], 2000), 'activated');
          const [row] = await storage.readCheckpoints('p1');
          assert.deepStrictEqual({ ...row }, {
            partition: 'p1', name: 'cp', schemaVersion: 1, state: 'activated',
            watermark: 1, ownerEpoch: 0, observedRows: 0, updatedAtMs: 2000,
          });
          assert.equal(await storage.activateCheckpoint('p1', 'cp', 0, 1, ['tasks'], 3000), 'stale');
          assert.deepStrictEqual({ ...(await storage.readCheckpoints('p1'))[0] }, { ...row }, 're-activation writes nothing');
        }));

      test('a superseded owner gets stale', () =>
        withStorage(engine, async (storage) => {
          await storage.declareCheckpoint('p1', 'cp', 1, 1000);
          await storage.claimCheckpoint('p1', 'cp', 1, 2000);
          await storage.claimCheckpoint('p1', 'cp', 1, 2100);
          assert.equal(await storage.activateCheckpoint('p1', 'cp', 1, 0, [], 3000), 'stale');
          assert.equal(await storage.activateCheckpoint('p1', 'cp', 0, 0, [], 3000), 'stale');
          assert.equal((await storage.readCheckpoints('p1'))[0].state, 'backfilling');
          assert.equal(await storage.activateCheckpoint('p1', 'cp', 2, 0, [], 3000), 'activated');
        }));

      test('stale after a source commit lands above the watermark, with no write', () =>
        withStorage(engine, async (storage) => {
          await taskCommit(storage, 'p1', 'r1');
          await storage.declareCheckpoint('p1', 'cp', 1, 1000);
          const owner = await storage.claimCheckpoint('p1', 'cp', 1, 2000);
          const watermark = await storage.sourceCoverageSeq('p1', ['tasks']);
          assert.equal(watermark, 1);
          assert.equal(await storage.advanceCheckpoint('p1', 'cp', owner.ownerEpoch, watermark, 1, 2500), true);
          await taskCommit(storage, 'p1', 'r2'); // lands above the watermark
          const before = await storage.readCheckpoints('p1');
          assert.equal(await storage.activateCheckpoint('p1', 'cp', owner.ownerEpoch, watermark, ['tasks'], 3000), 'stale');
          assert.deepEqual(await storage.readCheckpoints('p1'), before);
          // A change to a table outside the sources does not matter.
          assert.equal(await storage.activateCheckpoint('p1', 'cp', owner.ownerEpoch, watermark, ['accounts'], 3000), 'activated');
        }));

      test('unverifiable after pruning passes the watermark, with no write; then activates from a covering watermark', () =>
        withStorage(engine, async (storage) => {
          await storage.touchPartition('p1', 1, 'e1');
          await taskCommit(storage, 'p1', 'r1'); // 1
          await storage.declareCheckpoint('p1', 'cp', 1, 1000);
          const owner = await storage.claimCheckpoint('p1', 'cp', 1, 2000);
          await noteCommit(storage, 'p1', 'n1'); // 2
          await noteCommit(storage, 'p1', 'n2'); // 3
          await storage.pruneCommitsThrough('p1', { logEpoch: 'e1', throughSeq: 2 });
          const before = await storage.readCheckpoints('p1');
          assert.equal(await storage.activateCheckpoint('p1', 'cp', owner.ownerEpoch, 1, ['tasks'], 3000), 'unverifiable');
          assert.deepEqual(await storage.readCheckpoints('p1'), before);
          assert.equal(await storage.activateCheckpoint('p1', 'cp', owner.ownerEpoch, 2, ['tasks'], 3000), 'activated');
        }));

      test('refuses with sync.storage.checkpoint_fence_missing when the fence or the row is missing, or the fence is below', () =>
        withStorage(engine, async (storage) => {
          await rejectsQueryError(
            storage.activateCheckpoint('p1', 'nope', 0, 0, [], 1000),
            'sync.storage.checkpoint_fence_missing',
          );
          // Fence at 1, but the claim moves the checkpoint to version 2.
          await storage.declareCheckpoint('p1', 'cp', 1, 1000);
          const owner = await storage.claimCheckpoint('p1', 'cp', 2, 2000);
          await rejectsQueryError(
            storage.activateCheckpoint('p1', 'cp', owner.ownerEpoch, 0, [], 3000),
            'sync.storage.checkpoint_fence_missing',
          );
          // The fence of another partition does not count.
          await storage.declareCheckpoint('p2', 'other', 2, 1000);
          await rejectsQueryError(
            storage.activateCheckpoint('p1', 'cp', owner.ownerEpoch, 0, [], 3000),
            'sync.storage.checkpoint_fence_missing',
          );
          assert.equal((await storage.readCheckpoints('p1'))[0].state, 'backfilling');
          await storage.declareCheckpoint('p1', 'other', 2, 1000);
          assert.equal(await storage.activateCheckpoint('p1', 'cp', owner.ownerEpoch, 0, [], 3000), 'activated');
        }));

      test('checks the fence before the sources', () =>
        withStorage(engine, async (storage) => {
          await storage.declareCheckpoint('p1', 'cp', 1, 1000);
          const owner = await storage.claimCheckpoint('p1', 'cp', 2, 2000);
          await taskCommit(storage, 'p1', 'r1');
          await rejectsQueryError(
            storage.activateCheckpoint('p1', 'cp', owner.ownerEpoch, 0, ['tasks'], 3000),
            'sync.storage.checkpoint_fence_missing',
          );
        }));
    });

    describe('writer fence', () => {
      test('rejects a writer below the fence from appendCommit with a raw error; admits a current one', () =>
        withStorage(engine, async (storage) => {
          assert.equal(await appendError(storage, 'p1'), undefined, 'no fence: behaviour as before');
          // This storage writes as version 1; a checkpoint at version 2 fences it out of p1.
          await storage.declareCheckpoint('p1', 'cp', 2, 1000);
          const maxBefore = await storage.getMaxCommitSeq('p1');
          const err = await appendError(storage, 'p1');
          assertFenceRejection(err);
          assert.equal(await storage.getMaxCommitSeq('p1'), maxBefore, 'nothing committed');
          // The whole host push fails too (the error surfaces from appendCommit).
          await assert.rejects(
            writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('r1') }]),
            (e) => /sync\.storage\.writer_fence_rejected/.test(e.message) && !(e instanceof StorageConstraintError),
          );
          assert.equal(await storage.getRow('p1', 'tasks', 'r1'), undefined, 'the push rolled back');
          assert.equal(await appendError(storage, 'p2'), undefined, 'another partition is not fenced');
          // The current writer: the same storage after the bump to version 2.
          await storage.ensureSchema(fixtureSchema(2), [{ partition: 'p1', name: 'cp', schemaVersion: 2 }]);
          assert.equal(await appendError(storage, 'p1'), undefined);
          const seq = await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('r1') }]);
          assert.equal(seq, maxBefore + 1);
        }));

      test('the fence error stays raw with the host error classes too', () =>
        withStorage(
          engine,
          async (storage) => {
            await storage.declareCheckpoint('p1', 'cp', 5, 1000);
            const err = await appendError(storage, 'p1');
            assertFenceRejection(err);
            assert.ok(!(err instanceof hostErrors.StorageConstraintError));
            assert.ok(!(err instanceof HostStorageQueryError));
          },
          { opts: { errors: hostErrors } },
        ));
    });

    describe('ensureSchema with checkpoints', () => {
      test('a bump installs every declaration (declared row + fence) with the marker', () =>
        withStorage(engine, async (storage) => {
          const decls = [
            { partition: 'p1', name: 'a', schemaVersion: 2 },
            { partition: 'p2', name: 'b', schemaVersion: 2 },
          ];
          const before = Date.now();
          await storage.ensureSchema(fixtureSchema(2), decls);
          const after = Date.now();
          for (const d of decls) {
            const rows = await storage.readCheckpoints(d.partition);
            assert.equal(rows.length, 1);
            const { updatedAtMs, ...rest } = rows[0];
            assert.deepStrictEqual(rest, { ...d, state: 'declared', watermark: 0, ownerEpoch: 0, observedRows: 0 });
            assert.ok(updatedAtMs >= before && updatedAtMs <= after, 'timestamped with the wall clock');
            assert.equal(await storage.writerFenceAllows(d.partition, 1), false);
            assert.equal(await storage.writerFenceAllows(d.partition, 2), true);
          }
          const gate = await storage.readServeGate('p1', 2);
          assert.equal(gate.storedSchemaVersion, 2);
          assert.deepEqual(sortedPending(gate), [{ partition: 'p1', name: 'a' }, { partition: 'p2', name: 'b' }]);
          assert.equal(serveGateRefusal(gate, 2, decls), undefined);
          assert.deepEqual(serveGateRefusal(gate, 2, undefined), { kind: 'checkpoint', partition: 'p1', name: 'a' });
        }));

      test('a fresh database: the first ensureSchema installs declarations too', () =>
        withStorage(
          engine,
          async (storage) => {
            await storage.ensureSchema(fixtureSchema(1), [{ partition: 'p1', name: 'a', schemaVersion: 1 }]);
            assert.equal((await storage.readCheckpoints('p1'))[0].state, 'declared');
            assert.equal(await storage.writerFenceAllows('p1', 0), false);
            // This storage writes as version 1: the fence admits it.
            assert.equal(await appendError(storage, 'p1'), undefined);
          },
          { ensure: false },
        ));

      test('refuses a caller that does not declare a stored incomplete checkpoint at the running version', () =>
        withStorage(
          engine,
          async (storage) => {
            await storage.declareCheckpoint('p1', 'cp', 2, 1000);
            await storage.declareCheckpoint('p1', 'old', 1, 1000); // another version: not checked
            const err = await rejectsQueryError(storage.ensureSchema(fixtureSchema(2)), 'sync.storage.checkpoint_incomplete');
            assert.ok(err instanceof StorageQueryError);
            await rejectsQueryError(storage.ensureSchema(fixtureSchema(2), []), 'sync.storage.checkpoint_incomplete');
            await rejectsQueryError(
              storage.ensureSchema(fixtureSchema(2), [{ partition: 'p2', name: 'cp', schemaVersion: 2 }]),
              'sync.storage.checkpoint_incomplete',
              StorageQueryError,
            );
            const gate = await storage.readServeGate('p1', 2);
            assert.equal(gate.storedSchemaVersion, 0, 'a refused ensureSchema bumps nothing');
            // The declaration's schemaVersion is not compared; partition and name are.
            await storage.ensureSchema(fixtureSchema(2), [{ partition: 'p1', name: 'cp', schemaVersion: 7 }]);
            assert.equal((await storage.readServeGate('p1', 2)).storedSchemaVersion, 2);
          },
          { ensure: false },
        ));

      test('the refusal is the host StorageQueryError (code duck-typed) when host classes are passed', () =>
        withStorage(
          engine,
          async (storage) => {
            await storage.declareCheckpoint('p9', 'cp', 1, 1000);
            const err = await storage.ensureSchema(fixtureSchema(1)).then(
              () => assert.fail('expected a refusal'),
              (e) => e,
            );
            assert.ok(err instanceof HostStorageQueryError, `got ${err?.constructor?.name}`);
            assert.equal(err.code, 'sync.storage.checkpoint_incomplete');
          },
          { ensure: false, opts: { errors: hostErrors } },
        ));

      test('after activation an undeclaring caller is admitted', () =>
        withStorage(
          engine,
          async (storage) => {
            await storage.declareCheckpoint('p1', 'cp', 1, 1000);
            await rejectsQueryError(storage.ensureSchema(fixtureSchema(1)), 'sync.storage.checkpoint_incomplete');
            assert.equal(await storage.activateCheckpoint('p1', 'cp', 0, 0, [], 2000), 'activated');
            await storage.ensureSchema(fixtureSchema(1));
            assert.equal((await storage.readServeGate('p1', 1)).storedSchemaVersion, 1);
          },
          { ensure: false },
        ));
    });

    describe('readServeGate', () => {
      test('lists incomplete checkpoints at the running version across partitions, on storage and transaction', () =>
        withStorage(engine, async (storage) => {
          await storage.touchPartition('p1', 1, 'e1');
          await storage.declareCheckpoint('p1', 'a', 1, 1000);
          await storage.declareCheckpoint('p2', 'b', 1, 1000);
          await storage.declareCheckpoint('p3', 'c', 2, 1000); // another version
          const gate = await storage.readServeGate('p1', 1);
          assert.equal(gate.storedSchemaVersion, 1);
          assert.equal(gate.logEpoch, 'e1');
          assert.deepEqual(sortedPending(gate), [{ partition: 'p1', name: 'a' }, { partition: 'p2', name: 'b' }]);
          const other = await storage.readServeGate('p9', 1);
          assert.ok('logEpoch' in other);
          assert.strictEqual(other.logEpoch, undefined, 'absent epoch is undefined, never null');
          assert.deepEqual(sortedPending(other), sortedPending(gate), 'pending covers every partition');
          assert.deepEqual(sortedPending(await storage.readServeGate('p1', 2)), [{ partition: 'p3', name: 'c' }]);
          // A process declaring only p1/a is refused because of p2/b.
          assert.deepEqual(serveGateRefusal(gate, 1, [{ partition: 'p1', name: 'a', schemaVersion: 1 }]), {
            kind: 'checkpoint', partition: 'p2', name: 'b',
          });

          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          const txGate = await tx.readServeGate(1);
          assert.equal(txGate.storedSchemaVersion, 1);
          assert.equal(txGate.logEpoch, 'e1');
          assert.deepEqual(sortedPending(txGate), sortedPending(gate));
          await tx.rollback();
        }));

      test('is never memoized: every read sees the latest claims, activations and bumps', () =>
        withStorage(engine, async (storage) => {
          await storage.declareCheckpoint('p1', 'a', 1, 1000);
          await storage.declareCheckpoint('p2', 'b', 1, 1000);
          assert.equal((await storage.readServeGate('p1', 1)).pending.length, 2);
          await storage.claimCheckpoint('p2', 'b', 1, 1500);
          assert.equal((await storage.readServeGate('p1', 1)).pending.length, 2, 'backfilling is still pending');
          assert.equal(await storage.activateCheckpoint('p1', 'a', 0, 0, [], 2000), 'activated');
          assert.deepEqual((await storage.readServeGate('p1', 1)).pending, [{ partition: 'p2', name: 'b' }]);
          const tx = await storage.begin('p2');
          await tx.lockPartitionForPush();
          assert.deepEqual((await tx.readServeGate(1)).pending, [{ partition: 'p2', name: 'b' }]);
          await tx.rollback();
          assert.equal(await storage.activateCheckpoint('p2', 'b', 1, 0, [], 2000), 'activated');
          assert.deepEqual((await storage.readServeGate('p1', 1)).pending, []);
          const tx2 = await storage.begin('p2');
          await tx2.lockPartitionForPush();
          assert.deepEqual((await tx2.readServeGate(1)).pending, []);
          await tx2.rollback();
          await storage.touchPartition('p1', 1, 'e1');
          assert.equal((await storage.readServeGate('p1', 1)).logEpoch, 'e1');
          await storage.rotatePartitionLogEpoch('p1', 'e2', 2);
          assert.equal((await storage.readServeGate('p1', 1)).logEpoch, 'e2');
          await storage.ensureSchema(fixtureSchema(3));
          const bumped = await storage.readServeGate('p1', 1);
          assert.equal(bumped.storedSchemaVersion, 3);
          assert.deepEqual(serveGateRefusal(bumped, 1, undefined), { kind: 'schema', stored: 3, running: 1 });
        }));
    });
  });
}
