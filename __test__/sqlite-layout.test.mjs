// SQLite only: the physical layout and stored formats that must match the
// in-tree SqliteServerStorage (storage-layout.md §2–§5, §8, §10, §12, §14.6),
// and refusals that need a hand-modified database file.
import assert from 'node:assert/strict';
import { copyFileSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { tempDbPath, sqliteFileUrl } from './support/engines.mjs';
import { NativeStorage, StorageQueryError, SyncError } from './support/package.mjs';
import { exec, noShell, query, sqliteCliAvailable } from './support/sqlite-cli.mjs';
import { TIME_SCALE } from './support/emulation.mjs';
import { withOwnLoopGap } from './support/machine-gaps.mjs';
import { accountsTable, col, fixtureSchema, schema, table, tasksTable, notesTable } from './support/schema.mjs';
import { accountRow, hostPush, noteRow, rejectsQueryError, taskRow, writeCommit } from './support/harness.mjs';
import { hostErrors, HostSyncError } from './contract/errors.mjs';

if (!noShell) assert.ok(sqliteCliAvailable(), 'these tests need the sqlite3 command-line shell on PATH');

async function withFile(fn, opts = {}) {
  const path = tempDbPath();
  const storage = new NativeStorage({ url: sqliteFileUrl(path), ...opts });
  try {
    return await fn(storage, path);
  } finally {
    await storage.close();
  }
}

const fixture = (name) => new URL(`./fixtures/${name}`, import.meta.url);
const masterRows = (path) => query(path, 'SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid');

function reopen(path, opts = {}) {
  return new NativeStorage({ url: sqliteFileUrl(path), ...opts });
}

describe('sqlite physical layout', { skip: noShell }, () => {
  test('meta tables exist with the documented names', () =>
    withFile(async (storage, path) => {
      await storage.ensureSchema(fixtureSchema());
      await storage.close();
      const names = new Set(query(path, "SELECT name FROM sqlite_master WHERE type = 'table'").map((r) => r.name));
      for (const name of [
        'sync_partitions', 'sync_partition_registry', 'sync_commits', 'sync_changes', 'sync_change_scopes',
        'sync_row_scopes', 'sync_push_results', 'sync_clients', 'sync_blob_refs', 'sync_reactions',
        'sync_schema_meta', 'sync_tombstones', 'sync_backfill_checkpoints', 'sync_writer_fence',
        'tasks', 'accounts', 'notes',
      ]) {
        assert.ok(names.has(name), `table ${name}`);
      }
      const triggers = query(path, "SELECT name FROM sqlite_master WHERE type = 'trigger'").map((r) => r.name);
      assert.ok(triggers.includes('sync_commits_writer_fence'));
    }));

  // The text too: SQLite keeps each CREATE statement as written, and the
  // storage renders it from src/core/meta_layout.rs (issue 49).
  test('a new file holds the meta layout byte for byte as recorded', () =>
    withFile(async (storage, path) => {
      await storage.getMaxCommitSeq('p1');
      await storage.close();
      const recorded = JSON.parse(readFileSync(fixture('meta-layout-sqlite.json'), 'utf8'));
      assert.deepEqual(masterRows(path), recorded.objects);
    }));

  test('an in-tree 0.15.48 file keeps its meta text; what the open adds is as a new file has it', async () => {
    const path = tempDbPath();
    copyFileSync(fixture('intree-0.15.48.db'), path);
    const before = masterRows(path);
    const storage = reopen(path);
    try {
      await storage.getMaxCommitSeq('p1');
    } finally {
      await storage.close();
    }
    const after = new Map(masterRows(path).map((r) => [r.name, r]));
    for (const r of before) {
      // SQLite writes an added column after the last one in the text.
      const sql = r.name === 'sync_commits' ? r.sql.replace('created_at_ms INTEGER NOT NULL,', 'created_at_ms INTEGER NOT NULL, writer_version INTEGER,') : r.sql;
      assert.deepEqual(after.get(r.name), { ...r, sql }, r.name);
      after.delete(r.name);
    }
    const recorded = new Map(JSON.parse(readFileSync(fixture('meta-layout-sqlite.json'), 'utf8')).objects.map((r) => [r.name, r]));
    // Entries exist: the row scope index is left to ensureSchema.
    assert.deepEqual([...after.keys()].filter((n) => !n.startsWith('sqlite_autoindex_')), ['sync_tombstones', 'sync_backfill_checkpoints', 'sync_writer_fence', 'sync_commits_writer_fence']);
    for (const [name, r] of after) assert.deepEqual(r, recorded.get(name), name);
  });

  test('row tables: meta columns around the projection; non-materialized tables have only meta columns', () =>
    withFile(async (storage, path) => {
      await storage.ensureSchema(fixtureSchema());
      await storage.close();
      const cols = (t) => query(path, `SELECT name, type, "notnull" AS nn, pk FROM pragma_table_info('${t}') ORDER BY cid`);
      const tasks = cols('tasks');
      assert.deepEqual(
        tasks.map((c) => c.name),
        ['_sync_partition', '_sync_row_id', 'id', 'project_id', 'owner_id', 'title', 'done', 'count', 'score', 'meta', 'data', 'file', '_sync_server_version', '_sync_scopes', '_sync_payload', '_sync_column_versions'],
      );
      const byName = Object.fromEntries(tasks.map((c) => [c.name, c]));
      assert.equal(byName._sync_partition.pk, 1);
      assert.equal(byName._sync_row_id.pk, 2);
      assert.equal(byName._sync_column_versions.nn, 0);
      assert.equal(byName._sync_payload.nn, 1);
      assert.equal(byName.count.nn, 0);
      assert.equal(byName.title.nn, 1);
      const types = Object.fromEntries(tasks.map((c) => [c.name, c.type.toUpperCase()]));
      assert.deepEqual(
        { title: types.title, done: types.done, count: types.count, score: types.score, meta: types.meta, data: types.data, file: types.file, payload: types._sync_payload, version: types._sync_server_version },
        { title: 'TEXT', done: 'INTEGER', count: 'INTEGER', score: 'REAL', meta: 'TEXT', data: 'BLOB', file: 'TEXT', payload: 'BLOB', version: 'INTEGER' },
      );
      assert.deepEqual(
        cols('notes').map((c) => c.name),
        ['_sync_partition', '_sync_row_id', '_sync_server_version', '_sync_scopes', '_sync_payload', '_sync_column_versions'],
      );
    }));

  test('user indexes: sync_ix_ names, partition-prefixed, hashed when long, absent on non-materialized tables', () =>
    withFile(async (storage, path) => {
      const longName = `idx_${'y'.repeat(60)}`;
      await storage.ensureSchema(
        schema(1, [tasksTable(), accountsTable({ indexes: [{ name: 'accounts_email', columns: ['email'], unique: true }, { name: longName, columns: ['org_id', 'email'] }] }), notesTable()]),
      );
      await storage.close();
      const indexList = (t) => query(path, `SELECT name, "unique" AS u, origin FROM pragma_index_list('${t}') WHERE origin = 'c'`);
      const info = (ix) => query(path, `SELECT name FROM pragma_index_info('${ix}') ORDER BY seqno`).map((r) => r.name);
      const accounts = Object.fromEntries(indexList('accounts').map((r) => [r.name, r]));
      assert.ok(accounts.sync_ix_accounts_email, 'sync_ix_accounts_email');
      assert.equal(accounts.sync_ix_accounts_email.u, 1);
      assert.deepEqual(info('sync_ix_accounts_email'), ['_sync_partition', 'email']);
      // FNV-1a 64 of the declared name
      let h = 0xcbf29ce484222325n;
      for (const byte of Buffer.from(longName, 'utf8')) {
        h ^= BigInt(byte);
        h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
      }
      const hashed = `sync_ix_${h.toString(16).padStart(16, '0')}`;
      assert.ok(accounts[hashed], `expected ${hashed}, got ${Object.keys(accounts)}`);
      assert.equal(accounts[hashed].u, 0);
      assert.deepEqual(info(hashed), ['_sync_partition', 'org_id', 'email']);
      assert.deepEqual(indexList('notes'), []);
      const tasks = indexList('tasks').map((r) => r.name);
      assert.deepEqual(tasks, ['sync_ix_tasks_by_title']);
    }));

  test('schema marker: version and layouts JSON in schema order', () =>
    withFile(async (storage, path) => {
      const s = fixtureSchema(4);
      await storage.ensureSchema(s);
      await storage.close();
      const [meta] = query(path, 'SELECT id, schema_version, layouts FROM sync_schema_meta');
      assert.equal(meta.id, 1);
      assert.equal(meta.schema_version, 4);
      const expected = {};
      for (const [name, t] of s.tables) expected[name] = t.columns.map((c) => ({ name: c.name, type: c.type, nullable: c.nullable }));
      assert.equal(meta.layouts, JSON.stringify(expected));
    }));

  test('commit log, scope index, tombstones, rows and push result are stored in the documented formats', () =>
    withFile(async (storage, path) => {
      await storage.ensureSchema(fixtureSchema(2));
      const row = taskRow('r1', { project: 'p1', owner: 'u1' }, { version: 5, columnVersions: Uint8Array.of(2, 5) });
      await hostPush(storage, 'p1', { clientId: 'c1', clientCommitId: 'cc1', createdAtMs: 1234, actorId: 'actor-9', ops: [{ table: 'tasks', row }] });
      await writeCommit(storage, 'p1', [{ table: 'tasks', delete: 'r1', scopes: { project_id: 'p1', owner_id: 'u1' } }], { createdAtMs: 1300 });
      await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('r2') }]);
      const tx = await storage.begin('p1');
      await tx.lockPartitionForPush();
      await tx.putPushResult('c1', 'conflict', {
        status: 'applied',
        commitSeq: 9,
        recordedAtMs: 77,
        cacheIdentity: 'id-1',
        results: [
          { opIndex: 0, status: 'conflict', code: 'sync.conflict', message: 'm', serverVersion: 2, serverRow: Uint8Array.of(1, 2, 3), conflictColumns: Uint8Array.of(255) },
          { opIndex: 1, status: 'error', code: 'sync.x', message: 'y', retryable: true, details: { a: 1 } },
        ],
      });
      await tx.setBlobRefs('tasks', 'r2', ['sha256:b', 'sha256:a', 'sha256:a']);
      await tx.commit();
      await storage.close();

      assert.deepEqual(query(path, 'SELECT partition, max_commit_seq, horizon_seq FROM sync_partitions'), [{ partition: 'p1', max_commit_seq: 3, horizon_seq: 0 }]);
      const commits = query(path, 'SELECT commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version FROM sync_commits ORDER BY commit_seq');
      assert.deepEqual(commits[0], { commit_seq: 1, client_id: 'c1', client_commit_id: 'cc1', actor_id: 'actor-9', created_at_ms: 1234, writer_version: 2 });
      assert.equal(commits.length, 3);
      const changes = query(path, 'SELECT commit_seq, idx, tbl, row_id, op, row_version, scopes, hex(payload) AS payload FROM sync_changes ORDER BY commit_seq, idx');
      assert.deepEqual(changes[0], {
        commit_seq: 1, idx: 0, tbl: 'tasks', row_id: 'r1', op: 1, row_version: 5,
        scopes: JSON.stringify({ project_id: 'p1', owner_id: 'u1' }),
        payload: Buffer.from(row.payload).toString('hex').toUpperCase(),
      });
      assert.deepEqual(changes[1], { commit_seq: 2, idx: 0, tbl: 'tasks', row_id: 'r1', op: 2, row_version: null, scopes: JSON.stringify({ project_id: 'p1', owner_id: 'u1' }), payload: '' });
      const changeScopes = query(path, "SELECT tbl, var, value, commit_seq FROM sync_change_scopes WHERE commit_seq = 1 ORDER BY var");
      assert.deepEqual(changeScopes, [
        { tbl: 'tasks', var: 'owner_id', value: 'u1', commit_seq: 1 },
        { tbl: 'tasks', var: 'project_id', value: 'p1', commit_seq: 1 },
      ]);
      assert.deepEqual(query(path, 'SELECT partition, tbl, row_id, commit_seq FROM sync_tombstones'), [{ partition: 'p1', tbl: 'tasks', row_id: 'r1', commit_seq: 2 }]);
      const rows = query(path, 'SELECT _sync_row_id AS id, _sync_server_version AS v, _sync_scopes AS s, title, done, hex(_sync_column_versions) AS cv FROM tasks');
      assert.deepEqual(rows, [{ id: 'r2', v: 1, s: JSON.stringify({ project_id: 'p1', owner_id: 'u1' }), title: 'title r2', done: 0, cv: '' }]);
      assert.deepEqual(query(path, "SELECT var, value, row_id FROM sync_row_scopes WHERE tbl = 'tasks' ORDER BY var"), [
        { var: 'owner_id', value: 'u1', row_id: 'r2' },
        { var: 'project_id', value: 'p1', row_id: 'r2' },
      ]);
      assert.deepEqual(query(path, 'SELECT tbl, row_id, blob_id FROM sync_blob_refs ORDER BY blob_id'), [
        { tbl: 'tasks', row_id: 'r2', blob_id: 'sha256:a' },
        { tbl: 'tasks', row_id: 'r2', blob_id: 'sha256:b' },
      ]);
      const [conflict] = query(path, "SELECT result FROM sync_push_results WHERE client_commit_id = 'conflict'");
      assert.equal(
        conflict.result,
        '{"status":"applied","commitSeq":9,"recordedAtMs":77,"cacheIdentity":"id-1","results":[' +
          '{"opIndex":0,"status":"conflict","code":"sync.conflict","message":"m","serverVersion":2,"serverRow":"AQID","conflictColumns":"/w=="},' +
          '{"opIndex":1,"status":"error","code":"sync.x","message":"y","retryable":true,"details":{"a":1}}]}',
      );
    }));

  test('client records, registry and horizon columns', () =>
    withFile(async (storage, path) => {
      await storage.touchPartition('p1', 55, 'ep');
      await storage.setHorizonSeq('p1', 4);
      const subs = [{ id: 's', table: 'tasks', scopes: { project_id: ['a', 'b'] } }, { id: 'v', table: 'notes', scopes: { project_id: [] }, schemaVersion: 4 }];
      await storage.putClientRecord('p1', { clientId: 'c', actorId: 'u', wireVersion: 3, cursor: 9, updatedAtMs: 99, subscriptions: subs });
      await storage.close();
      assert.deepEqual(query(path, 'SELECT partition, log_epoch, epoch_required, last_authenticated_at_ms FROM sync_partition_registry'), [
        { partition: 'p1', log_epoch: 'ep', epoch_required: 0, last_authenticated_at_ms: 55 },
      ]);
      assert.deepEqual(query(path, "SELECT horizon_seq FROM sync_partitions WHERE partition = 'p1'"), [{ horizon_seq: 4 }]);
      assert.deepEqual(query(path, 'SELECT partition, client_id, actor_id, wire_version, cursor, subscriptions, updated_at_ms FROM sync_clients'), [
        { partition: 'p1', client_id: 'c', actor_id: 'u', wire_version: 3, cursor: 9, subscriptions: JSON.stringify(subs), updated_at_ms: 99 },
      ]);
    }));

  test('deleteRow removes the row, its scope entries and its blob refs', () =>
    withFile(async (storage, path) => {
      await storage.ensureSchema(fixtureSchema());
      const tx = await storage.begin('p1');
      await tx.lockPartitionForPush();
      await tx.upsertRow('tasks', taskRow('r1'));
      await tx.setBlobRefs('tasks', 'r1', ['sha256:x']);
      await tx.upsertRow('tasks', taskRow('r2'));
      await tx.setBlobRefs('tasks', 'r2', ['sha256:y']);
      await tx.commit();
      const tx2 = await storage.begin('p1');
      await tx2.lockPartitionForPush();
      await tx2.deleteRow('tasks', 'r1');
      await tx2.setBlobRefs('tasks', 'r2', []);
      await tx2.commit();
      await storage.close();
      assert.deepEqual(query(path, 'SELECT row_id FROM sync_row_scopes').map((r) => r.row_id), ['r2', 'r2']);
      assert.deepEqual(query(path, 'SELECT * FROM sync_blob_refs'), []);
    }));
});

