// @syncular/server 0.30.4: the migration fence. When ensureSchema moves the
// database to a new schema version, the same transaction raises the writer
// fence of every partition in sync_partitions (every partition with a
// commit counter, as upstream's 0.30.4 notes say) to that version
// (required_writer_version = max(current, new), never lowered), so a
// process still running the old schema cannot append to them. A partition
// first seen after the migration, or known only by a registry entry or a
// client record, has no fence.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { withStorage } from '../support/harness.mjs';
import { fixtureSchema } from '../support/schema.mjs';
import { appendError, assertFenceRejection, taskCommit } from './checkpoints.mjs';

/** The fence of `partition` as writerFenceAllows reveals it: the lowest version admitted (0: none). */
async function fenceOf(storage, partition) {
  for (let v = 0; v <= 10; v++) {
    if (await storage.writerFenceAllows(partition, v)) return v;
  }
  return Infinity;
}

/** Partitions known through a commit (fenced by a bump), a registry entry and a client record (not fenced). */
async function knownPartitions(storage) {
  await taskCommit(storage, 'committed', 't1');
  await storage.touchPartition('registered', 1000, 'epoch-1');
  await storage.putClientRecord('client-only', {
    clientId: 'c1',
    actorId: 'a1',
    cursor: 0,
    updatedAtMs: 1000,
    subscriptions: [],
  });
}

export function define(engine) {
  describe('migration fence (0.30.4)', () => {
    test('a schema bump fences every existing partition at the new version', () =>
      withStorage(engine, async (storage) => {
        await knownPartitions(storage);
        for (const p of ['committed', 'registered', 'client-only']) {
          assert.equal(await fenceOf(storage, p), 0, `${p}: no fence before the bump`);
        }
        await storage.ensureSchema(fixtureSchema(2));
        assert.equal(await fenceOf(storage, 'committed'), 2, 'committed: fenced at the new version');
        for (const p of ['registered', 'client-only']) {
          assert.equal(await fenceOf(storage, p), 0, `${p}: no commit counter, no fence (as upstream)`);
        }
        // This storage now writes as version 2: the fence admits it.
        assert.equal(await appendError(storage, 'committed'), undefined);
        assert.equal(await taskCommit(storage, 'committed', 't2'), 2);
      }));

    test('a partition first seen after the bump has no fence', () =>
      withStorage(engine, async (storage) => {
        await knownPartitions(storage);
        await storage.ensureSchema(fixtureSchema(2));
        await taskCommit(storage, 'later', 't1');
        await storage.touchPartition('later-registered', 1000, 'epoch-1');
        assert.equal(await fenceOf(storage, 'later'), 0);
        assert.equal(await fenceOf(storage, 'later-registered'), 0);
        assert.equal(await fenceOf(storage, 'never-seen'), 0);
      }));

    test('a higher fence is never lowered, and an unchanged version raises nothing', () =>
      withStorage(engine, async (storage) => {
        await knownPartitions(storage);
        // A checkpoint declared for version 5 raises the fence of `registered` to 5.
        await storage.declareCheckpoint('registered', 'cp', 5, 1000);
        await storage.ensureSchema(fixtureSchema(2));
        assert.equal(await fenceOf(storage, 'registered'), 5, 'max(5, 2)');
        assert.equal(await fenceOf(storage, 'committed'), 2);
        await storage.ensureSchema(fixtureSchema(3));
        assert.equal(await fenceOf(storage, 'registered'), 5, 'max(5, 3)');
        assert.equal(await fenceOf(storage, 'committed'), 3, 'max(2, 3)');
        // The same version again: nothing is raised.
        await storage.touchPartition('after-3', 1000, 'epoch-1');
        await storage.ensureSchema(fixtureSchema(3));
        assert.equal(await fenceOf(storage, 'after-3'), 0);
      }));

    test('the first ensureSchema of a fresh database fences nothing', () =>
      withStorage(
        engine,
        async (storage) => {
          await storage.ensureSchema(fixtureSchema(1));
          assert.equal(await fenceOf(storage, 'p1'), 0);
          assert.equal(await appendError(storage, 'p1'), undefined);
        },
        { ensure: false },
      ));

    if (engine.shared) {
      test('a process still on the old version is refused on the fenced partitions only', async () => {
        const shared = engine.shared();
        const current = shared.open();
        const old = shared.open();
        try {
          await current.ensureSchema(fixtureSchema(1));
          await old.ensureSchema(fixtureSchema(1));
          await knownPartitions(current);
          assert.equal(await appendError(old, 'committed'), undefined, 'same version: admitted');
          await current.ensureSchema(fixtureSchema(2));
          // `old` still writes commits as version 1.
          assertFenceRejection(await appendError(old, 'committed'));
          assert.equal(await appendError(old, 'registered'), undefined, 'no commit counter: not fenced');
          assert.equal(await appendError(old, 'brand-new'), undefined, 'a new partition is not fenced');
          assert.equal(await appendError(current, 'committed'), undefined);
        } finally {
          await old.close();
          await current.close();
        }
      });

      test('the in-place marker and the fences commit together: a reopened storage sees both', async () => {
        const shared = engine.shared();
        const first = shared.open();
        try {
          await first.ensureSchema(fixtureSchema(1));
          await knownPartitions(first);
          await first.ensureSchema(fixtureSchema(2));
        } finally {
          await first.close();
        }
        const again = shared.open();
        try {
          assert.equal((await again.readServeGate('committed', 2)).storedSchemaVersion, 2);
          assert.equal(await fenceOf(again, 'committed'), 2);
        } finally {
          await again.close();
        }
      });
    }
  });
}
