// Moving a SQLite database to PostgreSQL (issue 51, docs/copy.md): state
// written through the real storage (several partitions, declared indexes,
// push results, clients, reactions, checkpoints, a pruned horizon, a
// rotated epoch, tombstones) is copied with `storage.copyTo`; verify
// finds the two equal; the PostgreSQL storage opened on the copy takes
// `ensureSchema` without a migration and answers every read as the SQLite
// one does. A target holding sync data is refused; a changed target row
// is the first difference verify names; the command does the same.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { engines, freshPgSchema, sqliteFileUrl, tempDbPath } from './support/engines.mjs';
import { NativeStorage, pkg } from './support/package.mjs';
import { hostPush, norm, taskRow } from './support/harness.mjs';
import { NOW, populate, reads, sorted } from './support/copy-state.mjs';
import { fixtureSchema } from './support/schema.mjs';
import { Psql } from '../stress/lib/sql.mjs';
import { copyFileSync } from 'node:fs';
import { FIXTURE_DB, assertInTreeReads, compile, expected } from './support/intree.mjs';
import { hostTest, runHost } from './support/upstream.mjs';

const pg = engines.find((e) => e.name === 'postgres');
const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'syncular-native-storage.mjs');

async function sourceWithData() {
  const path = tempDbPath();
  const s = new NativeStorage({ url: sqliteFileUrl(path) });
  await populate(s);
  return { path, s };
}

