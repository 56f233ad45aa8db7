// PostgreSQL: a storage-level registered query sent in two messages
// (behind a transaction pooler, or with a value that cannot be a literal;
// one message ends its transaction in its batch, see
// postgres-query-message.test.mjs)
// answers as soon as its rows are in; the ROLLBACK of its READ ONLY
// transaction runs after the answer, on a task that owns the connection
// until the rollback succeeded (then the connection is reused) or failed
// (then it is closed). The test hook `testArmFaults` arms the next such
// rollback, and sends the next query the two-message way: `(false, true)`
// makes the rollback fail, `(true, false)` holds it 2 s (a sleep in its
// place) and then fails.
// Runs whenever the contract suite's postgres engine does
// (SYNCULAR_TEST_PG_URL; required under CI=true, see support/engines.mjs).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import pg from 'pg';
import { engines } from './support/engines.mjs';
import { taskRow, within, writeCommit } from './support/harness.mjs';
import { fixtureSchema } from './support/schema.mjs';

const require = createRequire(import.meta.url);
const native = require('../lib/native.js');

const engine = engines.find((e) => e.dialect === 'postgres');
const P = 'trail-1';
const q = { sql: 'SELECT id, title FROM tasks ORDER BY id', params: [], tables: ['tasks'] };

/** `storage.queryAuthoritative(P, q)`, and the native engine it ran on. */
async function queryCapturing(storage) {
  const proto = native.NativeEngine.prototype;
  const original = proto.queryAuthoritative;
  let nat;
  proto.queryAuthoritative = function (...args) {
    nat = this;
    return original.apply(this, args);
  };
  try {
    await storage.queryAuthoritative(P, q);
    return nat;
  } finally {
    proto.queryAuthoritative = original;
  }
}

/** This process's storage sessions on the server (every storage's `application_name` starts so). */
async function sessions() {
  const client = new pg.Client({ connectionString: process.env.SYNCULAR_TEST_PG_URL });
  await client.connect();
  try {
    const { rows } = await client.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE $1 AND pid <> pg_backend_pid()`,
      [`syncular-${process.pid}-%`],
    );
    return rows[0].n;
  } finally {
    await client.end();
  }
}

async function seeded(opts) {
  const storage = engine.create({ maxConnections: 1, ...opts });
  await storage.ensureSchema(fixtureSchema());
  await writeCommit(storage, P, [{ table: 'tasks', row: taskRow('t1', { title: 'one', project: 'p1' }) }]);
  return storage;
}

describe('postgres: the rollback after a registered query’s answer', { skip: engine === undefined }, () => {
  test('the answer does not wait for the rollback, and the connection is not reused inside its transaction', async () => {
    const storage = await seeded({ queryTimeoutMs: 1000 });
    try {
      const nat = await queryCapturing(storage);
      const before = await storage.queryAuthoritative(P, q);
      nat.testArmFaults(true, false);
      const started = performance.now();
      const held = await storage.queryAuthoritative(P, q);
      const answeredMs = performance.now() - started;
      assert.deepEqual(held, before, 'the answer, while its rollback is held');
      assert.ok(answeredMs < 900, `answered in ${answeredMs.toFixed(0)} ms, before the held rollback's limit`);
      // The one connection is the held task's until its limit (1 s): the
      // write waits for it, then runs on a fresh connection.
      const seq = await within(
        writeCommit(storage, P, [{ table: 'tasks', row: taskRow('t2', { title: 'two', project: 'p1' }) }]),
        10_000,
        'the write after a held rollback',
      );
      const waitedMs = performance.now() - started;
      assert.ok(waitedMs >= 900, `the write waited for the held connection (${waitedMs.toFixed(0)} ms)`);
      // A fresh snapshot: an old transaction's would show neither.
      const after = await storage.queryAuthoritative(P, q);
      assert.equal(after.maxCommitSeq, seq);
      assert.deepEqual(
        after.rows.map((r) => r.id),
        ['t1', 't2'],
      );
    } finally {
      await storage.close();
    }
  });

  test('a failed rollback closes the connection; the next calls run on a fresh one', async () => {
    const storage = await seeded({});
    try {
      const nat = await queryCapturing(storage);
      nat.testArmFaults(false, true);
      const first = await storage.queryAuthoritative(P, q);
      assert.deepEqual(
        first.rows.map((r) => r.id),
        ['t1'],
      );
      // With one connection, a recycled aborted transaction would refuse
      // these (25P02) or show the old snapshot.
      const seq = await writeCommit(storage, P, [{ table: 'tasks', row: taskRow('t3', { title: 'three', project: 'p1' }) }]);
      for (let i = 0; i < 3; i++) {
        const r = await storage.queryAuthoritative(P, q);
        assert.equal(r.maxCommitSeq, seq);
        assert.deepEqual(
          r.rows.map((row) => row.id),
          ['t1', 't3'],
        );
      }
    } finally {
      await storage.close();
    }
  });

  test('close while a rollback runs after its answer: it is cancelled, and no session is left', async () => {
    const storage = await seeded({ queryTimeoutMs: 30_000 });
    let closed = false;
    try {
      const nat = await queryCapturing(storage);
      nat.testArmFaults(true, false);
      await storage.queryAuthoritative(P, q);
      const started = performance.now();
      await within(storage.close(), 5000, 'close');
      closed = true;
      const closeMs = performance.now() - started;
      assert.ok(closeMs < 1500, `close took ${closeMs.toFixed(0)} ms; the held rollback sleeps 2,000`);
      let left = await sessions();
      for (let i = 0; i < 50 && left > 0; i++) {
        await new Promise((r) => setTimeout(r, 20));
        left = await sessions();
      }
      assert.equal(left, 0, 'no session of the storage is left once close returned');
      await assert.rejects(storage.queryAuthoritative(P, q), (e) => e.code === 'ERR_SYNCULAR_CLOSED' || /closed/.test(e.message));
    } finally {
      if (!closed) await storage.close();
    }
  });
});