describe('sqlite layout repair on a large file', { skip: noShell }, () => {
  // Issue 48: the first ensureSchema on a file another version wrote may
  // rebuild a declared index over every row. That runs on a worker: the
  // event loop keeps turning (it stalled for the whole repair before, 1.5 s
  // on a 928 MB in-tree file), and a reader of the file is never refused.
  test('ensureSchema repairs a missing index over 600k rows without stalling the event loop', async () => {
    const v1 = schema(1, [table('items', [col('id', 'string'), col('title', 'string')], { indexes: [{ name: 'items_by_title', columns: ['title'] }] })]);
    const path = tempDbPath();
    const a = reopen(path);
    await a.ensureSchema(v1);
    await a.close();
    // Rows written straight into the layout, then the index dropped: the
    // next ensureSchema must build it again.
    exec(
      path,
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 600000)
       INSERT INTO items (_sync_partition, _sync_row_id, _sync_server_version, _sync_scopes, _sync_payload, id, title)
       SELECT 'p' || (i % 50), 'r' || i, 1, '{}', x'', 'r' || i, hex(randomblob(12)) FROM n;
       DROP INDEX sync_ix_items_by_title;`,
    );
    const b = reopen(path);
    try {
      const { took, worst, own } = await withOwnLoopGap(() => b.ensureSchema(v1));
      assert.deepEqual(query(path, "SELECT count(*) AS n FROM pragma_index_list('items') WHERE name = 'sync_ix_items_by_title'"), [{ n: 1 }]);
      // The timer kept firing while the index was built (the repair took
      // `took` ms), apart from stalls another process's timer saw too (the
      // machine's, support/machine-gaps.mjs); a debug build or an emulated
      // CPU gets its scale.
      assert.ok(own < 100 * TIME_SCALE, `the event loop stalled ${worst.toFixed(0)} ms (${own.toFixed(0)} ms of it while another process's loop turned) during a ${took.toFixed(0)} ms repair`);
      // The storage serves as before.
      assert.equal(await b.getMaxCommitSeq('p1'), 0);
    } finally {
      await b.close();
    }
  });
});

