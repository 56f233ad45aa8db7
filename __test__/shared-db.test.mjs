// storage.db (lib/db.js, src/sqlite/shared.rs): upstream's synchronous
// SqliteDatabase on the storage's own SQLite connection, for the segment,
// blob and lease stores; and the refusal when other code in this process
// has the storage's file open (src/sqlite/foreign.rs).
import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { after, describe, test } from 'node:test';
import { taskRow, within } from './support/harness.mjs';
import { NativeStorage } from './support/package.mjs';
import { fixtureSchema } from './support/schema.mjs';

const root = mkdtempSync(join(tmpdir(), 'syncular-shared-db-'));
after(() => rmSync(root, { recursive: true, force: true }));
let files = 0;
const fresh = () => join(root, `s-${files++}.db`);

const STORE = 'CREATE TABLE IF NOT EXISTS store(k TEXT PRIMARY KEY, n INTEGER, v BLOB)';
const turn = () => new Promise(setImmediate);

async function withDb(fn, opts = {}) {
  const path = fresh();
  const storage = new NativeStorage({ url: `sqlite:${path}`, ...opts });
  try {
    storage.db.exec(STORE);
    return await fn(storage, storage.db, path);
  } finally {
    await storage.close();
  }
}

describe('storage.db surface', () => {
  test('exec, run and query(sql).run/get/all, with the values upstream drivers bind and return', () =>
    withDb((storage, db) => {
      assert.equal(storage.db, db, 'one handle per storage');
      assert.equal(Object.keys(storage).includes('db'), false, 'not enumerable');
      assert.deepEqual(db.run('INSERT INTO store(k, n, v) VALUES (?, ?, ?)', ['a', 1, new Uint8Array([1, 2])]), {
        changes: 1,
        lastInsertRowid: 1,
      });
      const insert = db.query('INSERT INTO store(k, n, v) VALUES (?, ?, ?)');
      assert.equal(db.query('INSERT INTO store(k, n, v) VALUES (?, ?, ?)'), insert, 'statements are cached by text');
      assert.deepEqual(insert.run('b', 2n ** 62n, Buffer.from([3])), { changes: 1, lastInsertRowid: 2 });
      assert.deepEqual(insert.run('c', true, null), { changes: 1, lastInsertRowid: 3 });
      const a = db.query('SELECT k, n, v FROM store WHERE k = ?').get('a');
      assert.deepEqual(a, { k: 'a', n: 1, v: new Uint8Array([1, 2]) });
      assert.ok(a.v instanceof Uint8Array);
      assert.equal(db.query('SELECT n FROM store WHERE k = ?').get('b').n, 2n ** 62n, 'beyond 2^53: a bigint');
      assert.equal(db.query('SELECT n FROM store WHERE k = ?').get('c').n, 1, 'a boolean binds as 1');
      assert.equal(db.query('SELECT k FROM store WHERE k = ?').get('none'), null);
      assert.deepEqual(db.query('SELECT k FROM store WHERE n > ? ORDER BY k').all(100), [{ k: 'b' }]);
      assert.deepEqual(db.query('SELECT k FROM store WHERE n > ?').all(2n ** 63n - 1n), []);
      assert.deepEqual(db.query('SELECT typeof(?) i, typeof(?) r, 0.5 AS h').get(3, 3.5), { i: 'integer', r: 'real', h: 0.5 });
      assert.deepEqual(db.query('DELETE FROM store WHERE k = ?').run('c'), { changes: 1, lastInsertRowid: 3 });
      // exec runs every statement; a read among them runs too.
      db.exec("INSERT INTO store(k) VALUES ('d'); SELECT 1; INSERT INTO store(k) VALUES ('e')");
      assert.deepEqual(db.query('SELECT k FROM store ORDER BY k').all().map((r) => r.k), ['a', 'b', 'd', 'e']);
      // What upstream's stores run at construction.
      assert.ok(db.query('PRAGMA table_info(store)').all().some((c) => c.name === 'v'));
    }));

  test('bad statements and values fail with stable codes and change nothing', () =>
    withDb((storage, db) => {
      const invalid = { code: 'ERR_SYNCULAR_INVALID_ARGUMENT' };
      assert.throws(() => db.query('SELECT ?').get(undefined), { ...invalid, message: /undefined/ });
      assert.throws(() => db.query('SELECT ?').get({}), invalid);
      assert.throws(() => db.query('SELECT ?').get([1]), invalid);
      assert.throws(() => db.query('SELECT ?, ?').get(1), { ...invalid, message: /takes 2 values, got 1/ });
      assert.throws(() => db.query('SELECT ?').get(1, 2), invalid);
      assert.throws(() => db.query('SELECT ?').get(2n ** 64n), invalid);
      assert.throws(() => db.run('SELECT 1; SELECT 2'), invalid);
      assert.throws(() => db.run('SELECT ?', 1), invalid);
      assert.throws(() => db.exec(42), invalid);
      assert.throws(() => db.query(null), invalid);
      assert.throws(() => db.query('SELEC 1'), { code: 'SQLITE_ERROR', message: 'near "SELEC": syntax error' });
      assert.throws(() => db.query('SELECT * FROM missing'), { code: 'SQLITE_ERROR', message: /no such table/ });
      db.run("INSERT INTO store(k) VALUES ('x')");
      assert.throws(() => db.run("INSERT INTO store(k) VALUES ('x')"), { code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
      // exec stops at the failing statement; those before it stay done.
      assert.throws(() => db.exec("INSERT INTO store(k) VALUES ('y'); INSERT INTO store(k) VALUES ('x'); INSERT INTO store(k) VALUES ('z')"), {
        code: 'SQLITE_CONSTRAINT_PRIMARYKEY',
      });
      assert.deepEqual(db.query('SELECT k FROM store ORDER BY k').all().map((r) => r.k), ['x', 'y']);
    }));

  test('transaction control and connection settings belong to the storage: ERR_SYNCULAR_DB_REFUSED', () =>
    withDb(async (storage, db) => {
      const disarming = [
        // Review 5: what would undo the registered-query bounds or the isolation.
        'PRAGMA case_sensitive_like = 1',
        'PRAGMA schema_version = 7',
        'PRAGMA max_page_count = 10',
        'PRAGMA hard_heap_limit = 0',
        'PRAGMA soft_heap_limit = 0',
        'PRAGMA temp_store = FILE',
        'PRAGMA ignore_check_constraints = 1',
        "ATTACH ':memory:' AS other",
        'DETACH main',
        'CREATE TEMP VIEW "_syncular_q_tasks_0" AS SELECT 1 AS id',
        'CREATE TABLE _SYNCULAR_x(a)',
      ];
      for (const sql of ['BEGIN', 'BEGIN IMMEDIATE', 'COMMIT', 'END', 'ROLLBACK', 'SAVEPOINT s', 'RELEASE s', 'PRAGMA busy_timeout = 1000', 'PRAGMA journal_mode = DELETE', 'PRAGMA query_only = ON', 'PRAGMA synchronous = OFF', ...disarming]) {
        assert.throws(() => db.exec(sql), { code: 'ERR_SYNCULAR_DB_REFUSED' }, sql);
        assert.throws(() => db.query(sql), { code: 'ERR_SYNCULAR_DB_REFUSED' }, sql);
      }
      assert.equal(db.query('PRAGMA journal_mode').get().journal_mode, 'wal', 'reading a setting is fine');
      assert.equal(db.query('PRAGMA max_page_count').get().max_page_count > 10, true, 'reading a limit is fine');
      db.exec('CREATE TEMP VIEW own_view AS SELECT 1 AS one');
      assert.equal(db.query('SELECT one FROM own_view').get().one, 1, 'the host names its own objects');
      // The storage still runs its own transactions.
      await storage.ensureSchema(fixtureSchema());
      const tx = await storage.begin('p');
      await tx.upsertRow('tasks', taskRow('t1'), { opIndex: 0 });
      await tx.commit();
      assert.equal((await storage.getRow('p', 'tasks', 't1')).rowId, 't1');
    }));

  test('db.close ends the handle; storage.close ends the connection', async () => {
    const path = fresh();
    const storage = new NativeStorage({ url: `sqlite:${path}` });
    const db = storage.db;
    db.exec(STORE);
    const stmt = db.query('SELECT count(*) AS n FROM store');
    db.close();
    assert.throws(() => db.exec('SELECT 1'), { code: 'ERR_SYNCULAR_CLOSED' });
    assert.throws(() => stmt.get(), { code: 'ERR_SYNCULAR_CLOSED' });
    assert.throws(() => db.query('SELECT 1'), { code: 'ERR_SYNCULAR_CLOSED' });
    await storage.ensureSchema(fixtureSchema());
    await storage.close();
    const other = new NativeStorage({ url: `sqlite:${path}` });
    const again = other.db;
    await other.close();
    assert.throws(() => again.query('SELECT 1'), { code: 'ERR_SYNCULAR_CLOSED' });
  });

  test('a memory storage has a db too, private to it', async () => {
    const a = new NativeStorage();
    const b = new NativeStorage();
    try {
      a.db.exec(STORE);
      a.db.run("INSERT INTO store(k) VALUES ('m')");
      assert.deepEqual(a.db.query('SELECT k FROM store').all(), [{ k: 'm' }]);
      assert.throws(() => b.db.query('SELECT k FROM store'), { message: /no such table/ });
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('a PostgreSQL storage has no db: ERR_SYNCULAR_DB_UNSUPPORTED on access, naming the alternatives', async () => {
    const storage = new NativeStorage({ url: 'postgres://127.0.0.1:1/none' });
    try {
      assert.throws(() => storage.db, { code: 'ERR_SYNCULAR_DB_UNSUPPORTED', message: /S3SegmentStore/ });
      assert.throws(() => storage.db, { code: 'ERR_SYNCULAR_DB_UNSUPPORTED' }, 'on every access');
    } finally {
      await storage.close();
    }
  });
});

describe('storage.db beside the storage’s transactions', () => {
  test('a write made while a transaction is open joins it, and survives its rollback', () =>
    withDb(async (storage, db, path) => {
      await storage.ensureSchema(fixtureSchema());
      const tx = await storage.begin('p');
      await tx.upsertRow('tasks', taskRow('gone'), { opIndex: 0 });
      db.run("INSERT INTO store(k) VALUES ('kept')");
      assert.deepEqual(db.query("SELECT k FROM store WHERE k = 'kept'").get(), { k: 'kept' }, 'read your own write');
      const reader = new NativeStorage({ url: `sqlite:${path}` });
      try {
        assert.equal(reader.db.query("SELECT k FROM store WHERE k = 'kept'").get(), null, 'not durable before the COMMIT');
        await tx.rollback();
        assert.deepEqual(reader.db.query("SELECT k FROM store WHERE k = 'kept'").get(), { k: 'kept' });
      } finally {
        await reader.close();
      }
      assert.equal(await storage.getRow('p', 'tasks', 'gone'), undefined);
    }));

  test('writes interleaved with concurrent transactions spanning event-loop turns: no BUSY, no deadlock, nothing lost', () =>
    withDb(async (storage, db) => {
      await storage.ensureSchema(fixtureSchema());
      const errors = [];
      let open = 0;
      let joined = 0;
      let done = false;
      const committed = [];
      async function worker(w) {
        for (let i = 0; i < 30; i++) {
          const id = `w${w}-${i}`;
          const tx = await storage.begin('p');
          open++;
          try {
            await tx.lockPartitionForPush();
            await turn();
            await tx.upsertRow('tasks', taskRow(id), { opIndex: 0 });
            await turn();
            if (i % 4 === 3) {
              await tx.rollback();
            } else {
              await tx.appendCommit({ clientId: `c${w}`, clientCommitId: id, actorId: 'a', createdAtMs: 1, changes: [] });
              await tx.commit();
              committed.push(id);
            }
          } finally {
            open--;
          }
        }
      }
      const written = [];
      async function beside() {
        const put = db.query('INSERT INTO store(k, n, v) VALUES (?, ?, ?)');
        const get = db.query('SELECT n FROM store WHERE k = ?');
        for (let i = 0; !done; i++) {
          await turn();
          if (open > 0) joined++;
          put.run(`k${i}`, i, new Uint8Array(64).fill(i & 255));
          written.push(`k${i}`);
          assert.equal(get.get(`k${i}`).n, i);
          if (i % 10 === 0) await storage.touchPartition('p', Date.now(), 'epoch');
        }
      }
      const side = beside().catch((e) => errors.push(e));
      await within(
        Promise.all([0, 1, 2, 3, 4, 5].map((w) => worker(w).catch((e) => errors.push(e)))),
        30_000,
        'the transactions',
      );
      done = true;
      await side;
      assert.deepEqual(errors, []);
      assert.ok(joined > 20, `writes joined open transactions (${joined})`);
      assert.equal(db.query('SELECT count(*) AS n FROM store').get().n, written.length, 'every db write is there');
      for (const id of committed) assert.ok(await storage.getRow('p', 'tasks', id), id);
      const rolledBack = await storage.getRow('p', 'tasks', 'w0-3');
      assert.equal(rolledBack, undefined);
      assert.equal(db.query('PRAGMA integrity_check').get().integrity_check, 'ok');
    }));

  test('on an idle writer, a write waits for another connection’s lock (busyTimeoutMs) and then succeeds', () =>
    withDb(async (storage, db, path) => {
      // Another storage on the same file, on another thread, holds the
      // write lock for a while.
      const worker = new Worker(
        `const { parentPort, workerData } = require('node:worker_threads');
         const { NativeStorage } = require(workerData.pkg);
         (async () => {
           const s = new NativeStorage({ url: 'sqlite:' + workerData.path });
           s.db.exec("INSERT INTO store(k) VALUES ('from-worker')");
           const tx = await s.begin('p');
           s.db.exec("UPDATE store SET n = 7 WHERE k = 'from-worker'");
           parentPort.postMessage('held');
           Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
           await tx.commit();
           await s.close();
         })();`,
        { eval: true, workerData: { path, pkg: join(import.meta.dirname, '..', 'index.js') } },
      );
      await new Promise((resolve) => worker.once('message', resolve));
      const t = performance.now();
      db.run("INSERT INTO store(k) VALUES ('main')");
      const waited = performance.now() - t;
      await new Promise((resolve) => worker.once('exit', resolve));
      assert.ok(waited > 150, `waited ${waited} ms for the lock`);
      assert.deepEqual(db.query('SELECT k, n FROM store ORDER BY k').all(), [{ k: 'from-worker', n: 7 }, { k: 'main', n: null }]);
    }));
});

// A second copy of SQLite mapping the file after the storage opened it is
// bun:sqlite's case: __test__/host/foreign-sqlite.ts.
describe('another SQLite library on the file (Linux /proc)', { skip: process.platform !== 'linux' && 'needs /proc' }, () => {
  test('a descriptor open on the file before the storage opens it: ERR_SYNCULAR_FOREIGN_SQLITE, until it closes', async () => {
    const path = fresh();
    const first = new NativeStorage({ url: `sqlite:${path}` });
    await first.ensureSchema(fixtureSchema());
    await first.close();
    const fd = openSync(path, 'r');
    const storage = new NativeStorage({ url: `sqlite:${path}` });
    try {
      await assert.rejects(storage.touchPartition('p', 1, 'e'), { code: 'ERR_SYNCULAR_FOREIGN_SQLITE', message: /storage\.db/ });
      assert.throws(() => storage.db.exec('SELECT 1'), { code: 'ERR_SYNCULAR_FOREIGN_SQLITE' });
      closeSync(fd);
      await storage.touchPartition('p', 1, 'e');
    } finally {
      await storage.close();
    }
  });

  test('two storages of this package on one file are not refused', async () => {
    const path = fresh();
    const a = new NativeStorage({ url: `sqlite:${path}` });
    const b = new NativeStorage({ url: `sqlite:${path}` });
    try {
      await a.ensureSchema(fixtureSchema());
      await b.ensureSchema(fixtureSchema());
      // Past the watch's interval: each one's own mapping is not another copy.
      await new Promise((r) => setTimeout(r, 300));
      await a.touchPartition('p', 1, 'e');
      await b.touchPartition('q', 1, 'e');
      b.db.exec(STORE);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