describe('copy: SQLite to PostgreSQL', { skip: pg === undefined ? 'needs SYNCULAR_TEST_PG_URL' : false }, () => {
  test('copyTo carries the whole state; verify is equal; the PostgreSQL storage answers the same reads', async () => {
    const url = pg.requireUrl();
    const { s } = await sourceWithData();
    const schema = freshPgSchema();
    const before = await reads(s);
    const progress = [];
    const report = await s.copyTo(url, { schema, verify: true, onProgress: (p) => progress.push(p) });
    assert.equal(report.verify.equal, true, JSON.stringify(report.verify.firstDifference));
    assert.equal(report.verify.firstDifference, null);
    assert.ok(report.rows > 100, `rows copied: ${report.rows}`);
    const byTable = Object.fromEntries(report.tables.map((t) => [t.table, t.rows]));
    assert.equal(byTable.sync_commits, 3 * 14 - 4, 'p3 pruned through 4');
    assert.equal(byTable.tasks, 3 * 12 - 3, 'three deleted rows');
    assert.ok(progress.some((p) => p.phase === 'copy') && progress.some((p) => p.phase === 'verify'));
    const last = progress.filter((p) => p.phase === 'copy').at(-1);
    assert.equal(last.rows, last.rowsTotal);
    assert.ok(report.rowsPerSec > 0 && report.mbPerSec >= 0);

    const psql = new Psql(url, { schema });
    const d = new NativeStorage({ url, schema, maxConnections: 4 });
    try {
      // Same version, same layouts, complete layout: no migration and no
      // repair, so nothing of the copy changes.
      await d.ensureSchema(fixtureSchema());
      assert.equal((await s.copyTo(url, { schema, verifyOnly: true })).equal, true);
      assert.deepEqual(await psql.query("SELECT to_regclass('sync_native_replaced_indexes') IS NULL AS none"), [{ none: true }]);
      const indexes = await psql.query(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE 'sync_ix_%' ORDER BY 1",
      );
      assert.deepEqual(indexes.map((i) => i.indexname), ['sync_ix_accounts_email', 'sync_ix_tasks_by_title']);
      assert.match(indexes[0].indexdef, /UNIQUE INDEX .* \(_sync_partition, email\)/);
      const after = await reads(d);
      assert.deepStrictEqual(norm(after), norm(before));
      // As text, every value the same once object keys are sorted: JSONB
      // keeps an object's keys in its own order (shorter keys first), so a
      // scope map or stored JSON read back from PostgreSQL lists its keys
      // in that order, as it does for data the PostgreSQL engine wrote
      // itself (docs/copy.md, "What reads see").
      assert.equal(JSON.stringify(sorted(norm(after))), JSON.stringify(sorted(norm(before))));
      // The counters go on from where the source stopped (p3: p1 is fenced
      // for version 2 by its checkpoint, on both).
      const next = await hostPush(d, 'p3', { clientId: 'c-new', clientCommitId: 'k-new', ops: [{ table: 'tasks', row: taskRow('t99') }] });
      assert.equal(next.commitSeq, before.p3.max + 1);
      await assert.rejects(hostPush(d, 'p1', { clientId: 'c-new', clientCommitId: 'k-new', ops: [] }), /writer_fence_rejected/);
    } finally {
      await d.close();
      psql.close();
      await s.close();
    }
  });

  test('a target that holds sync data is refused, and changes nothing', async () => {
    const url = pg.requireUrl();
    const { s } = await sourceWithData();
    const schema = freshPgSchema();
    const other = new NativeStorage({ url, schema, maxConnections: 2 });
    await other.ensureSchema(fixtureSchema());
    await hostPush(other, 'p1', { clientId: 'x', clientCommitId: 'y', ops: [{ table: 'tasks', row: taskRow('t1') }] });
    await other.close();
    await assert.rejects(s.copyTo(url, { schema }), (err) => {
      assert.equal(err.code, 'ERR_SYNCULAR_COPY_TARGET_NOT_EMPTY', err.message);
      return true;
    });
    const psql = new Psql(url, { schema });
    try {
      assert.deepEqual(await psql.query('SELECT count(*)::int AS n FROM sync_commits'), [{ n: 1 }]);
    } finally {
      psql.close();
      await s.close();
    }
  });

  test('verify names the first difference: a changed row, a missing row', async () => {
    const url = pg.requireUrl();
    const { s, path } = await sourceWithData();
    const schema = freshPgSchema();
    await s.copyTo(url, { schema });
    const psql = new Psql(url, { schema });
    try {
      await psql.exec("UPDATE sync_changes SET scopes = '{\"project_id\":\"changed\"}' WHERE partition = 'p2' AND commit_seq = 7 AND idx = 0");
      let v = await s.copyTo(url, { schema, verifyOnly: true });
      assert.equal(v.equal, false);
      assert.deepEqual(
        { table: v.firstDifference.table, partition: v.firstDifference.partition, kind: v.firstDifference.kind, key: v.firstDifference.key },
        { table: 'sync_changes', partition: 'p2', kind: 'differs', key: { partition: 'p2', commit_seq: 7, idx: 0 } },
      );
      await psql.exec("DELETE FROM tasks WHERE _sync_partition = 'p1' AND _sync_row_id = 't5'");
      // Meta tables come first in the report's order.
      v = await s.copyTo(url, { schema, verifyOnly: true });
      assert.equal(v.firstDifference.table, 'sync_changes');
      await psql.exec("UPDATE sync_changes SET scopes = (SELECT scopes FROM sync_changes WHERE partition = 'p2' AND commit_seq = 7 AND idx = 1) WHERE false");
      await s.close();
      // The command compares a file it opens itself; exit code 1 on a difference.
      const out = spawnSync(process.execPath, [BIN, 'copy', sqliteFileUrl(path), url, '--schema', schema, '--verify-only'], { encoding: 'utf8' });
      assert.equal(out.status, 1, out.stderr);
      assert.match(out.stderr, /first difference in sync_changes, partition "p2"/);
    } finally {
      psql.close();
    }
  });

  test('the command copies a file and verifies it; bad usage exits 2', async () => {
    const url = pg.requireUrl();
    const { s, path } = await sourceWithData();
    const want = await reads(s);
    await s.close();
    const schema = freshPgSchema();
    const out = spawnSync(process.execPath, [BIN, 'copy', sqliteFileUrl(path), url, '--schema', schema, '--verify'], { encoding: 'utf8' });
    assert.equal(out.status, 0, out.stderr);
    const report = JSON.parse(out.stdout);
    assert.equal(report.verify.equal, true);
    const d = new NativeStorage({ url, schema, maxConnections: 2 });
    try {
      await d.ensureSchema(fixtureSchema());
      assert.deepStrictEqual(norm(await reads(d)), norm(want));
    } finally {
      await d.close();
    }
    // A second run refuses the target it filled.
    const again = spawnSync(process.execPath, [BIN, 'copy', sqliteFileUrl(path), url, '--schema', schema], { encoding: 'utf8' });
    assert.equal(again.status, 3);
    assert.match(again.stderr, /ERR_SYNCULAR_COPY_TARGET_NOT_EMPTY/);
    assert.equal(spawnSync(process.execPath, [BIN, 'copy', 'only-one'], { encoding: 'utf8' }).status, 2);
  });

  test('copyStorage refuses what it cannot copy with coded errors', async () => {
    const url = pg.requireUrl();
    await assert.rejects(pkg.copyStorage(url, url), (err) => err.code === 'ERR_SYNCULAR_COPY_UNSUPPORTED');
    await assert.rejects(pkg.copyStorage(sqliteFileUrl(tempDbPath()), sqliteFileUrl(tempDbPath())), (err) => err.code === 'ERR_SYNCULAR_COPY_UNSUPPORTED');
    const d = new NativeStorage({ url, schema: freshPgSchema(), maxConnections: 2 });
    try {
      await assert.rejects(d.copyTo(url, { schema: freshPgSchema() }), (err) => err.code === 'ERR_SYNCULAR_COPY_UNSUPPORTED');
    } finally {
      await d.close();
    }
    await assert.rejects(pkg.copyStorage('', url), (err) => err.code === 'ERR_SYNCULAR_INVALID_ARGUMENT');
  });

  // The fuzz (stress/lib/fuzz.mjs) leaves copyTo out: it would connect to
  // whatever url it is given, and a final pass ends the storage's writes.
  test('copyTo refuses bad arguments with ERR_SYNCULAR_INVALID_ARGUMENT, touching neither side', async () => {
    const url = pg.requireUrl();
    const s = new NativeStorage({ url: sqliteFileUrl(tempDbPath()) });
    try {
      await s.ensureSchema(fixtureSchema());
      const bad = [
        [undefined],
        [42, {}],
        ['', {}],
        [url, 'schema'],
        [url, { schema: '' }],
        [url, { schema: freshPgSchema(), verify: 'yes' }],
        [url, { schema: freshPgSchema(), onProgress: 1 }],
        [url, { schema: freshPgSchema(), finalPass: true, verifyOnly: true }],
      ];
      for (const args of bad) {
        await assert.rejects(s.copyTo(...args), (err) => err.code === 'ERR_SYNCULAR_INVALID_ARGUMENT', JSON.stringify(args));
      }
      // The source still takes writes: no refusal was left behind.
      await hostPush(s, 'p1', { clientId: 'c', clientCommitId: 'after-bad-args', ops: [{ table: 'tasks', row: taskRow('r1', { title: 't' }) }] });
      assert.equal(await s.getMaxCommitSeq('p1'), 1);
    } finally {
      await s.close();
    }
  });
});