describe('sqlite schema bumps', { skip: noShell }, () => {
  test('declared indexes are rebuilt on a bump; operator indexes with other names survive', async () => {
    const path = tempDbPath();
    const a = reopen(path);
    await a.ensureSchema(schema(1, [accountsTable()]));
    await a.close();
    exec(path, 'CREATE INDEX ops_custom ON accounts (org_id); CREATE INDEX sync_ix_stale ON accounts (email)');
    const b = reopen(path);
    try {
      await b.ensureSchema(schema(2, [accountsTable({ indexes: [{ name: 'accounts_mail', columns: ['email'], unique: true }] })]));
    } finally {
      await b.close();
    }
    const names = query(path, "SELECT name FROM pragma_index_list('accounts') WHERE origin = 'c'").map((r) => r.name).sort();
    assert.deepEqual(names, ['ops_custom', 'sync_ix_accounts_mail']);
  });

  test('a retired table is dropped with its row-scope entries and blob refs', async () => {
    const path = tempDbPath();
    const a = reopen(path);
    await a.ensureSchema(schema(1, [tasksTable(), notesTable()]));
    const tx = await a.begin('p1');
    await tx.lockPartitionForPush();
    await tx.upsertRow('notes', noteRow('n1', 'p1', 'x'));
    await tx.setBlobRefs('notes', 'n1', ['sha256:n']);
    await tx.upsertRow('tasks', taskRow('t1'));
    await tx.setBlobRefs('tasks', 't1', ['sha256:t']);
    await tx.commit();
    await a.ensureSchema(schema(2, [tasksTable()]));
    await a.close();
    assert.deepEqual(query(path, "SELECT name FROM sqlite_master WHERE name = 'notes'"), []);
    assert.deepEqual(query(path, 'SELECT DISTINCT tbl FROM sync_row_scopes'), [{ tbl: 'tasks' }]);
    assert.deepEqual(query(path, 'SELECT tbl, blob_id FROM sync_blob_refs'), [{ tbl: 'tasks', blob_id: 'sha256:t' }]);
    const [meta] = query(path, 'SELECT schema_version, layouts FROM sync_schema_meta');
    assert.equal(meta.schema_version, 2);
    assert.deepEqual(Object.keys(JSON.parse(meta.layouts)), ['tasks']);
  });

  test('scanRows pages in SQLite BINARY (UTF-8 byte) order of row ids', async () => {
    const path = tempDbPath();
    const a = reopen(path);
    try {
      await a.ensureSchema(fixtureSchema());
      const ids = ['é', 'a', '_', 'B', 'Z', '\u{1F600}', '\uFFFD', '0'];
      await writeCommit(a, 'p1', ids.map((id) => ({ table: 'tasks', row: taskRow(id) })));
      const byteOrder = [...ids].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
      const got = [];
      let after = null;
      for (;;) {
        const page = await a.scanRows('p1', { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterRowId: after, limit: 3 });
        got.push(...page.map((r) => r.rowId));
        if (page.length < 3) break;
        after = page.at(-1).rowId;
      }
      assert.deepEqual(got, byteOrder);
    } finally {
      await a.close();
    }
  });
});

