// Errors that say what failed: a PostgreSQL server that refuses or rejects
// the connection is reported at once with host, port and reason; SQLite's
// open failures name the path and the reason, with SQLite's exact code.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { skipUnder } from './support/emulation.mjs';
import { NativeStorage } from './support/package.mjs';
import { freshPgSchema } from './support/engines.mjs';
import { fixtureSchema } from './support/schema.mjs';

const pgUrl = process.env.SYNCULAR_TEST_PG_URL;

async function failure(storage, call = (s) => s.ensureSchema(fixtureSchema())) {
  const started = performance.now();
  try {
    await call(storage);
  } catch (err) {
    return { err, ms: performance.now() - started };
  } finally {
    await storage.close();
  }
  assert.fail('the call succeeded');
}

test('PostgreSQL: a refused port is reported at once, naming host and port', async () => {
  const { err, ms } = await failure(new NativeStorage({ url: 'postgres://u@127.0.0.1:1/db', connectTimeoutMs: 10_000 }));
  assert.equal(err.code, 'PG_CONNECT_REFUSED', `${err.code}: ${err.message}`);
  assert.match(err.message, /127\.0\.0\.1:1\b/);
  assert.match(err.message, /refused/i);
  assert.ok(ms < 3000, `reported after ${ms} ms, not after connectTimeoutMs`);
});

test('PostgreSQL: an unresolvable host is reported at once, naming it', async () => {
  const { err, ms } = await failure(new NativeStorage({ url: 'postgres://u@no-such-host.invalid:5432/db', connectTimeoutMs: 10_000 }));
  assert.equal(err.code, 'PG_CONNECT_FAILED', `${err.code}: ${err.message}`);
  assert.match(err.message, /no-such-host\.invalid:5432/);
  assert.ok(ms < 5000, `reported after ${ms} ms`);
});

test('PostgreSQL: a server that rejects the role is reported at once with its SQLSTATE and host:port', { skip: pgUrl ? false : 'SYNCULAR_TEST_PG_URL is not set' }, async () => {
  const u = new URL(pgUrl);
  u.username = 'no_such_role_for_syncular_tests';
  const { err, ms } = await failure(new NativeStorage({ url: u.toString(), connectTimeoutMs: 10_000 }));
  assert.equal(err.code, '28000', `${err.code}: ${err.message}`);
  assert.ok(err.message.includes(`${u.hostname}:${u.port}`), err.message);
  assert.match(err.message, /no_such_role_for_syncular_tests/);
  assert.ok(ms < 3000, `reported after ${ms} ms`);
});

test('PostgreSQL: a server that accepts and never answers is reported after connectTimeoutMs as PG_CONNECT_TIMEOUT, naming host and port', async (t) => {
  // A listener on 127.0.0.1 that takes the connection and says nothing.
  const sockets = new Set();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  const { port } = server.address();
  const { err, ms } = await failure(new NativeStorage({ url: `postgres://u@127.0.0.1:${port}/db`, connectTimeoutMs: 400 }));
  assert.equal(err.code, 'PG_CONNECT_TIMEOUT', `${err.code}: ${err.message}`);
  assert.ok(err.message.includes(`127.0.0.1:${port}`), err.message);
  assert.match(err.message, /400 ms/);
  assert.ok(sockets.size >= 1, 'the storage did connect to the listener');
  assert.ok(ms >= 350 && ms < 5000, `reported after ${ms} ms (connectTimeoutMs 400)`);
});

test('PostgreSQL: an unknown database is reported at once with its SQLSTATE (3D000) and host:port', { skip: pgUrl ? false : 'SYNCULAR_TEST_PG_URL is not set' }, async () => {
  const u = new URL(pgUrl);
  u.pathname = '/no_such_database_for_syncular_tests';
  const { err, ms } = await failure(new NativeStorage({ url: u.toString(), connectTimeoutMs: 10_000 }));
  assert.equal(err.code, '3D000', `${err.code}: ${err.message}`);
  assert.ok(err.message.includes(`${u.hostname}:${u.port}`), err.message);
  assert.match(err.message, /no_such_database_for_syncular_tests/);
  assert.ok(ms < 3000, `reported after ${ms} ms`);
});

// A role whose password the server checks (`.ci/run` makes one; every
// other login of the test servers is trusted, so no other can fail this way).
const pwUrl = process.env.SYNCULAR_TEST_PG_PASSWORD_URL;
const pwSkip = pwUrl ? false : process.env.CI === 'true' ? false : 'SYNCULAR_TEST_PG_PASSWORD_URL is not set (a role whose password pg_hba.conf checks)';