describe('copy: an in-tree 0.15.48 file to PostgreSQL', { skip: pg === undefined ? 'needs SYNCULAR_TEST_PG_URL' : false }, () => {
  test('the copy answers the reads the in-tree storage recorded, with the layout completed and nothing to repair', async () => {
    const url = pg.requireUrl();
    const path = tempDbPath();
    copyFileSync(FIXTURE_DB, path);
    const schema = freshPgSchema();
    // The file as 0.15.48 left it, never opened by a storage of this package.
    const report = await pkg.copyStorage(sqliteFileUrl(path), url, { schema, verify: true });
    assert.equal(report.verify.equal, true, JSON.stringify(report.verify.firstDifference));
    const psql = new Psql(url, { schema });
    const d = new NativeStorage({ url, schema, maxConnections: 2 });
    try {
      // The 0.15.48 index spanned partitions; the copy's leads with the
      // partition, and the row tables have `_sync_column_versions`.
      const ix = await psql.query("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'sync_ix_tasks_by_title'");
      assert.match(ix[0].indexdef, /\(_sync_partition, title\)/);
      const cols = await psql.query(
        "SELECT table_name, data_type FROM information_schema.columns WHERE table_schema = current_schema() AND column_name IN ('_sync_column_versions', 'done', 'meta') ORDER BY 1, column_name",
      );
      assert.deepEqual(cols, [
        { table_name: 'notes', data_type: 'bytea' },
        { table_name: 'tasks', data_type: 'bytea' },
        { table_name: 'tasks', data_type: 'boolean' },
        { table_name: 'tasks', data_type: 'jsonb' },
      ]);
      await d.ensureSchema(compile(expected.schema));
      assert.deepEqual(await psql.query("SELECT to_regclass('sync_native_replaced_indexes') IS NULL AS none"), [{ none: true }]);
      await assertInTreeReads(d);
      // The host's next push lands where the in-tree one would.
      const { partition, row } = expected.nextPush;
      const next = await hostPush(d, partition, {
        clientId: 'after-copy',
        clientCommitId: 'k1',
        ops: [{ table: 'tasks', row: { ...row, payload: Buffer.from(row.payload, 'base64') } }],
      });
      assert.equal(next.commitSeq, expected.maxCommitSeq[partition] + 1);
    } finally {
      await d.close();
      psql.close();
    }
  });
});

