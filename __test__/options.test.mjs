// The constructor's options are strict: a typo, an option of the other
// engine, or a url scheme that names no engine is refused with
// ERR_SYNCULAR_INVALID_ARGUMENT naming the key, never turned into a memory
// database or a file named after the url.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { NativeStorage, createStorage } from './support/package.mjs';

const dir = mkdtempSync(join(tmpdir(), 'syncular-options-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function refused(options, pattern) {
  assert.throws(
    () => new NativeStorage(options),
    (err) => err.code === 'ERR_SYNCULAR_INVALID_ARGUMENT' && pattern.test(err.message),
    `${JSON.stringify(options)} must be refused with ${pattern}`,
  );
}

test('an unknown key is refused, naming it and the accepted keys', () => {
  refused({ urll: `sqlite:${join(dir, 'a.db')}` }, /unknown option "urll"; accepted: url, path, filename, errors/);
  refused({ url: 'sqlite::memory:', poolSize: 4 }, /unknown option "poolSize"/);
  refused({ url: 'sqlite::memory:', synchronus: 'normal' }, /unknown option "synchronus".*synchronous/);
  // A key present with the value undefined is no option (spread configs).
  const s = new NativeStorage({ url: 'sqlite::memory:', schema: undefined, maxConnections: undefined });
  return s.close();
});

test('a url scheme that names no engine is refused, and no file is created', () => {
  const cwd = process.cwd();
  process.chdir(dir);
  try {
    for (const url of ['mysql:oops.db', 'postgress://u@127.0.0.1/db', 'https://example.invalid/db', 'sqlit:x.db', 'redis://127.0.0.1']) {
      refused({ url }, /unknown url scheme/);
    }
    assert.deepEqual(readdirSync(dir), [], 'no file was created');
  } finally {
    process.chdir(cwd);
  }
});

test('options of the other engine are refused', () => {
  refused({ url: 'sqlite::memory:', maxConnections: 4 }, /"maxConnections" is a PostgreSQL option/);
  refused({ url: `sqlite:${join(dir, 'b.db')}`, schema: 'app' }, /"schema" is a PostgreSQL option/);
  refused({ url: 'sqlite::memory:', connectTimeoutMs: 100 }, /"connectTimeoutMs" is a PostgreSQL option/);
  refused({ url: 'postgres://u@127.0.0.1:1/db', synchronous: 'normal' }, /"synchronous" is a SQLite option/);
  refused({ url: 'postgresql://u@127.0.0.1:1/db', groupCommit: false }, /"groupCommit" is a SQLite option/);
  refused({ url: 'postgres://u@127.0.0.1:1/db', busyTimeoutMs: 10 }, /"busyTimeoutMs" is a SQLite option/);
  assert.ok(!existsSync(join(dir, 'b.db')));
});

test('a memory database opens only when asked for', async () => {
  // No options at all, as upstream's `new SqliteServerStorage()`, or the memory url.
  for (const s of [new NativeStorage(), new NativeStorage({}), createStorage(), new NativeStorage({ url: 'sqlite::memory:' }), new NativeStorage({ url: ':memory:' })]) {
    assert.equal(await s.getMaxCommitSeq('p'), 0);
    await s.close();
  }
  // Options without a location are a forgotten url, not a request for memory.
  refused({ errors: {} }, /no url: pass url/);
  refused({ queryTimeoutMs: 100 }, /no url/);
  refused({ synchronous: 'normal' }, /no url/);
  refused({ url: 'sqlite:a.db', path: 'b.db' }, /one of url, path or filename/);
  refused(null, /options must be an object/);
  refused('sqlite:x.db', /options must be an object/);
});

test('path and filename stay aliases of url', async () => {
  for (const key of ['url', 'path', 'filename']) {
    const file = join(dir, `${key}.db`);
    const s = new NativeStorage({ [key]: key === 'url' ? `sqlite:${file}` : file });
    await s.touchPartition('p', 1, 'e');
    await s.close();
    assert.ok(existsSync(file), `${key} opened ${file}`);
  }
});
