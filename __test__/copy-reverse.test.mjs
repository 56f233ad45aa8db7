// The copy from PostgreSQL into a SQLite file (issue 51, docs/copy.md,
// "PostgreSQL → SQLite"): state written through the PostgreSQL storage is
// copied with `storage.copyTo('sqlite:…')` or the command; verify finds the
// two equal; the SQLite storage opened on the copy takes `ensureSchema`
// without a migration and answers every read as the PostgreSQL one does;
// SQLite → PostgreSQL → SQLite comes back equal. The copy is a snapshot:
// writes after it are not in it. A target holding sync data is refused,
// bad urls and the online options are refused with codes, and a load
// killed part way leaves the file empty.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { engines, freshPgSchema, sqliteFileUrl, tempDbPath } from './support/engines.mjs';
import { NativeStorage, pkg } from './support/package.mjs';
import { hostPush, norm, taskRow, taskValues } from './support/harness.mjs';
import { accountsTable, col, fixtureSchema, notesTable, schema as compiled, table, TASK_COLUMNS } from './support/schema.mjs';
import { encodeRow } from './support/codec.mjs';
import { populate, reads, sorted } from './support/copy-state.mjs';
import { hostTest, runHost } from './support/upstream.mjs';
import { Psql } from '../stress/lib/sql.mjs';

const pg = engines.find((e) => e.name === 'postgres');
const skip = pg === undefined ? 'needs SYNCULAR_TEST_PG_URL' : false;
const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'syncular-native-storage.mjs');

/** A PostgreSQL schema written through the storage; the storage stays open. */
async function pgWithData() {
  const url = pg.requireUrl();
  const schema = freshPgSchema();
  const d = new NativeStorage({ url, schema, maxConnections: 4 });
  await populate(d);
  return { url, schema, d };
}

/** What `storage.db` answers on a SQLite storage, as plain rows. */
function rows(s, sql) {
  return s.db.query(sql).all();
}