describe('copy: online, with writes going on', { skip: pg === undefined ? 'needs SYNCULAR_TEST_PG_URL' : false }, () => {
  test('catch-up passes and a final pass under the write lock lose no acknowledged commit; writes after it are refused', async (t) => {
    const url = pg.requireUrl();
    const { s } = await sourceWithData();
    const schema = freshPgSchema();
    const acked = [];
    const refused = [];
    const other = [];
    let stop = false;
    // p1 is fenced for version 2 by its checkpoint: the live writes go to p2 and p3.
    const writer = (async () => {
      for (let i = 0; !stop && refused.length < 3; i++) {
        const p = i % 2 === 0 ? 'p2' : 'p3';
        const ops = [{ table: 'tasks', row: taskRow(`live${i}`, { project: `proj-${i % 2}` }) }];
        // An update of one row again and again, and now and then a delete.
        ops.push({ table: 'tasks', row: taskRow('t0', { title: `v${i}` }, { version: 100 + i }) });
        if (i % 7 === 6) ops.push({ table: 'tasks', delete: `live${i - 2}`, scopes: { project_id: `proj-${i % 2}`, owner_id: 'u1' } });
        try {
          const r = await hostPush(s, p, { clientId: 'live', clientCommitId: `live-${i}`, ops, createdAtMs: NOW + i });
          acked.push({ p, key: `live-${i}`, seq: r.commitSeq, result: r.result });
          if (i === 10) await s.pruneCommitsThrough('p2', 6);
        } catch (err) {
          if (err.code === 'ERR_SYNCULAR_MOVED') refused.push(err);
          else other.push(err);
        }
        await new Promise(setImmediate);
      }
    })();
    // Let some writes land before the copy starts.
    while (acked.length < 5) await new Promise((r) => setTimeout(r, 5));
    const report = await s.copyTo(url, { schema, finalPass: true, verify: true });
    stop = true;
    await writer;
    t.diagnostic(JSON.stringify({ acked: acked.length, refused: refused.length, passes: report.catchUp.map((p) => p.commits), final: report.finalPass.commits, writesHeldMs: report.finalPass.writesHeldMs }));
    assert.deepEqual(other.map((e) => `${e.code}: ${e.message}`), []);
    assert.ok(refused.length >= 1 || acked.length > 0);
    assert.ok(report.catchUp.length >= 1, 'at least one catch-up pass');
    assert.equal(report.verify.equal, true, JSON.stringify(report.verify.firstDifference));
    assert.ok(report.finalPass.writesHeldMs < 1000, `writes held ${report.finalPass.writesHeldMs} ms`);
    // Writes are refused from now on, naming the target without a password.
    await assert.rejects(hostPush(s, 'p3', { clientId: 'late', clientCommitId: 'late-1', ops: [] }), (err) => {
      assert.equal(err.code, 'ERR_SYNCULAR_MOVED', err.message);
      assert.match(err.message, /127\.0\.0\.1/);
      return true;
    });
    await assert.rejects(s.putClientRecord('p3', { clientId: 'late', actorId: 'a', wireVersion: 2, cursor: 1, updatedAtMs: 1, subscriptions: [] }), (err) => err.code === 'ERR_SYNCULAR_MOVED');
    // Reads go on.
    const want = await reads(s);
    const d = new NativeStorage({ url, schema, maxConnections: 2 });
    try {
      await d.ensureSchema(fixtureSchema());
      for (const a of acked) {
        assert.deepStrictEqual(norm(await d.getPushResult(a.p, 'live', a.key)), norm(a.result), `acknowledged ${a.p}/${a.key}`);
      }
      assert.deepStrictEqual(norm(await reads(d)), norm(want));
    } finally {
      await d.close();
      await s.close();
    }
  });
});

