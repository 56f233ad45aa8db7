// Host level, under bun with upstream's tree (skipped without one): one
// SQLite file for the storage and upstream's segment, blob and lease
// stores on storage.db (__test__/host/shared-file.ts), and those stores on
// bun:sqlite beside the storage refused (__test__/host/foreign-sqlite.ts).
// The files are checked with the sqlite3 shell after the host exited.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { query, sqliteCliAvailable } from './support/sqlite-cli.mjs';
import { hostTest, runHost } from './support/upstream.mjs';

const root = mkdtempSync(join(tmpdir(), 'syncular-shared-file-'));
after(() => rmSync(root, { recursive: true, force: true }));
const cli = sqliteCliAvailable() ? {} : { skip: 'no sqlite3 shell' };
const options = hostTest.skip ? hostTest : cli;

test('storage and upstream’s segment, blob and lease stores in one file: concurrent pushes, 0 errors, nothing lost, integrity ok', options, async () => {
  const path = join(root, 'shared.db');
  const r = await runHost('shared-file.ts', [path]);
  assert.deepEqual(r.unexpected, [], 'no unexpected error, nothing lost');
  assert.equal(r.failed, r.injected, 'only the injected failures failed');
  assert.ok(r.injected > 0 && r.rejected > 0 && r.applied > 100, JSON.stringify(r));
  assert.equal(r.applied + r.rejected + r.failed, r.sent);
  assert.ok(r.refs > 0, 'the handler wrote segments');
  assert.ok(r.joined > 10, `store writes joined open push transactions (${r.joined})`);
  // The file itself, read by another SQLite after the host closed it.
  assert.deepEqual(query(path, 'PRAGMA integrity_check'), [{ integrity_check: 'ok' }]);
  const [counts] = query(
    path,
    `SELECT (SELECT count(*) FROM sync_blobs) AS blobs, (SELECT count(*) FROM sync_segments) AS segments,
            (SELECT count(*) FROM sync_leases) AS leases, (SELECT count(*) FROM sync_commits) AS commits`,
  );
  assert.deepEqual(counts, { blobs: r.blobs, segments: r.counts.segments, leases: r.leases, commits: r.applied });
});

test('upstream’s stores on bun:sqlite beside the storage’s file: ERR_SYNCULAR_FOREIGN_SQLITE, not corruption', options, async () => {
  const r = await runHost('foreign-sqlite.ts', [root]);
  for (const seen of [r.atOpen, r.atOpenAgain, r.later, r.dbWrite, r.linked]) {
    assert.equal(seen?.code, 'ERR_SYNCULAR_FOREIGN_SQLITE', JSON.stringify(r));
    assert.match(seen.message, /storage\.db/);
  }
  assert.match(r.later.message, /-shm/);
  // A hard link is the same file under another name: seen by its identity.
  assert.match(r.linked.message, /hard link/);
  assert.ok(r.refusedAfterMs < 1000, `refused within the watch's interval (${r.refusedAfterMs} ms)`);
  assert.equal(r.readsStill, true, 'reads go on');
  for (const file of ['before.db', 'after.db', 'linked.db']) {
    assert.deepEqual(query(join(root, file), 'PRAGMA integrity_check'), [{ integrity_check: 'ok' }], file);
  }
});
