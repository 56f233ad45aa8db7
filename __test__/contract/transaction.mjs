// StorageTransaction members (contract §3, storage-layout §8, §10, §11, §17).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { encodeColumnVersions } from '../support/codec.mjs';
import {
  accountRow,
  assertBytes,
  assertRow,
  assertSame,
  deleteChange,
  rejectsPlain,
  rejectsQueryError,
  taskRow,
  upsertChange,
  withStorage,
  within,
  writeCommit,
} from '../support/harness.mjs';
import { StorageConstraintError } from '../support/package.mjs';

const FINISHED = /transaction already finished/;
const P1 = { project_id: ['p1'] };

function commitMeta(changes, extra = {}) {
  return { clientId: 'c1', clientCommitId: extra.clientCommitId ?? `cc-${Math.random()}`, actorId: 'actor-1', createdAtMs: 1000, changes, ...extra };
}

function conflictResult() {
  return {
    status: 'applied',
    commitSeq: 7,
    recordedAtMs: 1_700_000_000_123,
    cacheIdentity: 'cache-1',
    results: [
      { opIndex: 0, status: 'applied' },
      {
        opIndex: 1,
        status: 'conflict',
        code: 'sync.conflict',
        message: 'row changed',
        serverVersion: 4,
        serverRow: Uint8Array.of(0, 1, 2, 0xfe, 0xff),
        conflictColumns: Uint8Array.of(3, 9),
      },
      { opIndex: 2, status: 'error', code: 'sync.forbidden', message: 'nope', retryable: true, details: { column: 'title', limit: 3, nested: { ok: true } } },
      { opIndex: 3, status: 'error', code: 'sync.invalid_request', message: 'bad', retryable: false },
    ],
  };
}

function rejectedResult(identity = 'rej-1') {
  return {
    status: 'rejected',
    recordedAtMs: 5,
    cacheIdentity: identity,
    results: [{ opIndex: 0, status: 'error', code: 'sync.constraint_violation', message: 'constraint violated', retryable: false }],
  };
}