describe('copy: interrupted and resumed', { skip: pg === undefined ? 'needs SYNCULAR_TEST_PG_URL' : false }, () => {
  test('kill -9 of the copier at random points, then --resume, reaches the verified state', async (t) => {
    const url = pg.requireUrl();
    const { s, path } = await sourceWithData();
    // Enough commits that a copy takes a while.
    for (let i = 0; i < 1500; i++) {
      await hostPush(s, i % 2 ? 'p2' : 'p3', { clientId: 'bulk', clientCommitId: `b-${i}`, ops: [{ table: 'tasks', row: taskRow(`b${i}`, { project: `proj-${i % 2}`, title: 'x'.repeat(200) }) }] });
    }
    await s.close();
    const schema = freshPgSchema();
    const args = [BIN, 'copy', sqliteFileUrl(path), url, '--schema', schema, '--resume'];
    const kills = [];
    const psql = new Psql(url, { schema });
    for (let round = 0; round < 5; round++) {
      const child = spawn(process.execPath, args, { stdio: 'ignore' });
      const after = [20, 400, 900, 1600, 2500][round] + Math.floor(Math.random() * 300);
      const timer = setTimeout(() => child.kill('SIGKILL'), after);
      const [code, signal] = await new Promise((resolve) => child.once('exit', (c, sg) => resolve([c, sg])));
      clearTimeout(timer);
      const recorded = await psql.query("SELECT phase FROM sync_native_copy_progress").catch(() => []);
      kills.push({ after, code, signal, recorded: recorded[0]?.phase ?? null });
      assert.ok(signal === 'SIGKILL' || code === 0, `round ${round}: exit ${code}`);
    }
    psql.close();
    t.diagnostic(JSON.stringify(kills));
    const out = spawnSync(process.execPath, [...args, '--verify'], { encoding: 'utf8' });
    assert.equal(out.status, 0, out.stderr);
    const report = JSON.parse(out.stdout);
    const verified = report.verify;
    assert.equal(verified.equal, true, JSON.stringify(verified.firstDifference));
    const d = new NativeStorage({ url, schema, maxConnections: 2 });
    const again = new NativeStorage({ url: sqliteFileUrl(path) });
    try {
      await d.ensureSchema(fixtureSchema());
      await again.ensureSchema(fixtureSchema());
      assert.deepStrictEqual(norm(await reads(d)), norm(await reads(again)));
    } finally {
      await d.close();
      await again.close();
    }
  });
});

describe('copy: through upstream\'s handler', () => {
  const skip = hostTest.skip ?? (pg === undefined ? 'needs SYNCULAR_TEST_PG_URL' : undefined);
  test('a host moved with copyTo answers the same pulls byte for byte from PostgreSQL, and writes on', { skip }, async (t) => {
    const url = pg.requireUrl();
    const schema = freshPgSchema();
    const result = await runHost('copy.ts', [tempDbPath(), schema], { env: { SYNCULAR_TEST_PG_URL: url } });
    t.diagnostic(JSON.stringify(result));
    assert.equal(result.verify, true);
    assert.ok(result.requests >= 20, `${result.requests} answers compared`);
    assert.equal(result.identical, true, `answer ${result.firstDiff} differs`);
    assert.equal(result.commits.after, result.commits.before);
    assert.equal(result.commits.final, result.commits.before + 5);
    assert.match(result.refusedAfterMove, /ERR_SYNCULAR_MOVED/);
  });
});

describe('copy: under load through upstream\'s handler', () => {
  const skip = hostTest.skip ?? (pg === undefined ? 'needs SYNCULAR_TEST_PG_URL' : undefined);
  test('three partitions pushed and pulled during the move: no acknowledged push lost, refusals only after the final pass, pulls identical', { skip }, async (t) => {
    const url = pg.requireUrl();
    const result = await runHost('copy-load.ts', [tempDbPath(), freshPgSchema(), '300'], { env: { SYNCULAR_TEST_PG_URL: url }, timeoutMs: 300_000 });
    t.diagnostic(JSON.stringify(result));
    assert.equal(result.verify, true);
    assert.equal(result.missing, 0, 'acknowledged pushes missing on PostgreSQL');
    assert.deepEqual(result.otherFailures, []);
    assert.equal(result.refusedBeforeFinalPass, 0);
    assert.ok(result.acked > 0);
    assert.equal(result.identical, true, `answer ${result.firstDiff} differs`);
    assert.ok(result.writesHeldMs < 1000, `writes held ${result.writesHeldMs} ms`);
  });
});