test('PostgreSQL: a wrong password is reported at once with its SQLSTATE (28P01) and host:port', { skip: pwSkip }, async () => {
  assert.ok(pwUrl, 'CI=true: SYNCULAR_TEST_PG_PASSWORD_URL must name a role whose password is checked');
  // The right password gets in.
  const good = new NativeStorage({ url: pwUrl, schema: freshPgSchema(), connectTimeoutMs: 10_000 });
  try {
    assert.equal((await good.ping()).engine, 'postgres');
  } finally {
    await good.close();
  }
  const u = new URL(pwUrl);
  u.password = 'certainly-not-the-password';
  const storage = new NativeStorage({ url: u.toString(), schema: freshPgSchema(), connectTimeoutMs: 10_000 });
  const started = performance.now();
  let err;
  try {
    await storage.ping();
  } catch (e) {
    err = e;
  } finally {
    await storage.close();
  }
  const ms = performance.now() - started;
  assert.ok(err, 'a wrong password was let in');
  assert.equal(err.code, '28P01', `${err.code}: ${err.message}`);
  assert.ok(err.message.includes(`${u.hostname}:${u.port}`), err.message);
  assert.match(err.message, /password/);
  assert.ok(ms < 3000, `reported after ${ms} ms`);
});

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'syncular-open-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('SQLite: a database in a directory that does not exist names the path and says so', async (t) => {
  const path = join(tempDir(t), 'missing', 'storage.db');
  const { err } = await failure(new NativeStorage({ url: `sqlite:${path}` }));
  assert.equal(err.code, 'SQLITE_CANTOPEN', `${err.code}: ${err.message}`);
  assert.ok(err.message.includes(path), err.message);
  assert.match(err.message, /does not exist/);
});

test('SQLite: a database under a file (not a directory) names the path and says so', async (t) => {
  const file = join(tempDir(t), 'plain-file');
  writeFileSync(file, 'x');
  const path = join(file, 'storage.db');
  const { err } = await failure(new NativeStorage({ url: `sqlite:${path}` }));
  assert.equal(err.code, 'SQLITE_CANTOPEN', `${err.code}: ${err.message}`);
  assert.ok(err.message.includes(path), err.message);
  assert.match(err.message, /not a directory/);
});

// Wine maps the read-only attribute to permission bits, which root (whom
// Wine runs as here) ignores; process.getuid is absent there, so the
// chattr +i way below cannot be taken from inside Wine either.
const writableUnderWine = skipUnder('wine', 'the file stays writable: Wine runs as root here, and root ignores the read-only attribute (permission bits)');

test('SQLite: a read-only database file names the path and says it is read-only', { skip: writableUnderWine }, async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'storage.db');
  const first = new NativeStorage({ url: `sqlite:${path}` });
  await first.ensureSchema(fixtureSchema());
  await first.close();
  rmSync(`${path}-wal`, { force: true });
  rmSync(`${path}-shm`, { force: true });
  chmodSync(path, 0o444);
  chmodSync(dir, 0o555);
  // root ignores permission bits; an immutable file holds for root too.
  const root = process.getuid?.() === 0;
  if (root) {
    try {
      execFileSync('chattr', ['+i', path], { stdio: 'pipe' });
    } catch (e) {
      t.skip(`running as root without chattr +i: ${String(e.message).split('\n')[0]}`);
      chmodSync(dir, 0o755);
      return;
    }
  }
  let err;
  try {
    ({ err } = await failure(new NativeStorage({ url: `sqlite:${path}` })));
  } finally {
    // before the directory is removed
    if (root) execFileSync('chattr', ['-i', path], { stdio: 'pipe' });
    chmodSync(dir, 0o755);
  }
  assert.match(err.code, /^SQLITE_(READONLY|CANTOPEN)/, `${err.code}: ${err.message}`);
  assert.ok(err.message.includes(path), err.message);
  assert.match(err.message, /read-only|not writable/);
});

test('SQLite: a directory at the database path names the path and says so', async (t) => {
  const path = join(tempDir(t), 'a-directory.db');
  mkdirSync(path);
  const { err } = await failure(new NativeStorage({ url: `sqlite:${path}` }));
  assert.match(err.code, /^SQLITE_CANTOPEN/, `${err.code}: ${err.message}`);
  assert.ok(err.message.includes(path), err.message);
  assert.match(err.message, /is a directory/);
});

// SQLite's extended result codes reach JS as they are, not folded into
// their primary code (SQLITE_ERROR here). (SQLITE_READONLY_DBMOVED cannot be
// shown this way: SQLite checks for a moved file only when it opens a
// rollback journal, and the storage runs in WAL mode.)
test('SQLite: a non-constraint extended result code comes through exactly (SQLITE_ERROR_MISSING_COLLSEQ)', async (t) => {
  const path = join(tempDir(t), 'storage.db');
  const storage = new NativeStorage({ url: `sqlite:${path}` });
  try {
    await storage.ensureSchema(fixtureSchema());
    // A storage member: a registered query naming an unknown collation.
    const err = await storage
      .queryAuthoritative('p1', { sql: 'SELECT title FROM tasks ORDER BY title COLLATE no_such_collation', params: [], tables: ['tasks'] })
      .then(
        () => assert.fail('the query answered'),
        (e) => e,
      );
    assert.equal(err.code, 'SQLITE_ERROR_MISSING_COLLSEQ', `${err.code}: ${err.message}`);
    assert.match(err.message, /no such collation sequence: no_such_collation/);
    // storage.db, upstream's synchronous surface, says the same.
    assert.throws(() => storage.db.exec('CREATE TABLE t(x TEXT COLLATE no_such_collation)'), { code: 'SQLITE_ERROR_MISSING_COLLSEQ' });
  } finally {
    await storage.close();
  }
});
