// SQLite file only: RFC 0007 across several storage objects on one database
// file (standing in for several host processes), and the checkpoint, fence
// and trigger layout an in-tree process reads and writes
// (storage-layout.md §2.13, §2.14, §4.2, §14).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { tempDbPath, sqliteFileUrl } from './support/engines.mjs';
import { NativeStorage, StorageConstraintError, StorageQueryError } from './support/package.mjs';
import { exec, noShell, query, sqliteCliAvailable } from './support/sqlite-cli.mjs';
import { fixtureSchema } from './support/schema.mjs';
import { rejectsQueryError, taskRow, upsertChange } from './support/harness.mjs';
import { appendError, assertFenceRejection, serveGateRefusal, sortedPending, taskCommit } from './contract/checkpoints.mjs';

if (!noShell) assert.ok(sqliteCliAvailable(), 'these tests need the sqlite3 command-line shell on PATH');

/** Opens storages over one fresh file; closes them all afterwards. */
async function withFile(fn) {
  const path = tempDbPath();
  const opened = [];
  const open = (opts = {}) => {
    const s = new NativeStorage({ url: sqliteFileUrl(path), ...opts });
    opened.push(s);
    return s;
  };
  try {
    return await fn(open, path);
  } finally {
    for (const s of opened) await s.close();
  }
}

const DECL = { partition: 'p1', name: 'tasks_projection', schemaVersion: 2 };

