// The host closes a descriptor of the storage's file (a copy of it, a hash
// of it) and another process then opens and closes the file: SQLite's POSIX
// locks belong to the process, so the host's close dropped them, and the
// other process's close would have checkpointed and deleted the WAL under
// the storage's connections. The storage's stand-in shared lock
// (src/sqlite/standin.rs, Linux) keeps that from happening.
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { NativeStorage } from './support/package.mjs';
import { fixtureSchema } from './support/schema.mjs';
import { hostPush, taskRow } from './support/harness.mjs';
import { noShell, query } from './support/sqlite-cli.mjs';

const skip = process.platform !== 'linux' ? 'the stand-in lock is Linux only (open file description locks)' : noShell;

function tempDb() {
  const dir = mkdtempSync(join(tmpdir(), 'syncular-standin-'));
  return { dir, path: join(dir, 'app.db') };
}

/** Runs `sql` in the sqlite3 shell, another process: { status, out, err }. */
function shell(path, sql) {
  const r = spawnSync('sqlite3', [path, sql], { encoding: 'utf8' });
  if (r.error) throw r.error;
  return { status: r.status, out: r.stdout.trim(), err: r.stderr.trim() };
}

async function push(storage, n) {
  return hostPush(storage, 'p1', { clientId: 'c', clientCommitId: `cc${n}`, ops: [{ table: 'tasks', row: taskRow(`r${n}`, { title: `t${n}` }) }] });
}

describe('sqlite: the host closing a descriptor of the file', { skip }, () => {
  test('another process closing the file after the host copied it leaves the WAL in place; nothing is lost', async () => {
    const { dir, path } = tempDb();
    const storage = new NativeStorage({ url: `sqlite:${path}` });
    try {
      await storage.ensureSchema(fixtureSchema());
      for (let i = 1; i <= 20; i++) await push(storage, i);
      // The host copies the live file with node:fs (opens and closes it), as a naive backup would.
      copyFileSync(path, join(dir, 'copy.db'));
      readFileSync(path);
      // Another process opens the file, reads, and closes: it must not find itself the last reader.
      assert.equal(shell(path, 'SELECT count(*) FROM sync_commits').status, 0);
      assert.ok(existsSync(`${path}-wal`), 'the WAL is still there');
      for (let i = 21; i <= 60; i++) {
        await push(storage, i);
        const w = await storage.readCommitWindow('p1', { table: 'tasks', scopeFilter: { project_id: ['p1', 'p2'] }, afterSeq: 0, throughSeq: 1000, limitChanges: 100 });
        assert.ok(Array.isArray(w.changes ?? w), 'the window reads');
      }
      assert.equal(await storage.getMaxCommitSeq('p1'), 60);
    } finally {
      await storage.close();
    }
    // Every commit reached the file, and the file is sound.
    assert.deepEqual(query(path, 'SELECT count(*) AS n FROM sync_commits'), [{ n: 60 }]);
    assert.deepEqual(query(path, 'PRAGMA integrity_check'), [{ integrity_check: 'ok' }]);
    rmSync(dir, { recursive: true, force: true });
  });

  test('while the storage is open, another process cannot take the file from WAL mode, even after the host closed a descriptor', async () => {
    const { dir, path } = tempDb();
    const storage = new NativeStorage({ url: `sqlite:${path}` });
    try {
      await storage.ensureSchema(fixtureSchema());
      await push(storage, 1);
      copyFileSync(path, join(dir, 'copy.db'));
      const r = shell(path, 'PRAGMA journal_mode=DELETE');
      assert.notEqual(r.status, 0, `the shell switched the journal mode: ${r.out}`);
      assert.match(r.err, /database is locked/);
      await push(storage, 2);
      assert.equal(await storage.getMaxCommitSeq('p1'), 2);
    } finally {
      await storage.close();
    }
    // Closed: the lock is gone with the storage, and the storage's close removed the WAL as before.
    assert.equal(existsSync(`${path}-wal`), false, 'the last close checkpointed and removed the WAL');
    assert.deepEqual(shell(path, 'PRAGMA journal_mode=DELETE'), { status: 0, out: 'delete', err: '' });
    rmSync(dir, { recursive: true, force: true });
  });

  test('two storages on one file: the lock stays until the last one closes', async () => {
    const { dir, path } = tempDb();
    const a = new NativeStorage({ url: `sqlite:${path}` });
    const b = new NativeStorage({ url: `sqlite:${path}` });
    try {
      await a.ensureSchema(fixtureSchema());
      await b.ensureSchema(fixtureSchema());
      await push(a, 1);
      await a.close();
      copyFileSync(path, join(dir, 'copy.db'));
      assert.notEqual(shell(path, 'PRAGMA journal_mode=DELETE').status, 0, 'still locked while b is open');
      await push(b, 2);
      assert.equal(await b.getMaxCommitSeq('p1'), 2);
      // A storage opened again on the file while b is open shares the lock.
      const c = new NativeStorage({ url: `sqlite:${path}` });
      await c.ensureSchema(fixtureSchema());
      await b.close();
      assert.notEqual(shell(path, 'PRAGMA journal_mode=DELETE').status, 0, 'still locked while c is open');
      await push(c, 3);
      await c.close();
    } finally {
      await a.close();
      await b.close();
    }
    assert.deepEqual(shell(path, 'PRAGMA journal_mode=DELETE'), { status: 0, out: 'delete', err: '' });
    assert.deepEqual(query(path, 'SELECT count(*) AS n FROM sync_commits'), [{ n: 3 }]);
    rmSync(dir, { recursive: true, force: true });
  });
});
