// Errors through a host's classes (issue 25, findings 2 and 4), without an
// upstream tree: a stand-in host module shaped as @syncular/server 0.15.48
// is (its StorageQueryError takes a code only and has messages for a few
// codes; its SyncError refuses codes outside its catalog; its
// StorageConstraintError is no export, reachable only as what its in-tree
// SQLite storage throws). __test__/host-errors.test.mjs runs the same rules
// against the real tree.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { inspect } from 'node:util';
import { describe, test } from 'node:test';
import { engines } from './support/engines.mjs';
import { accountRow, withStorage, writeCommit } from './support/harness.mjs';

const require = createRequire(import.meta.url);
const E = require('../lib/errors.js');

const wire = (o) => Object.assign(new Error(E.WIRE_PREFIX + JSON.stringify(o)), { code: 'GenericFailure' });

/** A host module as 0.15.48's is, built fresh (the class search runs once per module). */
function hostModule({ withSqliteStorage = true, beginDelayMs = 0 } = {}) {
  class HiddenConstraintError extends Error {
    name = 'StorageConstraintError';
    opIndex;
    constructor(cause, opIndex) {
      super('host: relational constraint', { cause });
      this.opIndex = opIndex;
    }
  }
  const known = { 'sync.storage.invalid_limit': 'host: bad limit' };
  class StorageQueryError extends Error {
    name = 'StorageQueryError';
    code;
    constructor(code) {
      super(known[code]);
      this.code = code;
    }
  }
  class SyncError extends Error {
    name = 'SyncError';
    code;
    constructor(code, message) {
      if (code !== 'sync.idempotency_cache_miss') throw new Error(`unknown error code ${code}`);
      super(message ?? code);
      this.code = code;
    }
  }
  // The in-tree storage's shape: a database handle, a transaction whose row
  // write wraps a SQLITE_CONSTRAINT driver error in the hidden class.
  class SqliteServerStorage {
    constructor(db) {
      this.db = db;
      db.exec('CREATE TABLE IF NOT EXISTS sync_clients (x)');
      db.query('PRAGMA table_info("sync_clients")').all();
    }
    writeRow() {
      throw new Error('a real database would write here');
    }
    async begin(partition) {
      if (beginDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, beginDelayMs));
      const storage = this;
      storage.db.exec('BEGIN IMMEDIATE');
      return {
        async upsertRow(table, row, context) {
          try {
            storage.writeRow(partition, table, row);
          } catch (error) {
            if (error?.code === 'SQLITE_CONSTRAINT') throw new HiddenConstraintError(error, context?.opIndex);
            throw error;
          }
        },
        async rollback() {
          storage.db.exec('ROLLBACK');
        },
      };
    }
  }
  const module = { SyncError, StorageQueryError, handleSyncRequest() {} };
  if (withSqliteStorage) module.SqliteServerStorage = SqliteServerStorage;
  // What the host's push recognises as a durable rejection.
  return { module, isPushRejection: (err) => err instanceof HiddenConstraintError, HiddenConstraintError };
}

function warningsDuring(fn) {
  const seen = [];
  const on = (w) => seen.push(w);
  process.on('warning', on);
  return Promise.resolve(fn()).then(
    async (v) => {
      await new Promise((resolve) => setImmediate(resolve));
      process.off('warning', on);
      return { value: v, warnings: seen };
    },
    (err) => {
      process.off('warning', on);
      throw err;
    },
  );
}