describe('sqlite: RFC 0007 across storages on one file', { skip: noShell }, () => {
  test('one process declares and may serve; another declares nothing and is refused until activation', () =>
    withFile(async (open) => {
      // The old fleet, at version 1, with data.
      const old = open();
      await old.ensureSchema(fixtureSchema(1));
      await taskCommit(old, 'p1', 'r1');
      await taskCommit(old, 'p1', 'r2');

      // Process A rolls out version 2 with a checkpoint.
      const a = open();
      await a.ensureSchema(fixtureSchema(2), [DECL]);
      const gateA = await a.readServeGate('p1', 2);
      assert.equal(gateA.storedSchemaVersion, 2);
      assert.deepEqual(gateA.pending, [{ partition: 'p1', name: 'tasks_projection' }]);
      assert.equal(serveGateRefusal(gateA, 2, [DECL]), undefined, 'the declaring process may serve');

      // Process B runs version 2 but does not know the checkpoint.
      const b = open();
      const refused = await rejectsQueryError(b.ensureSchema(fixtureSchema(2)), 'sync.storage.checkpoint_incomplete');
      assert.ok(refused instanceof StorageQueryError);
      await rejectsQueryError(b.ensureSchema(fixtureSchema(2), []), 'sync.storage.checkpoint_incomplete');
      assert.deepEqual(serveGateRefusal(await b.readServeGate('p1', 2), 2, undefined), {
        kind: 'checkpoint', partition: 'p1', name: 'tasks_projection',
      });
      assert.deepEqual(serveGateRefusal(await b.readServeGate('p7', 2), 2, []), {
        kind: 'checkpoint', partition: 'p1', name: 'tasks_projection',
      }, 'refused on any partition');

      // The old process is refused by the gate (stored is newer) and fenced as a writer.
      assert.deepEqual(serveGateRefusal(await old.readServeGate('p1', 1), 1, undefined), { kind: 'schema', stored: 2, running: 1 });
      assertFenceRejection(await appendError(old, 'p1'));
      assert.equal(await appendError(old, 'p2'), undefined, 'only the declared partition is fenced');
      // A fresh old-version storage cannot even start against the bumped file.
      const late = open();
      await assert.rejects(late.ensureSchema(fixtureSchema(1)), (e) => !(e instanceof StorageQueryError) && /newer/.test(e.message));

      // A backfills: claim, advance inside the transaction that writes, activate.
      const owner = await a.claimCheckpoint('p1', DECL.name, 2, 5000);
      assert.equal(owner.ownerEpoch, 1);
      const watermark = await a.sourceCoverageSeq('p1', ['tasks']);
      assert.equal(watermark, 2);
      const tx = await a.begin('p1');
      await tx.lockPartitionForPush();
      assert.deepEqual(sortedPending(await tx.readServeGate(2)), [{ partition: 'p1', name: 'tasks_projection' }]);
      assert.equal(await tx.advanceCheckpoint(DECL.name, owner.ownerEpoch, watermark, 2, 5100), true);
      await tx.commit();
      assert.equal(serveGateRefusal(await b.readServeGate('p1', 2), 2, undefined)?.kind, 'checkpoint', 'still refused before activation');
      assert.equal(await a.activateCheckpoint('p1', DECL.name, owner.ownerEpoch, watermark, ['tasks'], 5200), 'activated');

      // B is admitted now, by ensureSchema and by its gate.
      await b.ensureSchema(fixtureSchema(2));
      assert.equal(serveGateRefusal(await b.readServeGate('p1', 2), 2, undefined), undefined);
      assert.equal(await appendError(b, 'p1'), undefined);
      assert.equal(await appendError(a, 'p1'), undefined);
      // The fence never goes down: the old writer stays fenced after activation.
      assertFenceRejection(await appendError(old, 'p1'));
    }));

  test('a process whose checkpoint B activated meanwhile sees it in its next gate read (no memo)', () =>
    withFile(async (open) => {
      const a = open();
      await a.ensureSchema(fixtureSchema(1), [{ partition: 'p1', name: 'cp', schemaVersion: 1 }]);
      const b = open();
      await b.ensureSchema(fixtureSchema(1), [{ partition: 'p1', name: 'cp', schemaVersion: 1 }]);
      assert.equal((await a.readServeGate('p1', 1)).pending.length, 1);
      assert.equal(await b.activateCheckpoint('p1', 'cp', 0, 0, [], 1000), 'activated');
      assert.deepEqual((await a.readServeGate('p1', 1)).pending, []);
      const tx = await a.begin('p1');
      await tx.lockPartitionForPush();
      assert.deepEqual((await tx.readServeGate(1)).pending, []);
      await tx.rollback();
    }));

  test('concurrent claims from two storages get distinct epochs; only the newest owner advances and activates', () =>
    withFile(async (open) => {
      const a = open();
      const b = open();
      await a.ensureSchema(fixtureSchema(1), [{ partition: 'p1', name: 'cp', schemaVersion: 1 }]);
      await b.ensureSchema(fixtureSchema(1), [{ partition: 'p1', name: 'cp', schemaVersion: 1 }]);
      const claims = await Promise.all([
        a.claimCheckpoint('p1', 'cp', 1, 1000),
        b.claimCheckpoint('p1', 'cp', 1, 1000),
        a.claimCheckpoint('p1', 'cp', 1, 1000),
        b.claimCheckpoint('p1', 'cp', 1, 1000),
      ]);
      assert.deepEqual(claims.map((c) => c.ownerEpoch).sort(), [1, 2, 3, 4]);
      const winnerIndex = claims.findIndex((c) => c.ownerEpoch === 4);
      const winner = winnerIndex % 2 === 0 ? a : b;
      const other = winner === a ? b : a;
      for (const epoch of [1, 2, 3]) {
        assert.equal(await other.advanceCheckpoint('p1', 'cp', epoch, 9, 9, 2000), false);
        assert.equal(await winner.advanceCheckpoint('p1', 'cp', epoch, 9, 9, 2000), false);
        assert.equal(await other.activateCheckpoint('p1', 'cp', epoch, 9, [], 2000), 'stale');
      }
      const [row] = await a.readCheckpoints('p1');
      assert.equal(row.watermark, 0, 'superseded owners wrote nothing');
      assert.equal(row.state, 'backfilling');
      assert.equal(await other.advanceCheckpoint('p1', 'cp', 4, 3, 30, 3000), true, 'the epoch, not the storage, is the owner');
      assert.equal(await winner.activateCheckpoint('p1', 'cp', 4, 3, [], 3100), 'activated');
    }));

  test('the bump, its declarations and the fence commit or roll back together', () =>
    withFile(async (open, path) => {
      const a = open();
      await a.ensureSchema(fixtureSchema(1));
      // Make the second declaration's insert fail inside the bump.
      exec(path, `CREATE TRIGGER test_boom BEFORE INSERT ON sync_backfill_checkpoints WHEN NEW.name = 'boom'
        BEGIN SELECT RAISE(ABORT, 'boom'); END`);
      const b = open();
      await assert.rejects(
        b.ensureSchema(fixtureSchema(2), [DECL, { partition: 'p2', name: 'boom', schemaVersion: 2 }]),
        /boom/,
      );
      assert.deepEqual(query(path, 'SELECT schema_version FROM sync_schema_meta'), [{ schema_version: 1 }]);
      assert.deepEqual(query(path, 'SELECT * FROM sync_backfill_checkpoints'), []);
      assert.deepEqual(query(path, 'SELECT * FROM sync_writer_fence'), []);
      exec(path, 'DROP TRIGGER test_boom');
      await b.ensureSchema(fixtureSchema(2), [DECL, { partition: 'p2', name: 'boom', schemaVersion: 2 }]);
      assert.deepEqual(query(path, 'SELECT schema_version FROM sync_schema_meta'), [{ schema_version: 2 }]);
      assert.deepEqual(
        query(path, 'SELECT partition, required_writer_version FROM sync_writer_fence ORDER BY partition'),
        [{ partition: 'p1', required_writer_version: 2 }, { partition: 'p2', required_writer_version: 2 }],
      );
    }));

  test('a same-version start only checks declarations; it installs none', () =>
    withFile(async (open, path) => {
      const a = open();
      await a.ensureSchema(fixtureSchema(2), [DECL]);
      const b = open();
      await b.ensureSchema(fixtureSchema(2), [DECL, { partition: 'p3', name: 'extra', schemaVersion: 2 }]);
      assert.deepEqual(query(path, 'SELECT partition, name FROM sync_backfill_checkpoints'), [{ partition: 'p1', name: 'tasks_projection' }]);
      assert.deepEqual(query(path, "SELECT * FROM sync_writer_fence WHERE partition = 'p3'"), []);
    }));

  test('a missing fence row refuses activation (sync.storage.checkpoint_fence_missing)', () =>
    withFile(async (open, path) => {
      const a = open();
      await a.ensureSchema(fixtureSchema(1), [{ partition: 'p1', name: 'cp', schemaVersion: 1 }]);
      exec(path, 'DELETE FROM sync_writer_fence');
      await rejectsQueryError(a.activateCheckpoint('p1', 'cp', 0, 0, [], 1000), 'sync.storage.checkpoint_fence_missing');
      assert.equal((await a.readCheckpoints('p1'))[0].state, 'declared');
    }));
});