export function define(engine) {
  describe('transaction', () => {
    describe('getRow / upsertRow / deleteRow', () => {
      test('getRow sees staged upserts, updates and deletes; rollback discards them', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'p1', [
            { table: 'tasks', row: taskRow('keep') },
            { table: 'tasks', row: taskRow('gone') },
          ]);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          assert.equal(await tx.getRow('tasks', 'new'), undefined);
          await tx.upsertRow('tasks', taskRow('new', { title: 'n' }), { opIndex: 0 });
          assertRow(await tx.getRow('tasks', 'new'), taskRow('new', { title: 'n' }));
          await tx.upsertRow('tasks', taskRow('keep', { title: 'changed' }, { version: 2 }), { opIndex: 1 });
          assertRow(await tx.getRow('tasks', 'keep'), taskRow('keep', { title: 'changed' }, { version: 2 }));
          await tx.deleteRow('tasks', 'gone');
          assert.equal(await tx.getRow('tasks', 'gone'), undefined);
          await tx.rollback();
          assert.equal(await storage.getRow('p1', 'tasks', 'new'), undefined);
          assertRow(await storage.getRow('p1', 'tasks', 'keep'), taskRow('keep'));
          assertRow(await storage.getRow('p1', 'tasks', 'gone'), taskRow('gone'));
        }));

      test('committed writes are visible to storage reads', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.upsertRow('tasks', taskRow('a', { count: -7, score: 0.125, meta: '{"k": [1, 2]}', data: Uint8Array.of(1, 2, 3), done: true }), { opIndex: 0 });
          await tx.commit();
          assertRow(
            await storage.getRow('p1', 'tasks', 'a'),
            taskRow('a', { count: -7, score: 0.125, meta: '{"k": [1, 2]}', data: Uint8Array.of(1, 2, 3), done: true }),
          );
        }));

      test('rows are partition-local', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('r1', { title: 'in p1' }) }]);
          await writeCommit(storage, 'p2', [{ table: 'tasks', row: taskRow('r1', { title: 'in p2' }) }]);
          assertRow(await storage.getRow('p1', 'tasks', 'r1'), taskRow('r1', { title: 'in p1' }));
          assertRow(await storage.getRow('p2', 'tasks', 'r1'), taskRow('r1', { title: 'in p2' }));
          assert.equal(await storage.getRow('p3', 'tasks', 'r1'), undefined);
          const tx = await storage.begin('p2');
          await tx.lockPartitionForPush();
          await tx.deleteRow('tasks', 'r1');
          await tx.commit();
          assert.ok(await storage.getRow('p1', 'tasks', 'r1'));
          assert.equal(await storage.getRow('p2', 'tasks', 'r1'), undefined);
        }));

      test('columnVersions round-trips and is omitted when absent', () =>
        withStorage(engine, async (storage) => {
          const cv = encodeColumnVersions([
            [2, 3],
            [200, 1000],
          ]);
          await writeCommit(storage, 'p1', [
            { table: 'tasks', row: taskRow('with', {}, { version: 1000, columnVersions: cv }) },
            { table: 'tasks', row: taskRow('without', {}, { version: 2 }) },
          ]);
          const withCv = await storage.getRow('p1', 'tasks', 'with');
          assertBytes(withCv.columnVersions, cv);
          const without = await storage.getRow('p1', 'tasks', 'without');
          assert.equal('columnVersions' in without, false);
          // overwriting without columnVersions clears them
          await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('with', {}, { version: 1001 }) }]);
          const cleared = await storage.getRow('p1', 'tasks', 'with');
          assert.equal('columnVersions' in cleared, false);
          assert.equal(cleared.serverVersion, 1001);
        }));

      test('accepts Buffer and offset Uint8Array views as bytes; returns Uint8Array', () =>
        withStorage(engine, async (storage) => {
          const base = taskRow('b1');
          const backing = new Uint8Array(base.payload.length + 7);
          backing.set(base.payload, 5);
          const view = backing.subarray(5, 5 + base.payload.length);
          const cvBacking = Uint8Array.of(9, 9, 1, 2, 9);
          await writeCommit(storage, 'p1', [
            { table: 'tasks', row: { ...base, payload: view, columnVersions: cvBacking.subarray(2, 4) } },
            { table: 'tasks', row: { ...taskRow('b2'), payload: Buffer.from(taskRow('b2').payload) } },
          ]);
          const r1 = await storage.getRow('p1', 'tasks', 'b1');
          assertBytes(r1.payload, base.payload);
          assertBytes(r1.columnVersions, Uint8Array.of(1, 2));
          assertBytes((await storage.getRow('p1', 'tasks', 'b2')).payload, taskRow('b2').payload);
        }));

      test('large payloads (1 MiB) round-trip through rows and the commit log', () =>
        withStorage(engine, async (storage) => {
          const data = new Uint8Array(1 << 20);
          for (let i = 0; i < data.length; i++) data[i] = (i * 31 + 7) & 0xff;
          const row = taskRow('big', { data, title: 'x'.repeat(100_000) });
          await writeCommit(storage, 'p1', [{ table: 'tasks', row }]);
          assertBytes((await storage.getRow('p1', 'tasks', 'big')).payload, row.payload);
          const [commit] = await storage.readCommitWindow('p1', { table: 'tasks', scopeFilter: P1, afterSeq: 0, throughSeq: 1, limitChanges: 1 });
          assertBytes(commit.changes[0].payload, row.payload);
        }));

      test('large safe-integer versions round-trip exactly', () =>
        withStorage(engine, async (storage) => {
          const row = taskRow('big', { count: Number.MAX_SAFE_INTEGER }, { version: Number.MAX_SAFE_INTEGER });
          await writeCommit(storage, 'p1', [{ table: 'tasks', row }]);
          const read = await storage.getRow('p1', 'tasks', 'big');
          assert.equal(read.serverVersion, Number.MAX_SAFE_INTEGER);
          assert.equal(typeof read.serverVersion, 'number');
        }));

      test('deleteRow of an absent row is a no-op', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.deleteRow('tasks', 'never');
          await tx.commit();
          assert.equal(await storage.getMaxCommitSeq('p1'), 0);
        }));

      test('a row id that is long or has unusual characters round-trips', () =>
        withStorage(engine, async (storage) => {
          const ids = ['x'.repeat(500), 'with space', 'quote\'s"', 'ünïcødé-𝔘', 'a/b\\c%_'];
          await writeCommit(storage, 'p1', ids.map((id) => ({ table: 'tasks', row: taskRow(id) })));
          for (const id of ids) assertRow(await storage.getRow('p1', 'tasks', id), taskRow(id), id);
        }));
    });

    describe('appendCommit', () => {
      test('allocates dense sequence numbers from 1 per partition', () =>
        withStorage(engine, async (storage) => {
          assert.equal(await storage.getMaxCommitSeq('p1'), 0);
          const seqs = [];
          for (let i = 0; i < 5; i++) seqs.push(await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow(`r${i}`) }]));
          assert.deepEqual(seqs, [1, 2, 3, 4, 5]);
          assert.equal(await writeCommit(storage, 'p2', [{ table: 'tasks', row: taskRow('x') }]), 1);
          assert.equal(await storage.getMaxCommitSeq('p1'), 5);
          assert.equal(await storage.getMaxCommitSeq('p2'), 1);
        }));

      test('a commit without changes still takes a seq; rollback takes none', () =>
        withStorage(engine, async (storage) => {
          assert.equal(await writeCommit(storage, 'p1', []), 1);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          assert.equal(await tx.appendCommit(commitMeta([])), 2);
          await tx.rollback();
          assert.equal(await storage.getMaxCommitSeq('p1'), 1);
          assert.equal(await writeCommit(storage, 'p1', []), 2);
        }));

      test('several appends in one transaction get consecutive seqs', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          assert.equal(await tx.appendCommit(commitMeta([])), 1);
          assert.equal(await tx.appendCommit(commitMeta([])), 2);
          await tx.commit();
          assert.equal(await storage.getMaxCommitSeq('p1'), 2);
        }));

      test('stores every change in order with metadata (read back through readCommitWindow)', () =>
        withStorage(engine, async (storage) => {
          const a = taskRow('a', { title: 'A' }, { version: 3 });
          const b = taskRow('b', { project: 'p1', owner: 'u2' });
          const changes = [upsertChange('tasks', a), deleteChange('tasks', 'z', { project_id: 'p1', owner_id: 'u9' }), upsertChange('tasks', b)];
          const seq = await writeCommit(storage, 'p1', [], { changes, actorId: 'actor-7', createdAtMs: 1_700_000_000_999 });
          const window = await storage.readCommitWindow('p1', { table: 'tasks', scopeFilter: P1, afterSeq: 0, throughSeq: seq, limitChanges: 100 });
          assertSame(window, [{ commitSeq: seq, createdAtMs: 1_700_000_000_999, actorId: 'actor-7', changes }]);
          const del = window[0].changes[1];
          assert.equal('rowVersion' in del, false);
          assert.equal('payload' in del, false);
        }));

      test('accepts Buffer and offset views as change payloads', () =>
        withStorage(engine, async (storage) => {
          const a = taskRow('a');
          const b = taskRow('b');
          const backing = new Uint8Array(a.payload.length + 10);
          backing.set(a.payload, 10);
          const changes = [
            { ...upsertChange('tasks', a), payload: backing.subarray(10) },
            { ...upsertChange('tasks', b), payload: Buffer.from(b.payload) },
          ];
          await writeCommit(storage, 'p1', [], { changes });
          const [commit] = await storage.readCommitWindow('p1', { table: 'tasks', scopeFilter: P1, afterSeq: 0, throughSeq: 1, limitChanges: 10 });
          assertBytes(commit.changes[0].payload, a.payload);
          assertBytes(commit.changes[1].payload, b.payload);
        }));

      test('writes a tombstone for each delete; getTombstoneSeq/clearTombstone', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('r1') }]);
          const scopes = { project_id: 'p1', owner_id: 'u1' };
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          assert.equal(await tx.getTombstoneSeq('tasks', 'r1'), undefined);
          await tx.deleteRow('tasks', 'r1');
          // deleteRow itself writes no tombstone
          assert.equal(await tx.getTombstoneSeq('tasks', 'r1'), undefined);
          const seq = await tx.appendCommit(commitMeta([deleteChange('tasks', 'r1', scopes), deleteChange('tasks', 'r1', scopes)]));
          assert.equal(seq, 2);
          assert.equal(await tx.getTombstoneSeq('tasks', 'r1'), 2);
          await tx.commit();

          const tx2 = await storage.begin('p1');
          await tx2.lockPartitionForPush();
          assert.equal(await tx2.getTombstoneSeq('tasks', 'r1'), 2);
          assert.equal(await tx2.getTombstoneSeq('accounts', 'r1'), undefined);
          await tx2.rollback();
          const tx2b = await storage.begin('p2');
          await tx2b.lockPartitionForPush();
          assert.equal(await tx2b.getTombstoneSeq('tasks', 'r1'), undefined, 'tombstones are partition-local');
          await tx2b.rollback();

          // re-create: clear the tombstone inside the transaction
          const tx3 = await storage.begin('p1');
          await tx3.lockPartitionForPush();
          await tx3.clearTombstone('tasks', 'r1');
          assert.equal(await tx3.getTombstoneSeq('tasks', 'r1'), undefined);
          await tx3.clearTombstone('tasks', 'r1'); // no-op
          await tx3.upsertRow('tasks', taskRow('r1', {}, { version: 3 }), { opIndex: 0 });
          await tx3.appendCommit(commitMeta([upsertChange('tasks', taskRow('r1', {}, { version: 3 }))]));
          await tx3.commit();

          const tx4 = await storage.begin('p1');
          assert.equal(await tx4.getTombstoneSeq('tasks', 'r1'), undefined);
          await tx4.rollback();
        }));

      test('a later delete moves the tombstone to the newer seq; a rolled back clear keeps it', () =>
        withStorage(engine, async (storage) => {
          const scopes = { project_id: 'p1', owner_id: 'u1' };
          await appendDelete(storage, 'r1', scopes);
          await appendDelete(storage, 'r1', scopes);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          assert.equal(await tx.getTombstoneSeq('tasks', 'r1'), 2);
          await tx.clearTombstone('tasks', 'r1');
          await tx.rollback();
          const tx2 = await storage.begin('p1');
          assert.equal(await tx2.getTombstoneSeq('tasks', 'r1'), 2);
          await tx2.rollback();
        }));
    });

    describe('push results', () => {
      test('putPushResult round-trips every field including bytes and details', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.putPushResult('c1', 'cc1', conflictResult());
          const viaBuffer = conflictResult();
          viaBuffer.results[1].serverRow = Buffer.from(viaBuffer.results[1].serverRow);
          viaBuffer.results[1].conflictColumns = new Uint8Array([0, 0, 3, 9]).subarray(2);
          await tx.putPushResult('c1', 'cc-buffer', viaBuffer);
          await tx.commit();
          const read = await storage.getPushResult('p1', 'c1', 'cc1');
          assertSame(read, conflictResult());
          assertSame(await storage.getPushResult('p1', 'c1', 'cc-buffer'), conflictResult());
          assert.ok(read.results[1].serverRow instanceof Uint8Array);
          assert.ok(read.results[1].conflictColumns instanceof Uint8Array);
          assert.equal('details' in read.results[3], false);
          assert.equal(await storage.getPushResult('p1', 'c1', 'other'), undefined);
          assert.equal(await storage.getPushResult('p2', 'c1', 'cc1'), undefined);
        }));

      test('first writer wins, within and across transactions', () =>
        withStorage(engine, async (storage) => {
          const first = { status: 'applied', commitSeq: 1, recordedAtMs: 1, cacheIdentity: 'first', results: [] };
          const second = { status: 'applied', commitSeq: 2, recordedAtMs: 2, cacheIdentity: 'second', results: [{ opIndex: 0, status: 'applied' }] };
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.putPushResult('c1', 'cc1', first);
          await tx.putPushResult('c1', 'cc1', second);
          await tx.commit();
          const tx2 = await storage.begin('p1');
          await tx2.lockPartitionForPush();
          await tx2.putPushResult('c1', 'cc1', second);
          await tx2.commit();
          assertSame(await storage.getPushResult('p1', 'c1', 'cc1'), first);
        }));

      test('minimal results: optional top-level fields stay absent', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.putPushResult('c1', 'min', { status: 'rejected', results: [] });
          await tx.commit();
          const read = await storage.getPushResult('p1', 'c1', 'min');
          assert.deepEqual(Object.keys(read).sort(), ['results', 'status']);
          assert.deepEqual(read.results, []);
        }));

      // The host's order: storage.getPushResult, begin, lockPartitionForPush,
      // readServeGate, tx.getPushResult. PostgreSQL reads the last two in the
      // lock's own round trip; the answers must still be what a read at that
      // point returns.
      test('in the host\'s push order, a result another transaction stored after the first check is seen under the lock', () =>
        withStorage(engine, async (storage) => {
          assert.equal(await storage.getPushResult('p1', 'c1', 'race'), undefined);
          assert.equal(await storage.getPushResult('p1', 'c1', 'fresh'), undefined);
          const other = await storage.begin('p1');
          await other.lockPartitionForPush();
          await other.putPushResult('c1', 'race', rejectedResult('other'));
          await other.commit();
          const slow = await storage.begin('p1');
          await slow.lockPartitionForPush();
          assert.equal((await slow.readServeGate(1)).storedSchemaVersion, 1);
          assertSame(await slow.getPushResult('c1', 'race'), rejectedResult('other'));
          assert.equal(await slow.getPushResult('c1', 'fresh'), undefined);
          await slow.putPushResult('c1', 'fresh', rejectedResult('mine'));
          assertSame(await slow.getPushResult('c1', 'fresh'), rejectedResult('mine'));
          assertSame(await slow.getPushResult('c1', 'race'), rejectedResult('other'));
          await slow.commit();
          assertSame(await storage.getPushResult('p1', 'c1', 'fresh'), rejectedResult('mine'));
          // Asked again: each transaction reads it anew.
          const again = await storage.begin('p1');
          await again.lockPartitionForPush();
          assertSame(await again.getPushResult('c1', 'fresh'), rejectedResult('mine'));
          await again.rollback();
        }));

      test('in the host\'s push order, the serve gate is filtered by the running version, and a second read reads anew', () =>
        withStorage(engine, async (storage) => {
          await storage.touchPartition('p1', 1, 'e1');
          await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('r1') }]);
          await storage.declareCheckpoint('p2', 'b', 1, 1000);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          const first = await tx.readServeGate(1);
          assert.equal(first.logEpoch, 'e1');
          assert.equal(first.storedSchemaVersion, 1);
          assert.deepEqual(first.pending, [{ partition: 'p2', name: 'b' }]);
          await tx.rollback();
          const tx2 = await storage.begin('p1');
          await tx2.lockPartitionForPush();
          assert.deepEqual((await tx2.readServeGate(2)).pending, [], 'another running version');
          assert.deepEqual((await tx2.readServeGate(1)).pending, [{ partition: 'p2', name: 'b' }]);
          // SQLite's storage-level writes wait for the open transaction.
          if (engine.dialect === 'postgres') {
            assert.equal(await storage.activateCheckpoint('p2', 'b', 0, 0, [], 2000), 'activated');
            assert.deepEqual((await tx2.readServeGate(1)).pending, []);
          }
          await tx2.rollback();
        }));

      test('tx.getPushResult sees committed results and its own writes', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          assert.equal(await tx.getPushResult('c1', 'cc1'), undefined);
          await tx.putPushResult('c1', 'cc1', rejectedResult());
          assertSame(await tx.getPushResult('c1', 'cc1'), rejectedResult());
          await tx.commit();
          const tx2 = await storage.begin('p1');
          await tx2.lockPartitionForPush();
          assertSame(await tx2.getPushResult('c1', 'cc1'), rejectedResult());
          await tx2.rollback();
        }));

      test('rolled back push results are not stored', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.putPushResult('c1', 'cc1', rejectedResult());
          await tx.rollback();
          assert.equal(await storage.getPushResult('p1', 'c1', 'cc1'), undefined);
        }));
    });

    describe('commitRejectedPushResult', () => {
      test('discards staged writes, stores the rejection and finishes the transaction', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('existing') }]);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.upsertRow('tasks', taskRow('staged'), { opIndex: 0 });
          await tx.deleteRow('tasks', 'existing');
          await tx.commitRejectedPushResult('c1', 'cc1', rejectedResult());
          await tx.rollback(); // no-op after finish
          await rejectsPlain(tx.commit(), FINISHED);
          await rejectsPlain(tx.getRow('tasks', 'staged'), FINISHED);
          assert.equal(await storage.getRow('p1', 'tasks', 'staged'), undefined);
          assertRow(await storage.getRow('p1', 'tasks', 'existing'), taskRow('existing'));
          const stored = await storage.getPushResult('p1', 'c1', 'cc1');
          assertSame(stored, rejectedResult());
          assert.equal('commitSeq' in stored, false);
          assert.equal(await storage.getMaxCommitSeq('p1'), 1);
          // the queue slot / lock was released
          const next = await within(storage.begin('p1'), 5000, 'begin after rejection');
          await next.rollback();
        }));

      test('keeps the first stored result (first writer wins)', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.commitRejectedPushResult('c1', 'cc1', rejectedResult('winner'));
          const tx2 = await storage.begin('p1');
          await tx2.lockPartitionForPush();
          await tx2.commitRejectedPushResult('c1', 'cc1', rejectedResult('loser'));
          assert.equal((await storage.getPushResult('p1', 'c1', 'cc1')).cacheIdentity, 'winner');
        }));

      test('recovers from a constraint error: staged writes before it are discarded too', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'p1', [{ table: 'accounts', row: accountRow('a1', 'o1', 'taken@x') }]);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.upsertRow('accounts', accountRow('a2', 'o1', 'free@x'), { opIndex: 0 });
          const err = await tx.upsertRow('accounts', accountRow('a3', 'o1', 'taken@x'), { opIndex: 1 }).then(
            () => undefined,
            (e) => e,
          );
          assert.ok(err instanceof StorageConstraintError, `expected StorageConstraintError, got ${err}`);
          assert.equal(err.opIndex, 1);
          await tx.commitRejectedPushResult('c1', 'cc1', rejectedResult());
          await tx.rollback();
          assert.equal(await storage.getRow('p1', 'accounts', 'a2'), undefined);
          assert.equal(await storage.getRow('p1', 'accounts', 'a3'), undefined);
          assert.ok(await storage.getRow('p1', 'accounts', 'a1'));
          assert.equal((await storage.getPushResult('p1', 'c1', 'cc1')).status, 'rejected');
          // storage keeps working
          assert.equal(await writeCommit(storage, 'p1', [{ table: 'accounts', row: accountRow('a4', 'o1', 'free@x') }]), 2);
        }));

      test('requires lockPartitionForPush (the apply savepoint)', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await rejectsPlain(tx.commitRejectedPushResult('c1', 'cc1', rejectedResult()), /savepoint/);
          await tx.rollback();
          assert.equal(await storage.getPushResult('p1', 'c1', 'cc1'), undefined);
        }));

      test('the deprecated lockPartitionForCommitValidation works as the push lock', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForCommitValidation();
          await tx.upsertRow('tasks', taskRow('s'), { opIndex: 0 });
          await tx.commitRejectedPushResult('c1', 'cc1', rejectedResult());
          assert.equal(await storage.getRow('p1', 'tasks', 's'), undefined);
          assert.equal((await storage.getPushResult('p1', 'c1', 'cc1')).status, 'rejected');
        }));
    });

    describe('scanRows in a transaction', () => {
      test('sees staged upserts, deletes and scope moves', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'p1', [
            { table: 'tasks', row: taskRow('r1') },
            { table: 'tasks', row: taskRow('r2') },
            { table: 'tasks', row: taskRow('r3') },
          ]);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.upsertRow('tasks', taskRow('r0'), { opIndex: 0 });
          await tx.deleteRow('tasks', 'r2');
          await tx.upsertRow('tasks', taskRow('r3', { project: 'p2' }, { version: 2 }), { opIndex: 1 });
          const p1 = await tx.scanRows({ table: 'tasks', scopeFilter: P1, afterRowId: null, limit: 10 });
          assert.deepEqual(p1.map((r) => r.rowId), ['r0', 'r1']);
          assertRow(p1[0], taskRow('r0'));
          const p2 = await tx.scanRows({ table: 'tasks', scopeFilter: { project_id: ['p2'] }, afterRowId: null, limit: 10 });
          assert.deepEqual(p2.map((r) => r.rowId), ['r3']);
          await tx.rollback();
          const after = await storage.scanRows('p1', { table: 'tasks', scopeFilter: P1, afterRowId: null, limit: 10 });
          assert.deepEqual(after.map((r) => r.rowId), ['r1', 'r2', 'r3']);
        }));

      test('requires a scope', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          try {
            await rejectsQueryError(tx.scanRows({ table: 'tasks', scopeFilter: {}, afterRowId: null, limit: 10 }), 'sync.storage.scan_requires_scope');
          } finally {
            await tx.rollback();
          }
        }));
    });

    describe('setBlobRefs', () => {
      test('replaces, de-duplicates and clears blob references without error', () =>
        withStorage(engine, async (storage) => {
          const blob = `sha256:${'a'.repeat(64)}`;
          const other = `sha256:${'b'.repeat(64)}`;
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.upsertRow('tasks', taskRow('r1', { file: { blobId: blob, byteLength: 3 } }), { opIndex: 0 });
          assert.equal(await tx.setBlobRefs('tasks', 'r1', [blob, blob, other]), undefined);
          await tx.setBlobRefs('tasks', 'r1', [other]);
          await tx.setBlobRefs('tasks', 'r1', []);
          await tx.setBlobRefs('tasks', 'r1', [blob]);
          await tx.deleteRow('tasks', 'r1');
          await tx.commit();
          assert.equal(await storage.getRow('p1', 'tasks', 'r1'), undefined);
        }));
    });

    describe('readServeGate', () => {
      test('reports stored version, epoch (undefined when unregistered) and no pending checkpoints', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          const gate = await tx.readServeGate(1);
          assert.equal(gate.storedSchemaVersion, 1);
          assert.equal(gate.logEpoch, undefined);
          assert.deepEqual(gate.pending, []);
          await tx.rollback();
          await storage.touchPartition('p1', 10, 'epoch-A');
          const tx2 = await storage.begin('p1');
          await tx2.lockPartitionForPush();
          const gate2 = await tx2.readServeGate(1);
          assert.equal(gate2.logEpoch, 'epoch-A');
          await tx2.rollback();
          const gate3 = await storage.readServeGate('p1', 1);
          assertSame(gate3, gate2);
          assert.equal((await storage.readServeGate('p2', 1)).logEpoch, undefined);
        }));
    });

    describe('finish semantics', () => {
      test('after commit: calls reject with "transaction already finished", rollback is a no-op', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.commit();
          await tx.rollback();
          await tx.rollback();
          const calls = {
            commit: () => tx.commit(),
            getRow: () => tx.getRow('tasks', 'r1'),
            upsertRow: () => tx.upsertRow('tasks', taskRow('r1')),
            deleteRow: () => tx.deleteRow('tasks', 'r1'),
            appendCommit: () => tx.appendCommit(commitMeta([])),
            putPushResult: () => tx.putPushResult('c', 'cc', rejectedResult()),
            getPushResult: () => tx.getPushResult('c', 'cc'),
            scanRows: () => tx.scanRows({ table: 'tasks', scopeFilter: P1, afterRowId: null, limit: 1 }),
            lockPartitionForPush: () => tx.lockPartitionForPush(),
            getTombstoneSeq: () => tx.getTombstoneSeq('tasks', 'r1'),
            clearTombstone: () => tx.clearTombstone('tasks', 'r1'),
            readServeGate: () => tx.readServeGate(1),
            setBlobRefs: () => tx.setBlobRefs('tasks', 'r1', []),
            commitRejectedPushResult: () => tx.commitRejectedPushResult('c', 'cc', rejectedResult()),
          };
          for (const [name, call] of Object.entries(calls)) {
            await rejectsPlain(call(), FINISHED);
            assert.ok(name);
          }
          assert.equal(await storage.getMaxCommitSeq('p1'), 0);
          assert.equal(await storage.getPushResult('p1', 'c', 'cc'), undefined);
        }));

      test('after rollback: calls reject, rollback stays idempotent', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.rollback();
          await tx.rollback();
          await rejectsPlain(tx.commit(), FINISHED);
          await rejectsPlain(tx.upsertRow('tasks', taskRow('r1')), FINISHED);
          await rejectsPlain(tx.appendCommit(commitMeta([])), FINISHED);
        }));

      test('rollback without lockPartitionForPush, and begin/commit without any work', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.commit();
          const tx2 = await storage.begin('p1');
          await tx2.upsertRow('tasks', taskRow('r1'));
          await tx2.commit();
          assertRow(await storage.getRow('p1', 'tasks', 'r1'), taskRow('r1'));
        }));

      test('finished transactions release the queue: many sequential begin/rollback cycles', () =>
        withStorage(engine, async (storage) => {
          for (let i = 0; i < 30; i++) {
            const tx = await within(storage.begin(`p${i % 3}`), 5000, `begin #${i}`);
            await tx.lockPartitionForPush();
            if (i % 2) await tx.rollback();
            else await tx.commit();
          }
        }));
    });

    describe('prefetchRows', () => {
      test('is a hint: reads stay correct around staged writes and tombstones', () =>
        withStorage(engine, async (storage) => {
          const scopes = { project_id: 'p1', owner_id: 'u1' };
          await writeCommit(storage, 'p1', [
            { table: 'tasks', row: taskRow('a') },
            { table: 'tasks', row: taskRow('b') },
          ]);
          await appendDelete(storage, 'c', scopes);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          assert.equal(await tx.prefetchRows('tasks', ['a', 'b', 'c', 'missing']), undefined);
          await tx.prefetchRows('tasks', []);
          assertRow(await tx.getRow('tasks', 'a'), taskRow('a'));
          assert.equal(await tx.getRow('tasks', 'missing'), undefined);
          assert.equal(await tx.getTombstoneSeq('tasks', 'c'), 2);
          assert.equal(await tx.getTombstoneSeq('tasks', 'a'), undefined);
          await tx.upsertRow('tasks', taskRow('a', { title: 'new' }, { version: 2 }), { opIndex: 0 });
          assertRow(await tx.getRow('tasks', 'a'), taskRow('a', { title: 'new' }, { version: 2 }));
          await tx.deleteRow('tasks', 'b');
          assert.equal(await tx.getRow('tasks', 'b'), undefined);
          await tx.upsertRow('tasks', taskRow('missing'), { opIndex: 1 });
          assertRow(await tx.getRow('tasks', 'missing'), taskRow('missing'));
          await tx.clearTombstone('tasks', 'c');
          assert.equal(await tx.getTombstoneSeq('tasks', 'c'), undefined);
          await tx.prefetchRows('tasks', ['a', 'b', 'c']);
          assertRow(await tx.getRow('tasks', 'a'), taskRow('a', { title: 'new' }, { version: 2 }));
          assert.equal(await tx.getRow('tasks', 'b'), undefined);
          const seq = await tx.appendCommit(commitMeta([deleteChange('tasks', 'b', scopes)]));
          assert.equal(await tx.getTombstoneSeq('tasks', 'b'), seq);
          await tx.commit();
          assert.equal(await storage.getRow('p1', 'tasks', 'b'), undefined);
          assertRow(await storage.getRow('p1', 'tasks', 'missing'), taskRow('missing'));
        }));

      test('each getRow after a prefetch returns its own copy of the stored row', () =>
        withStorage(engine, async (storage) => {
          const stored = taskRow('a', {}, { columnVersions: encodeColumnVersions([[1, 2], [3, 4]]) });
          await writeCommit(storage, 'p1', [{ table: 'tasks', row: stored }]);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.prefetchRows('tasks', ['a', 'a', 7, null, 'a']);
          const first = await tx.getRow('tasks', 'a');
          assertRow(first, stored);
          first.payload.fill(0);
          first.scopes.project_id = 'changed';
          const second = await tx.getRow('tasks', 'a');
          assertRow(second, stored);
          assert.notEqual(second.payload, first.payload);
          await tx.rollback();
        }));

      test('tombstones: a prefetched tombstone is cleared for real; a row with none is left alone', () =>
        withStorage(engine, async (storage) => {
          const scopes = { project_id: 'p1', owner_id: 'u1' };
          await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('d') }]);
          const deleted = await appendDelete(storage, 'd', scopes);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.prefetchRows('tasks', ['d', 'fresh']);
          assert.equal(await tx.getRow('tasks', 'd'), undefined);
          assert.equal(await tx.getTombstoneSeq('tasks', 'd'), deleted);
          assert.equal(await tx.getTombstoneSeq('tasks', 'fresh'), undefined);
          await tx.clearTombstone('tasks', 'd');
          await tx.clearTombstone('tasks', 'fresh');
          assert.equal(await tx.getTombstoneSeq('tasks', 'd'), undefined);
          await tx.upsertRow('tasks', taskRow('d', {}, { version: 2 }), { opIndex: 0 });
          await tx.upsertRow('tasks', taskRow('fresh'), { opIndex: 1 });
          await tx.appendCommit(commitMeta([upsertChange('tasks', taskRow('d', {}, { version: 2 })), upsertChange('tasks', taskRow('fresh'))]));
          await tx.commit();
          const check = await storage.begin('p1');
          assert.equal(await check.getTombstoneSeq('tasks', 'd'), undefined);
          assertRow(await check.getRow('tasks', 'fresh'), taskRow('fresh'));
          await check.rollback();
        }));

      test('a prefetch does not outlive its transaction, and names an unknown table as an error', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('a') }]);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await assert.rejects(tx.prefetchRows('nope', ['a']), (err) => typeof err.code === 'string');
          await tx.prefetchRows('tasks', ['a']);
          await tx.commit();
          await rejectsPlain(tx.getRow('tasks', 'a'), FINISHED);
          await rejectsPlain(tx.getTombstoneSeq('tasks', 'a'), FINISHED);
          await rejectsPlain(tx.clearTombstone('tasks', 'a'), FINISHED);
        }));
    });

    test('ids of any length and script, and payload views at an offset, round-trip', () =>
      withStorage(engine, async (storage) => {
        // The native layer reads short strings into a fixed buffer and long
        // ones the slow way; multi-byte characters straddle its edge here.
        const ids = [];
        for (let n = 110; n <= 124; n++) ids.push('x'.repeat(n) + 'é😀中');
        ids.push('😀'.repeat(40), 'k'.repeat(1500), '');
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        await tx.prefetchRows('tasks', ids);
        const changes = [];
        for (const [i, id] of ids.entries()) {
          assert.equal(await tx.getRow('tasks', id), undefined);
          const row = taskRow(id);
          const padded = new Uint8Array(row.payload.length + 7);
          padded.set(row.payload, 3);
          const view = padded.subarray(3, 3 + row.payload.length);
          await tx.upsertRow('tasks', { ...row, payload: view }, { opIndex: i });
          changes.push(upsertChange('tasks', { ...row, payload: view }));
        }
        const commitId = 'é'.repeat(60) + 'z'.repeat(3);
        const seq = await tx.appendCommit(commitMeta(changes, { clientCommitId: commitId }));
        await tx.putPushResult('c1', commitId, { status: 'applied', commitSeq: seq, recordedAtMs: 1, cacheIdentity: 'i', results: [] });
        await tx.commit();
        for (const id of ids) assertRow(await storage.getRow('p1', 'tasks', id), taskRow(id), `row ${id.slice(-8)}`);
        assert.equal((await storage.getPushResult('p1', 'c1', commitId))?.commitSeq, seq);
        const window = await storage.readCommitWindow('p1', { table: 'tasks', scopeFilter: P1, afterSeq: 0, throughSeq: seq, limitChanges: 100 });
        assert.deepEqual(window.flatMap((c) => c.changes.map((ch) => ch.rowId)).sort(), [...ids].sort());
      }));
  });
}

async function appendDelete(storage, rowId, scopes) {
  const tx = await storage.begin('p1');
  await tx.lockPartitionForPush();
  await tx.deleteRow('tasks', rowId);
  const seq = await tx.appendCommit(commitMeta([deleteChange('tasks', rowId, scopes)]));
  await tx.commit();
  return seq;
}