describe('refusals keep their code, message and details', () => {
  const details = { table: 'tasks', reason: 'missing_column', column: 'title' };

  test("the package's own class: the message names the code and the details", () => {
    const err = E.translate(wire({ kind: 'query', code: 'sync.storage.physical_layout_mismatch', details }), E.resolveErrorClasses());
    assert.ok(err instanceof E.StorageQueryError);
    assert.match(String(err), /^StorageQueryError: .*\[sync\.storage\.physical_layout_mismatch\] \(table=tasks, reason=missing_column, column=title\)$/);
    assert.deepEqual(err.details, details);
  });

  test("a host class with no message for the code: the error stays the host's, with the package's message, code and details", () => {
    const { module } = hostModule();
    const classes = E.resolveErrorClasses(module);
    const err = E.translate(wire({ kind: 'query', code: 'sync.storage.physical_layout_mismatch', details }), classes);
    assert.ok(err instanceof module.StorageQueryError);
    assert.equal(err.code, 'sync.storage.physical_layout_mismatch');
    assert.deepEqual(err.details, details);
    for (const text of [err.message, String(err), err.stack.split('\n')[0]]) {
      assert.match(text, /sync\.storage\.physical_layout_mismatch/);
      assert.match(text, /table=tasks, reason=missing_column, column=title/);
    }
    assert.deepEqual(JSON.parse(JSON.stringify(err)), { name: 'StorageQueryError', code: 'sync.storage.physical_layout_mismatch', details });
    assert.match(inspect(err), /StorageQueryError: physical table layout.*column=title/);
    assert.equal(Object.getOwnPropertyDescriptor(err, 'message').enumerable, false);
  });

  test("a host class with a message for the code keeps it; the details it dropped are put back", () => {
    const { module } = hostModule();
    const err = E.translate(wire({ kind: 'query', code: 'sync.storage.invalid_limit', details: { limit: '0' } }), E.resolveErrorClasses(module));
    assert.equal(err.message, 'host: bad limit');
    assert.deepEqual(err.details, { limit: '0' });
    // A newer host's class, keeping details and with a message: as it made it.
    class Newer extends Error {
      name = 'StorageQueryError';
      constructor(code, d) {
        super(`newer: ${code}`);
        this.code = code;
        this.details = d;
      }
    }
    const newer = E.translate(wire({ kind: 'query', code: 'sync.storage.x', details }), E.resolveErrorClasses({ StorageQueryError: Newer, StorageConstraintError: Error }));
    assert.equal(newer.message, 'newer: sync.storage.x');
    assert.deepEqual(newer.details, details);
  });

  test("a bad prune cursor through the host's class names its code", async () => {
    const { module } = hostModule();
    const storage = engines[0].create({ errors: module });
    try {
      const err = await Promise.resolve()
        .then(() => storage.pruneCommitsThrough('p1', { throughSeq: -1, logEpoch: 'e' }))
        .then(() => assert.fail('expected a refusal'), (e) => e);
      assert.ok(err instanceof module.StorageQueryError);
      assert.equal(err.code, 'sync.storage.invalid_prune_cursor');
      assert.match(String(err), /\[sync\.storage\.invalid_prune_cursor\]/);
    } finally {
      await storage.close();
    }
  });

  test("a host SyncError that refuses the code: the package's SyncError, with the code", () => {
    const { module } = hostModule();
    const err = E.syncError(E.resolveErrorClasses(module), 'sync.something_newer', 'what happened');
    assert.ok(err instanceof E.SyncError);
    assert.equal(err.code, 'sync.something_newer');
    assert.equal(err.message, 'what happened');
    assert.ok(E.syncError(E.resolveErrorClasses(module), 'sync.idempotency_cache_miss') instanceof module.SyncError);
  });
});

describe("the host's StorageConstraintError, found through its in-tree SQLite storage", () => {
  test('found, and constraint errors become instances of it with the opIndex and the cause', async () => {
    const { module, isPushRejection, HiddenConstraintError } = hostModule();
    assert.equal(await E.findConstraintClass(module), HiddenConstraintError);
    const classes = E.resolveErrorClasses(module);
    assert.ok(classes.ready instanceof Promise);
    await classes.ready;
    assert.equal(classes.ready, undefined);
    const err = E.translate(wire({ kind: 'constraint', opIndex: 2, message: 'UNIQUE constraint failed' }), classes);
    assert.ok(isPushRejection(err));
    assert.equal(err.opIndex, 2);
    assert.equal(err.cause.message, 'UNIQUE constraint failed');
    // A class passed in `errors` is used as it is, with no search.
    class Given extends Error {}
    const given = E.resolveErrorClasses({ ...module, StorageConstraintError: Given });
    assert.equal(given.StorageConstraintError, Given);
    assert.equal(given.ready, undefined);
  });

  test('a module it cannot be found through: a process warning, and the package class', async () => {
    const { module } = hostModule({ withSqliteStorage: false });
    const { value: classes, warnings } = await warningsDuring(async () => {
      const c = E.resolveErrorClasses(module);
      await c.ready;
      return c;
    });
    assert.equal(classes.StorageConstraintError, E.StorageConstraintError);
    assert.deepEqual(warnings.map((w) => w.code), ['SYNCULAR_NO_CONSTRAINT_CLASS']);
  });

  test('a storage whose SqliteServerStorage misbehaves is not taken for the class', async () => {
    const odd = {
      SqliteServerStorage: class {
        async begin() {
          return {
            async upsertRow() {
              throw Object.assign(new Error('x'), { name: 'StorageConstraintError' });
            },
          };
        }
      },
    };
    assert.equal(await E.findConstraintClass(odd), undefined);
    // One whose begin never settles holds no begin() back past the search's limit.
    const stuck = { SqliteServerStorage: class { begin = () => new Promise(() => {}); } };
    const started = Date.now();
    const { value: classes, warnings } = await warningsDuring(async () => {
      const c = E.resolveErrorClasses(stuck);
      await c.ready;
      return c;
    });
    assert.ok(Date.now() - started < 3000);
    assert.equal(classes.StorageConstraintError, E.StorageConstraintError);
    assert.deepEqual(warnings.map((w) => w.code), ['SYNCULAR_NO_CONSTRAINT_CLASS']);
  });

  for (const engine of engines) {
    test(`${engine.name}: a unique violation is the host's class, even when its search is still running at the first begin`, async () => {
      const { module, isPushRejection } = hostModule({ beginDelayMs: 50 });
      await withStorage(
        engine,
        async (storage) => {
          await writeCommit(storage, 'p1', [{ table: 'accounts', row: accountRow('a1', 'o1', 'same@x') }]);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          const err = await tx.upsertRow('accounts', accountRow('a2', 'o1', 'same@x'), { opIndex: 1 }).then(
            () => assert.fail('expected a constraint violation'),
            (e) => e,
          );
          await tx.rollback();
          assert.ok(isPushRejection(err), `got ${err?.constructor?.name}: ${err?.message}`);
          assert.equal(err.opIndex, 1);
        },
        { opts: { errors: module } },
      );
    });
  }
});