describe('copy: PostgreSQL to SQLite', { skip }, () => {
  test('copyTo a new file carries the whole state; verify is equal; the SQLite storage answers the same reads', async () => {
    const { url, schema, d } = await pgWithData();
    const before = await reads(d);
    const path = tempDbPath();
    const progress = [];
    const report = await d.copyTo(sqliteFileUrl(path), { verify: true, onProgress: (p) => progress.push(p) });
    assert.equal(report.verify.equal, true, JSON.stringify(report.verify.firstDifference));
    const byTable = Object.fromEntries(report.tables.map((t) => [t.table, t.rows]));
    assert.equal(byTable.sync_commits, 3 * 14 - 4, 'p3 pruned through 4');
    assert.equal(byTable.tasks, 3 * 12 - 3, 'three deleted rows');
    assert.deepEqual(report.snapshot.partitions.p3, [before.p3.max, 4]);
    assert.ok(progress.some((p) => p.phase === 'copy') && progress.some((p) => p.phase === 'verify'));
    const last = progress.filter((p) => p.phase === 'copy').at(-1);
    assert.equal(last.rows, last.rowsTotal);
    assert.ok(report.rows > 100 && report.rowsPerSec > 0 && report.bytes > 0);

    const s = new NativeStorage({ url: sqliteFileUrl(path) });
    try {
      // Same version, same layouts, complete layout: no migration (which
      // would fence every partition) and no repair.
      await s.ensureSchema(fixtureSchema());
      assert.equal((await pkg.copyStorage(url, sqliteFileUrl(path), { schema, verifyOnly: true })).equal, true);
      assert.deepEqual(rows(s, "SELECT name FROM sqlite_master WHERE name = 'sync_native_replaced_indexes'"), []);
      assert.deepEqual(rows(s, 'PRAGMA journal_mode'), [{ journal_mode: 'wal' }]);
      const indexes = rows(s, "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND name LIKE 'sync_ix_%' ORDER BY name");
      assert.deepEqual(indexes.map((i) => i.name), ['sync_ix_accounts_email', 'sync_ix_tasks_by_title']);
      assert.match(indexes[0].sql, /CREATE UNIQUE INDEX .*\("_sync_partition", "email"\)/);
      // The writer fence's trigger is back.
      assert.equal(rows(s, "SELECT count(*) AS n FROM sqlite_master WHERE type = 'trigger' AND name = 'sync_commits_writer_fence'")[0].n, 1);
      // JSON as the SQLite engine stores it: compact text, in JSONB's key order.
      const scopes = rows(s, "SELECT scopes FROM sync_changes WHERE partition = 'p1' ORDER BY commit_seq, idx LIMIT 1")[0].scopes;
      assert.equal(scopes, JSON.stringify(JSON.parse(scopes)));
      const after = await reads(s);
      assert.deepStrictEqual(norm(after), norm(before));
      // Key for key in the same order too: both read JSONB's order.
      assert.equal(JSON.stringify(norm(after)), JSON.stringify(norm(before)));
      // A snapshot: a write on PostgreSQL after it is not in the copy
      // (verify against the live source names the first thing it lacks),
      // and the SQLite storage goes on from where the snapshot stood.
      await hostPush(d, 'p3', { clientId: 'c-late', clientCommitId: 'k-late', ops: [{ table: 'tasks', row: taskRow('t98') }] });
      const v = await pkg.copyStorage(url, sqliteFileUrl(path), { schema, verifyOnly: true });
      assert.equal(v.equal, false);
      assert.deepEqual(
        { table: v.firstDifference.table, partition: v.firstDifference.partition, kind: v.firstDifference.kind },
        { table: 'sync_partitions', partition: 'p3', kind: 'differs' },
      );
      assert.equal((await s.getPushResult('p3', 'c-late', 'k-late')) ?? null, null);
      const next = await hostPush(s, 'p3', { clientId: 'c-new', clientCommitId: 'k-new', ops: [{ table: 'tasks', row: taskRow('t99') }] });
      assert.equal(next.commitSeq, before.p3.max + 1);
      await assert.rejects(hostPush(s, 'p1', { clientId: 'c-new', clientCommitId: 'k-new', ops: [] }), /writer_fence_rejected/);
    } finally {
      await s.close();
      await d.close();
    }
  });

  test('SQLite to PostgreSQL to SQLite comes back equal', async () => {
    const url = pg.requireUrl();
    const schema = freshPgSchema();
    const first = tempDbPath();
    const s = new NativeStorage({ url: sqliteFileUrl(first) });
    await populate(s);
    const want = await reads(s);
    assert.equal((await s.copyTo(url, { schema, verify: true })).verify.equal, true);
    await s.close();
    const back = tempDbPath();
    const report = await pkg.copyStorage(url, sqliteFileUrl(back), { schema, verify: true });
    assert.equal(report.verify.equal, true, JSON.stringify(report.verify.firstDifference));
    assert.deepEqual(report.skippedIndexes, []);
    const again = new NativeStorage({ url: sqliteFileUrl(back) });
    try {
      await again.ensureSchema(fixtureSchema());
      const got = await reads(again);
      assert.deepStrictEqual(norm(got), norm(want));
      // Values equal; objects list their keys in JSONB's order now.
      assert.equal(JSON.stringify(sorted(norm(got))), JSON.stringify(sorted(norm(want))));
      // The first file and the PostgreSQL copy still compare equal, so the
      // two files hold the same state.
      assert.equal((await pkg.copyStorage(sqliteFileUrl(first), url, { schema, verifyOnly: true })).equal, true);
      // Same tables, columns and indexes as the file the engine wrote.
      const shape = (st) =>
        rows(st, "SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name");
      const orig = new NativeStorage({ url: sqliteFileUrl(first) });
      try {
        await orig.ensureSchema(fixtureSchema());
        assert.deepEqual(shape(again), shape(orig));
        for (const t of ['tasks', 'accounts', 'notes', 'sync_commits', 'sync_reactions']) {
          assert.deepEqual(rows(again, `PRAGMA table_info(${t})`), rows(orig, `PRAGMA table_info(${t})`), t);
        }
      } finally {
        await orig.close();
      }
    } finally {
      await again.close();
    }
  });

  test('a table a migration added a column to keeps it at its end; the copy is current at that version', async () => {
    const url = pg.requireUrl();
    const schema = freshPgSchema();
    const columns = [...TASK_COLUMNS, col('extra', 'string', true)];
    const v2 = compiled(2, [
      table('tasks', columns, {
        scopes: [
          { variable: 'project_id', prefix: 'project' },
          { variable: 'owner_id', prefix: 'user' },
        ],
        indexes: [{ name: 'tasks_by_title', columns: ['title'] }, { name: 'tasks_by_extra', columns: ['extra'] }],
      }),
      accountsTable(),
      notesTable(),
    ]);
    const d = new NativeStorage({ url, schema, maxConnections: 4 });
    const path = tempDbPath();
    const reads2 = async (st) => ({
      rows: [await st.getRow('p1', 'tasks', 't1'), await st.getRow('p1', 'tasks', 't2')],
      byExtra: await st.scanRowsByIndex('p1', { table: 'tasks', index: 'tasks_by_extra', values: ['x'], limit: 10 }),
      window: await st.readCommitWindow('p1', { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterSeq: 0, throughSeq: 2, limitChanges: 10 }),
    });
    let want;
    try {
      await d.ensureSchema(fixtureSchema());
      await hostPush(d, 'p1', { clientId: 'c', clientCommitId: 'k1', ops: [{ table: 'tasks', row: taskRow('t1') }] });
      await d.ensureSchema(v2);
      const row = { rowId: 't2', serverVersion: 1, scopes: { project_id: 'p1', owner_id: 'u1' }, payload: encodeRow(columns, { ...taskValues('t2'), extra: 'x' }) };
      await hostPush(d, 'p1', { clientId: 'c', clientCommitId: 'k2', ops: [{ table: 'tasks', row }] });
      want = await reads2(d);
      assert.equal(want.byExtra.length, 1);
      const report = await d.copyTo(sqliteFileUrl(path), { verify: true });
      assert.equal(report.verify.equal, true, JSON.stringify(report.verify.firstDifference));
    } finally {
      await d.close();
    }
    const s = new NativeStorage({ url: sqliteFileUrl(path) });
    try {
      await s.ensureSchema(v2);
      assert.equal((await pkg.copyStorage(url, sqliteFileUrl(path), { schema, verifyOnly: true })).equal, true, 'ensureSchema changed nothing');
      const names = rows(s, 'PRAGMA table_info(tasks)').map((c) => c.name);
      assert.deepEqual(names.slice(-2), ['_sync_column_versions', 'extra']);
      assert.deepEqual(rows(s, "SELECT extra FROM tasks WHERE _sync_row_id = 't2'"), [{ extra: 'x' }]);
      assert.equal(rows(s, "SELECT count(*) AS n FROM sqlite_master WHERE name = 'sync_ix_tasks_by_extra'")[0].n, 1);
      assert.deepStrictEqual(norm(await reads2(s)), norm(want));
    } finally {
      await s.close();
    }
  });

  test('a target that holds sync data is refused, and changes nothing; an opened, never written file is taken', async () => {
    const { url, schema, d } = await pgWithData();
    await d.close();
    const path = tempDbPath();
    const other = new NativeStorage({ url: sqliteFileUrl(path) });
    await other.ensureSchema(fixtureSchema());
    await hostPush(other, 'p1', { clientId: 'x', clientCommitId: 'y', ops: [{ table: 'tasks', row: taskRow('t1') }] });
    await other.close();
    await assert.rejects(pkg.copyStorage(url, sqliteFileUrl(path), { schema }), (err) => {
      assert.equal(err.code, 'ERR_SYNCULAR_COPY_TARGET_NOT_EMPTY', err.message);
      return true;
    });
    const after = new NativeStorage({ url: sqliteFileUrl(path) });
    try {
      assert.equal(await after.getMaxCommitSeq('p1'), 1);
    } finally {
      await after.close();
    }
    // A file a storage opened (meta layout, no rows) is empty.
    const fresh = tempDbPath();
    const opened = new NativeStorage({ url: sqliteFileUrl(fresh) });
    await opened.ping();
    await opened.close();
    assert.equal((await pkg.copyStorage(url, sqliteFileUrl(fresh), { schema, verify: true })).verify.equal, true);
  });

  test('bad urls and options are refused with codes, before anything is written', async () => {
    const { url, schema, d } = await pgWithData();
    const path = tempDbPath();
    const codeOf = async (promise) => {
      try {
        await promise;
      } catch (err) {
        return err.code;
      }
      return 'resolved';
    };
    try {
      assert.equal(await codeOf(pkg.copyStorage(url, 'sqlite::memory:', { schema })), 'ERR_SYNCULAR_COPY_UNSUPPORTED');
      assert.equal(await codeOf(pkg.copyStorage(url, `mysql:${path}`, { schema })), 'ERR_SYNCULAR_INVALID_ARGUMENT');
      assert.equal(await codeOf(pkg.copyStorage(url, sqliteFileUrl(path), { schema: 'syncular_no_such_schema' })), 'ERR_SYNCULAR_COPY_SOURCE');
      assert.equal(await codeOf(pkg.copyStorage(url, sqliteFileUrl(path), { schema, resume: true })), 'ERR_SYNCULAR_COPY_UNSUPPORTED');
      assert.equal(await codeOf(pkg.copyStorage(url, sqliteFileUrl(path), { schema, verifyOnly: true })), 'ERR_SYNCULAR_COPY_TARGET');
      assert.equal(await codeOf(d.copyTo(sqliteFileUrl(path), { finalPass: true })), 'ERR_SYNCULAR_COPY_UNSUPPORTED');
      assert.equal(await codeOf(d.copyTo(sqliteFileUrl(path), { schema })), 'ERR_SYNCULAR_INVALID_ARGUMENT');
      assert.equal(await codeOf(d.copyTo(url, {})), 'ERR_SYNCULAR_COPY_UNSUPPORTED');
      const refused = new URL(url);
      refused.port = '1';
      const code = await codeOf(pkg.copyStorage(refused.href, sqliteFileUrl(path), { schema }));
      assert.ok(typeof code === 'string' && code !== 'resolved', `connection refused: ${code}`);
      assert.equal(existsSync(path), false, 'nothing was written');
    } finally {
      await d.close();
    }
  });

  test('the command copies and verifies; a second run, --resume and a changed copy exit non-zero', async () => {
    const { url, schema, d } = await pgWithData();
    const want = await reads(d);
    await d.close();
    const path = tempDbPath();
    const out = spawnSync(process.execPath, [BIN, 'copy', url, '--schema', schema, sqliteFileUrl(path), '--verify'], { encoding: 'utf8' });
    assert.equal(out.status, 0, out.stderr);
    assert.equal(JSON.parse(out.stdout).verify.equal, true);
    const again = spawnSync(process.execPath, [BIN, 'copy', url, sqliteFileUrl(path), '--schema', schema], { encoding: 'utf8' });
    assert.equal(again.status, 3);
    assert.match(again.stderr, /ERR_SYNCULAR_COPY_TARGET_NOT_EMPTY/);
    const resume = spawnSync(process.execPath, [BIN, 'copy', url, sqliteFileUrl(tempDbPath()), '--schema', schema, '--resume'], { encoding: 'utf8' });
    assert.equal(resume.status, 3);
    assert.match(resume.stderr, /ERR_SYNCULAR_COPY_UNSUPPORTED: resume is not supported when copying from PostgreSQL/);
    const s = new NativeStorage({ url: sqliteFileUrl(path) });
    try {
      await s.ensureSchema(fixtureSchema());
      assert.deepStrictEqual(norm(await reads(s)), norm(want));
      s.db.exec("DELETE FROM tasks WHERE _sync_partition = 'p2' AND _sync_row_id = 't5'");
    } finally {
      await s.close();
    }
    const v = spawnSync(process.execPath, [BIN, 'copy', url, sqliteFileUrl(path), '--schema', schema, '--verify-only'], { encoding: 'utf8' });
    assert.equal(v.status, 1, v.stderr);
    assert.match(v.stderr, /first difference in tasks, partition "p2": missing in target at \{"_sync_partition":"p2","_sync_row_id":"t5"\}/);
  });

  test('a copy killed during its load leaves the file empty, and runs again', async () => {
    const { url, schema, d } = await pgWithData();
    await d.close();
    // Enough rows that the load is still running when the first report
    // of a table reaches the parent.
    const psql = new Psql(url, { schema });
    await psql.exec("INSERT INTO sync_tombstones (partition, tbl, row_id, commit_seq) SELECT 'p9', 'tasks', 'r' || g, g FROM generate_series(1, 300000) g");
    const [{ n: tombstones }] = await psql.query('SELECT count(*)::int AS n FROM sync_tombstones');
    psql.close();
    const path = tempDbPath();
    const child = spawn(process.execPath, [BIN, 'copy', url, sqliteFileUrl(path), '--schema', schema], { stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr.once('data', () => child.kill('SIGKILL'));
    const [, signal] = await new Promise((resolve) => child.once('exit', (c, sg) => resolve([c, sg])));
    assert.equal(signal, 'SIGKILL');
    // Killed inside the load's transaction: its journal is left behind,
    // and the next open rolls it back.
    assert.equal(existsSync(`${path}-journal`), true, 'a hot journal');
    const s = new NativeStorage({ url: sqliteFileUrl(path) });
    try {
      assert.deepEqual(rows(s, 'SELECT (SELECT count(*) FROM sync_commits) AS commits, (SELECT count(*) FROM sync_tombstones) AS tombstones'), [{ commits: 0, tombstones: 0 }]);
      assert.deepEqual(rows(s, "SELECT name FROM sqlite_master WHERE name = 'tasks'"), []);
    } finally {
      await s.close();
    }
    const report = await pkg.copyStorage(url, sqliteFileUrl(path), { schema, verify: true });
    assert.equal(report.verify.equal, true, JSON.stringify(report.verify.firstDifference));
    assert.equal(report.tables.find((t) => t.table === 'sync_tombstones').rows, tombstones);
  });
});

describe('copy: PostgreSQL to SQLite through upstream\'s handler', () => {
  const hskip = hostTest.skip ?? (pg === undefined ? 'needs SYNCULAR_TEST_PG_URL' : undefined);
  test('a host on the copy answers the same pulls byte for byte from SQLite, and writes on', { skip: hskip }, async (t) => {
    const url = pg.requireUrl();
    const result = await runHost('copy-reverse.ts', [tempDbPath(), freshPgSchema()], { env: { SYNCULAR_TEST_PG_URL: url } });
    t.diagnostic(JSON.stringify(result));
    assert.equal(result.verify, true);
    assert.ok(result.requests >= 20, `${result.requests} answers compared`);
    assert.equal(result.identical, true, `answer ${result.firstDiff} differs`);
    assert.equal(result.commits.after, result.commits.before);
    assert.equal(result.commits.source, result.commits.before + 1, 'the write after the snapshot');
    assert.equal(result.commits.final, result.commits.before + 5);
  });
});
