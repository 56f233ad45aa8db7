// Error classes (contract §5): the package's own classes by default, the
// host's classes when passed through the `errors` option.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { accountRow, rejectsQueryError, taskRow, withStorage, writeCommit } from '../support/harness.mjs';
import { DecodeError, StorageConstraintError, StorageQueryError, SyncError } from '../support/package.mjs';

// Host-like classes with the host's constructor signatures.
export class HostSyncError extends Error {
  constructor(code, message, details) {
    super(message ?? code);
    this.name = 'SyncError';
    this.code = code;
    if (details !== undefined) this.details = details;
  }
}
export class HostStorageQueryError extends Error {
  constructor(code, details) {
    super(`host storage query error ${code}`);
    this.name = 'StorageQueryError';
    this.code = code;
    if (details !== undefined) this.details = details;
  }
}
export class HostStorageConstraintError extends Error {
  constructor(cause, opIndex) {
    super('host constraint error');
    this.name = 'StorageConstraintError';
    this.cause = cause;
    this.opIndex = opIndex;
  }
}
export const hostErrors = {
  SyncError: HostSyncError,
  StorageQueryError: HostStorageQueryError,
  StorageConstraintError: HostStorageConstraintError,
};

async function constraintError(storage, opIndex) {
  await writeCommit(storage, 'p1', [{ table: 'accounts', row: accountRow('a1', 'o1', 'same@x') }]);
  const tx = await storage.begin('p1');
  await tx.lockPartitionForPush();
  try {
    return await tx.upsertRow('accounts', accountRow('a2', 'o1', 'same@x'), { opIndex }).then(
      () => assert.fail('expected a constraint error'),
      (e) => e,
    );
  } finally {
    await tx.rollback();
  }
}

export function define(engine) {
  describe('error classes', () => {
    test('the package exports its error classes', () => {
      for (const Cls of [SyncError, StorageQueryError, StorageConstraintError, DecodeError]) {
        assert.equal(typeof Cls, 'function');
        assert.ok(Cls.prototype instanceof Error, `${Cls.name} extends Error`);
      }
    });

    test('default StorageQueryError carries code; StorageConstraintError carries opIndex', () =>
      withStorage(engine, async (storage) => {
        const q = await rejectsQueryError(storage.scanRows('p1', { table: 'tasks', scopeFilter: {}, afterRowId: null, limit: 1 }), 'sync.storage.scan_requires_scope');
        assert.ok(q instanceof Error);
        assert.equal(typeof q.message, 'string');
        const c = await constraintError(storage, 6);
        assert.ok(c instanceof StorageConstraintError, `got ${c?.constructor?.name}`);
        assert.ok(c instanceof Error);
        assert.equal(c.opIndex, 6);
        assert.ok(!(c instanceof StorageQueryError));
      }));

    test('DecodeError has code sync.invalid_request', () =>
      withStorage(engine, async (storage) => {
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        const e = await tx.upsertRow('tasks', { ...taskRow('r'), payload: Uint8Array.of(1, 2, 3) }).then(
          () => assert.fail('expected a DecodeError'),
          (err) => err,
        );
        await tx.rollback();
        assert.ok(e instanceof DecodeError);
        assert.ok(e instanceof Error);
        assert.equal(e.code, 'sync.invalid_request');
      }));

    test('plain errors carry a string code', () =>
      withStorage(engine, async (storage) => {
        const e = await storage.getRow('p1', 'nope', 'r').then(
          () => assert.fail('expected unknown table'),
          (err) => err,
        );
        assert.ok(e instanceof Error);
        assert.equal(typeof e.code, 'string');
      }));

    describe('with host error classes (errors option)', () => {
      const opts = { errors: hostErrors };

      test('StorageQueryError codes are thrown as the host class', () =>
        withStorage(
          engine,
          async (storage) => {
            const e = await rejectsQueryError(
              storage.scanRows('p1', { table: 'tasks', scopeFilter: {}, afterRowId: null, limit: 1 }),
              'sync.storage.scan_requires_scope',
              HostStorageQueryError,
            );
            assert.ok(!(e instanceof StorageQueryError), 'not the package class');
            await rejectsQueryError(storage.pruneCommitsThrough('p1', { logEpoch: 'x', throughSeq: 1 }), 'sync.storage.prune_epoch_mismatch', HostStorageQueryError);
            await rejectsQueryError(storage.pruneCommitsThrough('p1', { logEpoch: '', throughSeq: 1 }), 'sync.storage.invalid_prune_cursor', HostStorageQueryError);
            const tx = await storage.begin('p1');
            await rejectsQueryError(tx.scanRows({ table: 'tasks', scopeFilter: {}, afterRowId: null, limit: 1 }), 'sync.storage.scan_requires_scope', HostStorageQueryError);
            await tx.rollback();
          },
          { opts },
        ));

      test('constraint failures are thrown as the host StorageConstraintError with opIndex', () =>
        withStorage(
          engine,
          async (storage) => {
            const e = await constraintError(storage, 2);
            assert.ok(e instanceof HostStorageConstraintError, `got ${e?.constructor?.name}`);
            assert.equal(e.opIndex, 2);
            assert.ok(!(e instanceof StorageConstraintError));
          },
          { opts },
        ));

      test('plain errors stay plain', () =>
        withStorage(
          engine,
          async (storage) => {
            const e = await storage.getRow('p1', 'nope', 'r').then(
              () => assert.fail('expected unknown table'),
              (err) => err,
            );
            assert.ok(!(e instanceof HostStorageQueryError));
            assert.match(e.message, /^unknown table "nope"/);
          },
          { opts },
        ));

      if (engine.shared) {
        test('layout mismatch details are passed to the host class', async () => {
          const shared = engine.shared();
          const { schema, table, col } = await import('../support/schema.mjs');
          const v1 = schema(1, [table('items', [col('id', 'string'), col('title', 'string')])]);
          const changed = schema(1, [table('items', [col('id', 'string'), col('title', 'integer')])]);
          const first = shared.open();
          await first.ensureSchema(v1);
          await first.close();
          const second = shared.open(opts);
          try {
            const e = await rejectsQueryError(second.ensureSchema(changed), 'sync.storage.stored_layout_mismatch', HostStorageQueryError);
            assert.deepEqual({ ...e.details }, { table: 'items', column: 'title' });
          } finally {
            await second.close();
          }
        });
      }
    });
  });
}
