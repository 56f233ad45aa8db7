// @syncular/server 0.30.7: when a COMMIT fails and the ROLLBACK after it
// fails too, the COMMIT's error is what the caller gets, with the
// rollback's error attached as a non-enumerable `rollbackError`; never the
// other way round.
//
// SQLite: a test hook of the engine (`testArmFaults`) makes SQLite refuse
// the writer connection's next COMMIT and ROLLBACK (an authorizer).
// PostgreSQL: no hook; the server ends the transaction's session, so the
// COMMIT and the ROLLBACK both fail for real.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import pg from 'pg';
import { taskRow, withStorage } from '../support/harness.mjs';
import { hostErrors } from './errors.mjs';

const require = createRequire(import.meta.url);
const native = require('../../lib/native.js');
const { translate, resolveErrorClasses, WIRE_PREFIX } = require('../../lib/errors.js');

/** `storage.begin(partition)`, and the native engine it runs on. */
async function beginCapturing(storage, partition) {
  const proto = native.NativeEngine.prototype;
  const begin = proto.begin;
  let engine;
  proto.begin = function (...args) {
    engine = this;
    return begin.apply(this, args);
  };
  try {
    const tx = await storage.begin(partition);
    return { tx, engine };
  } finally {
    proto.begin = begin;
  }
}

function assertRollbackErrorAttached(err) {
  assert.ok(err instanceof Error, `expected an Error, got ${err}`);
  assert.ok(Object.hasOwn(err, 'rollbackError'), 'rollbackError is attached');
  const d = Object.getOwnPropertyDescriptor(err, 'rollbackError');
  assert.equal(d.enumerable, false, 'non-enumerable');
  assert.ok(d.value instanceof Error);
  assert.equal(typeof d.value.code, 'string', 'the rollback error is coded too');
  assert.notEqual(d.value, err);
  assert.ok(!Object.keys(err).includes('rollbackError'));
  assert.ok(!JSON.stringify({ ...err }).includes('rollbackError'));
}

/** Ends the session of this process's one storage connection that is inside a transaction. */
async function endOpenTransactionSession(url) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query(
      `SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity
        WHERE application_name LIKE $1 AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()`,
      [`syncular-${process.pid}-%`],
    );
    assert.equal(rows.length, 1, 'one storage session is inside a transaction');
    for (let i = 0; i < 100; i++) {
      const { rows: left } = await client.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE $1 AND state LIKE 'idle in transaction%'`,
        [`syncular-${process.pid}-%`],
      );
      if (left[0].n === 0) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.fail('the session did not end');
  } finally {
    await client.end();
  }
}

export function define(engine) {
  describe('rollback failures (0.30.7)', () => {
    if (engine.dialect === 'sqlite') {
      test('a refused COMMIT and a refused ROLLBACK: the COMMIT error, with rollbackError attached', () =>
        withStorage(engine, async (storage) => {
          const { tx, engine: nat } = await beginCapturing(storage, 'p1');
          await tx.lockPartitionForPush();
          await tx.upsertRow('tasks', taskRow('t1'));
          nat.testArmFaults(true, true);
          const err = await tx.commit().then(
            () => assert.fail('the commit must fail'),
            (e) => e,
          );
          assert.equal(err.code, 'SQLITE_AUTH');
          assertRollbackErrorAttached(err);
          assert.equal(err.rollbackError.code, 'SQLITE_AUTH');
          // Nothing was committed, and the storage goes on: the next
          // transaction ends the one the ROLLBACK left open.
          assert.equal(await storage.getRow('p1', 'tasks', 't1'), undefined);
          const next = await storage.begin('p1');
          await next.upsertRow('tasks', taskRow('t2'));
          await next.commit();
          assert.ok(await storage.getRow('p1', 'tasks', 't2'));
          assert.equal(await storage.getRow('p1', 'tasks', 't1'), undefined);
        }));

      test('a refused COMMIT whose ROLLBACK succeeds carries no rollbackError', () =>
        withStorage(engine, async (storage) => {
          const { tx, engine: nat } = await beginCapturing(storage, 'p1');
          await tx.upsertRow('tasks', taskRow('t1'));
          nat.testArmFaults(true, false);
          const err = await tx.commit().then(
            () => assert.fail('the commit must fail'),
            (e) => e,
          );
          assert.equal(err.code, 'SQLITE_AUTH');
          assert.ok(!('rollbackError' in err));
          assert.equal(await storage.getRow('p1', 'tasks', 't1'), undefined);
          // As upstream's storage test has it: later transactions proceed.
          const next = await storage.begin('p1');
          await next.upsertRow('tasks', taskRow('t2'));
          await next.commit();
          assert.ok(await storage.getRow('p1', 'tasks', 't2'));
        }));
    }

    if (engine.dialect === 'postgres') {
      test('the session ends mid-transaction: the COMMIT error, with the ROLLBACK error attached', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.upsertRow('tasks', taskRow('t1'));
          await endOpenTransactionSession(engine.requireUrl());
          const err = await tx.commit().then(
            () => assert.fail('the commit must fail'),
            (e) => e,
          );
          assert.match(err.code, /^(PG_CONNECTION|57P01|08\w{3})$/, `code ${err.code}`);
          assertRollbackErrorAttached(err);
          assert.equal(err.rollbackError.code, 'PG_CONNECTION');
          assert.equal(await storage.getRow('p1', 'tasks', 't1'), undefined);
          // The dead connection is not pooled again.
          const next = await storage.begin('p1');
          await next.upsertRow('tasks', taskRow('t2'));
          await next.commit();
          assert.ok(await storage.getRow('p1', 'tasks', 't2'));
        }));
    }

    test('the wire form: the first error stays the error, translated to the host classes, the rollback error rides on it', () => {
      const wire = (o) => Object.assign(new Error(WIRE_PREFIX + JSON.stringify(o)), { code: 'GenericFailure' });
      const classes = resolveErrorClasses(hostErrors);
      const err = translate(
        wire({
          kind: 'query',
          code: 'sync.storage.prune_epoch_mismatch',
          rollbackError: { kind: 'engine', code: 'PG_CONNECTION', message: 'connection closed' },
        }),
        classes,
      );
      assert.ok(err instanceof classes.StorageQueryError);
      assert.equal(err.code, 'sync.storage.prune_epoch_mismatch');
      assertRollbackErrorAttached(err);
      assert.equal(err.rollbackError.code, 'PG_CONNECTION');
      assert.equal(err.rollbackError.message, 'connection closed');
      const plain = translate(wire({ kind: 'engine', code: 'SQLITE_FULL', message: 'database or disk is full' }), classes);
      assert.ok(!('rollbackError' in plain));
    });
  });
}