describe('sqlite hand-modified databases', { skip: noShell }, () => {
  test('an unreadable push result → SyncError sync.idempotency_cache_miss (package and host class)', async () => {
    const path = tempDbPath();
    const a = reopen(path);
    await a.ensureSchema(fixtureSchema());
    const tx = await a.begin('p1');
    await tx.lockPartitionForPush();
    await tx.putPushResult('c1', 'bad-json', { status: 'applied', commitSeq: 1, results: [] });
    await tx.putPushResult('c1', 'no-results', { status: 'applied', commitSeq: 1, results: [] });
    await tx.commit();
    await a.close();
    exec(path, "UPDATE sync_push_results SET result = 'not json{' WHERE client_commit_id = 'bad-json'");
    exec(path, `UPDATE sync_push_results SET result = '{"status":"applied"}' WHERE client_commit_id = 'no-results'`);

    const b = reopen(path);
    try {
      for (const id of ['bad-json', 'no-results']) {
        const e = await b.getPushResult('p1', 'c1', id).then(() => assert.fail('expected cache miss'), (err) => err);
        assert.ok(e instanceof SyncError, `got ${e?.constructor?.name}: ${e?.message}`);
        assert.equal(e.code, 'sync.idempotency_cache_miss');
      }
      const t = await b.begin('p1');
      await t.lockPartitionForPush();
      const e2 = await t.getPushResult('c1', 'bad-json').then(() => assert.fail('expected cache miss'), (err) => err);
      assert.ok(e2 instanceof SyncError);
      assert.equal(e2.code, 'sync.idempotency_cache_miss');
      await t.rollback();
    } finally {
      await b.close();
    }
    const c = reopen(path, { errors: hostErrors });
    try {
      const e = await c.getPushResult('p1', 'c1', 'bad-json').then(() => assert.fail('expected cache miss'), (err) => err);
      assert.ok(e instanceof HostSyncError, `got ${e?.constructor?.name}`);
      assert.equal(e.code, 'sync.idempotency_cache_miss');
      assert.equal(await c.getPushResult('p1', 'c1', 'absent'), undefined);
    } finally {
      await c.close();
    }
  });

  test('vanished commit rows and vanished app rows are skipped while paging continues', async () => {
    const path = tempDbPath();
    const a = reopen(path);
    await a.ensureSchema(fixtureSchema());
    for (let i = 0; i < 70; i++) await writeCommit(a, 'p1', [{ table: 'tasks', row: taskRow(`r${String(i).padStart(3, '0')}`) }]);
    await a.close();
    exec(path, "DELETE FROM sync_commits WHERE commit_seq IN (2, 65); DELETE FROM tasks WHERE _sync_row_id IN ('r001', 'r064')");
    const b = reopen(path);
    try {
      await b.ensureSchema(fixtureSchema());
      const w = await b.readCommitWindow('p1', { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterSeq: 0, throughSeq: 100, limitChanges: 1000 });
      const seqs = w.map((c) => c.commitSeq);
      assert.equal(seqs.length, 68);
      assert.ok(!seqs.includes(2) && !seqs.includes(65) && seqs.includes(70));
      const rows = await b.scanRows('p1', { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterRowId: null, limit: 1000 });
      const ids = rows.map((r) => r.rowId);
      assert.equal(ids.length, 68);
      assert.ok(!ids.includes('r001') && !ids.includes('r064') && ids.includes('r069'));
      const page = await b.scanRows('p1', { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterRowId: 'r000', limit: 2 });
      assert.deepEqual(page.map((r) => r.rowId), ['r002', 'r003']);
    } finally {
      await b.close();
    }
  });

  test('missing per-record fields read back with defaults', async () => {
    const path = tempDbPath();
    const a = reopen(path);
    await a.touchPartition('p1', 1, 'e');
    await a.close();
    exec(
      path,
      `INSERT INTO sync_push_results (partition, client_id, client_commit_id, result) VALUES ('p1', 'c', 'sparse', '{"status":"applied","results":[{"opIndex":0,"status":"conflict"},{"opIndex":1,"status":"error"},{"opIndex":2,"status":"weird","code":"x"}]}')`,
    );
    const b = reopen(path);
    try {
      const r = await b.getPushResult('p1', 'c', 'sparse');
      assert.equal(r.status, 'applied');
      assert.equal('commitSeq' in r, false);
      const [conflict, error, other] = r.results;
      assert.equal(conflict.code, '');
      assert.equal(conflict.message, '');
      assert.equal(conflict.serverVersion, 0);
      assert.equal(conflict.serverRow.length, 0);
      assert.equal(conflict.conflictColumns.length, 0);
      assert.equal(error.retryable, false);
      assert.equal('details' in error, false);
      assert.deepEqual({ ...other }, { opIndex: 2, status: 'applied' });
    } finally {
      await b.close();
    }
  });

  test('same version with a physically missing column or table → physical_layout_mismatch', async () => {
    const items = schema(1, [table('items', [col('id', 'string'), col('title', 'string')]), table('extra', [col('id', 'string')])]);
    const path = tempDbPath();
    const a = reopen(path);
    await a.ensureSchema(items);
    await a.close();
    exec(path, 'ALTER TABLE items DROP COLUMN title');
    const b = reopen(path);
    try {
      const e = await rejectsQueryError(b.ensureSchema(items), 'sync.storage.physical_layout_mismatch');
      assert.equal(e.details.table, 'items');
      assert.equal(e.details.reason, 'missing_column');
      assert.equal(e.details.column, 'title');
      assert.match(e.details.fix, /bump the schema version/);
    } finally {
      await b.close();
    }
    exec(path, 'DROP TABLE extra');
    exec(path, 'ALTER TABLE items ADD COLUMN title TEXT');
    const c = reopen(path);
    try {
      const e = await rejectsQueryError(c.ensureSchema(items), 'sync.storage.physical_layout_mismatch');
      assert.equal(e.details.table, 'extra');
      assert.equal(e.details.reason, 'missing_table');
      assert.ok(e instanceof StorageQueryError);
    } finally {
      await c.close();
    }
  });

  test('same version: a missing _sync_column_versions (an in-tree 0.15.48 table) is added in place', async () => {
    const v1 = schema(1, [table('items', [col('id', 'string'), col('title', 'string')])]);
    const path = tempDbPath();
    const a = reopen(path);
    await a.ensureSchema(v1);
    await a.close();
    exec(path, 'ALTER TABLE items DROP COLUMN _sync_column_versions');
    const b = reopen(path);
    try {
      await b.ensureSchema(v1);
      const tx = await b.begin('p1');
      await tx.lockPartitionForPush();
      const { encodeRow } = await import('./support/codec.mjs');
      await tx.upsertRow('items', { rowId: 'i', serverVersion: 2, scopes: {}, payload: encodeRow(v1.tables.get('items').columns, { id: 'i', title: 't' }), columnVersions: Uint8Array.of(1, 2) });
      await tx.commit();
      assert.deepEqual([...(await b.getRow('p1', 'items', 'i')).columnVersions], [1, 2]);
    } finally {
      await b.close();
    }
    assert.deepEqual(query(path, "SELECT schema_version AS v FROM sync_schema_meta"), [{ v: 1 }]);
  });

  test('a schema bump adds a missing _sync_column_versions column', async () => {
    const v1 = schema(1, [table('items', [col('id', 'string'), col('title', 'string')])]);
    const v2 = schema(2, [table('items', [col('id', 'string'), col('title', 'string')])]);
    const path = tempDbPath();
    const a = reopen(path);
    await a.ensureSchema(v1);
    await a.close();
    exec(path, 'ALTER TABLE items DROP COLUMN _sync_column_versions');
    const b = reopen(path);
    try {
      await b.ensureSchema(v2);
      const tx = await b.begin('p1');
      await tx.lockPartitionForPush();
      const { encodeRow } = await import('./support/codec.mjs');
      await tx.upsertRow('items', { rowId: 'i', serverVersion: 2, scopes: {}, payload: encodeRow(v2.tables.get('items').columns, { id: 'i', title: 't' }), columnVersions: Uint8Array.of(1, 2) });
      await tx.commit();
      assert.deepEqual([...(await b.getRow('p1', 'items', 'i')).columnVersions], [1, 2]);
    } finally {
      await b.close();
    }
  });
});