describe('sqlite: checkpoint and fence layout (in-tree compatible)', { skip: noShell }, () => {
  const info = (path, t) =>
    query(path, `SELECT name, type, "notnull" AS nn, dflt_value AS dflt, pk FROM pragma_table_info('${t}') ORDER BY cid`);

  test('sync_backfill_checkpoints and sync_writer_fence columns, keys and states', () =>
    withFile(async (open, path) => {
      const s = open();
      await s.ensureSchema(fixtureSchema(1));
      const cp = info(path, 'sync_backfill_checkpoints');
      assert.deepEqual(cp.map((c) => c.name), [
        'partition', 'name', 'schema_version', 'state', 'watermark', 'owner_epoch', 'observed_rows', 'updated_at_ms',
      ]);
      const by = Object.fromEntries(cp.map((c) => [c.name, c]));
      assert.equal(by.partition.type, 'TEXT');
      assert.equal(by.name.type, 'TEXT');
      assert.equal(by.state.type, 'TEXT');
      for (const c of ['schema_version', 'watermark', 'owner_epoch', 'observed_rows', 'updated_at_ms']) {
        assert.equal(by[c].type, 'INTEGER', c);
      }
      for (const c of ['watermark', 'owner_epoch', 'observed_rows']) assert.equal(by[c].dflt, '0', `${c} defaults to 0`);
      assert.deepEqual(cp.filter((c) => c.pk > 0).sort((x, y) => x.pk - y.pk).map((c) => c.name), ['partition', 'name']);
      const tableSql = query(path, "SELECT sql FROM sqlite_master WHERE name = 'sync_backfill_checkpoints'")[0].sql;
      assert.match(tableSql, /CHECK\s*\(\s*state IN \('declared',\s*'backfilling',\s*'activated'\)\s*\)/);
      assert.throws(() =>
        exec(path, "INSERT INTO sync_backfill_checkpoints (partition, name, schema_version, state, updated_at_ms) VALUES ('p', 'x', 1, 'bogus', 0)"),
      );

      const fence = info(path, 'sync_writer_fence');
      assert.deepEqual(fence.map(({ name, type, nn, pk }) => ({ name, type, nn, pk })), [
        { name: 'partition', type: 'TEXT', nn: 0, pk: 1 },
        { name: 'required_writer_version', type: 'INTEGER', nn: 1, pk: 0 },
      ]);
      const commits = info(path, 'sync_commits').find((c) => c.name === 'writer_version');
      assert.ok(commits, 'sync_commits.writer_version exists');
      assert.equal(commits.type, 'INTEGER');
      assert.equal(commits.nn, 0);
    }));

  test('the rows our storage writes are the in-tree rows, in every state', () =>
    withFile(async (open, path) => {
      const s = open();
      await s.ensureSchema(fixtureSchema(1));
      await s.declareCheckpoint('p1', 'a', 1, 1000);
      await s.declareCheckpoint('p1', 'b', 3, 1100);
      await s.declareCheckpoint('p1', 'c', 1, 1200);
      const owner = await s.claimCheckpoint('p1', 'b', 3, 2000);
      assert.equal(await s.advanceCheckpoint('p1', 'b', owner.ownerEpoch, 0, 12, 2100), true);
      assert.equal(await s.activateCheckpoint('p1', 'c', 0, 0, [], 3000), 'activated');
      assert.deepEqual(query(path, 'SELECT * FROM sync_backfill_checkpoints ORDER BY name'), [
        { partition: 'p1', name: 'a', schema_version: 1, state: 'declared', watermark: 0, owner_epoch: 0, observed_rows: 0, updated_at_ms: 1000 },
        { partition: 'p1', name: 'b', schema_version: 3, state: 'backfilling', watermark: 0, owner_epoch: 1, observed_rows: 12, updated_at_ms: 2100 },
        { partition: 'p1', name: 'c', schema_version: 1, state: 'activated', watermark: 0, owner_epoch: 0, observed_rows: 0, updated_at_ms: 3000 },
      ]);
      assert.deepEqual(query(path, 'SELECT * FROM sync_writer_fence'), [{ partition: 'p1', required_writer_version: 3 }]);
    }));

  test('the fence trigger has the in-tree name, timing, condition and message', () =>
    withFile(async (open, path) => {
      const s = open();
      await s.ensureSchema(fixtureSchema(1));
      const [trigger] = query(path, "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger' AND name = 'sync_commits_writer_fence'");
      assert.ok(trigger, 'trigger sync_commits_writer_fence exists');
      assert.equal(trigger.tbl_name, 'sync_commits');
      const sql = trigger.sql.replace(/\s+/g, ' ');
      assert.match(sql, /BEFORE INSERT ON sync_commits/i);
      assert.match(sql, /FOR EACH ROW/i);
      assert.match(sql, /WHEN EXISTS \( ?SELECT 1 FROM sync_writer_fence/i);
      assert.match(sql, /partition = NEW\.partition/);
      assert.match(sql, /NEW\.writer_version IS NULL OR NEW\.writer_version < \w*\.?required_writer_version/);
      assert.match(sql, /SELECT RAISE\(ABORT, 'sync\.storage\.writer_fence_rejected'\)/);
    }));

  test('the fence works across implementations: raw in-tree inserts and fence rows written by another process', () =>
    withFile(async (open, path) => {
      const s = open();
      await s.ensureSchema(fixtureSchema(1));
      await taskCommit(s, 'p1', 'r1', { clientCommitId: 'cc1' });
      // Our commits carry the writer version.
      assert.deepEqual(query(path, 'SELECT writer_version FROM sync_commits'), [{ writer_version: 1 }]);
      // Another process raises the fence directly (as an in-tree declare does).
      exec(path, "INSERT INTO sync_writer_fence (partition, required_writer_version) VALUES ('p1', 2)");
      assertFenceRejection(await appendError(s, 'p1'));
      const pushed = await assert.rejects(async () => {
        const tx = await s.begin('p1');
        try {
          await tx.lockPartitionForPush();
          await tx.upsertRow('tasks', taskRow('r2'), { opIndex: 0 });
          await tx.appendCommit({ clientId: 'c', clientCommitId: 'cc2', actorId: 'a', createdAtMs: 1, changes: [upsertChange('tasks', taskRow('r2'))] });
        } finally {
          await tx.rollback();
        }
      }, (e) => /sync\.storage\.writer_fence_rejected/.test(e.message) && !(e instanceof StorageConstraintError));
      assert.equal(pushed, undefined);
      // An old in-tree binary inserting without writer_version (NULL) or below is rejected by the trigger.
      assert.throws(
        () => exec(path, "INSERT INTO sync_commits (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms) VALUES ('p1', 50, 'c', 'x', 'a', 1)"),
        /sync\.storage\.writer_fence_rejected/,
      );
      assert.throws(
        () => exec(path, "INSERT INTO sync_commits (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) VALUES ('p1', 50, 'c', 'x', 'a', 1, 1)"),
        /sync\.storage\.writer_fence_rejected/,
      );
      exec(path, "INSERT INTO sync_commits (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) VALUES ('p1', 50, 'c', 'x', 'a', 1, 2)");
      exec(path, "INSERT INTO sync_commits (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms) VALUES ('p2', 50, 'c', 'x', 'a', 1)");
      // A current writer of ours is admitted.
      await s.ensureSchema(fixtureSchema(2));
      assert.equal(await appendError(s, 'p1'), undefined);
    }));
});
