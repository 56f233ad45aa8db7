// Crash safety, short version (issue 7 §1; the long one is stress/crash.mjs):
// a child pushing commits is SIGKILLed 10 times at random points; after each
// kill nothing acknowledged is lost, nothing is half-written, the log is
// dense and the commit in flight applies exactly once when retried.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { checkLayout, runCrash } from '../../stress/lib/crash.mjs';
import { CRASH_CLIENT, CRASH_PARTITION, ccidOf, opsOf } from '../../stress/lib/shape.mjs';
import { NativeStorage } from '../support/package.mjs';
import { fixtureSchema } from '../support/schema.mjs';
import { hostPush } from '../support/harness.mjs';
import { exec, noShell } from '../support/sqlite-cli.mjs';
import { engines } from '../support/engines.mjs';
import { pgTarget } from '../../stress/lib/sql.mjs';

// PostgreSQL joins with SYNCULAR_TEST_PG_URL (required under CI=true: then
// requireUrl() throws and the cases fail, never skip; see engines.mjs).
const pg = engines.find((e) => e.dialect === 'postgres');

describe('reliability: crash safety (sqlite-file)', { skip: noShell }, () => {
  test('10 SIGKILLs: no acknowledged commit lost, no partial commit, dense log, retries apply once', async () => {
    const f = await runCrash({ kills: 10, seed: Date.now() });
    assert.deepEqual(f.problems, []);
    assert.equal(f.kills, 10);
    assert.equal(f.survived, 10);
    assert.equal(f.lost, 0);
    assert.equal(f.partial, 0);
    assert.equal(f.duplicates, 0);
    assert.equal(f.gaps, 0);
    assert.equal(f.exactlyOnce, f.retries);
    assert.ok(f.acked > 0, 'the children acknowledged commits before being killed');
    assert.ok(f.commitsChecked >= f.acked);
  });

  test('10 SIGKILLs with 4 concurrent pushers per process (commit groups in flight): nothing acknowledged lost or partial', async () => {
    const f = await runCrash({ kills: 10, seed: Date.now(), pushers: 4 });
    assert.deepEqual(f.problems, []);
    assert.equal(f.survived, 10);
    assert.equal(f.lost + f.partial + f.duplicates + f.gaps, 0);
    assert.equal(f.exactlyOnce, f.retries);
    assert.ok(f.acked > 0, 'the children acknowledged commits before being killed');
  });

  test('the layout check detects a half-written commit, an orphan and a gap', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'syncular-crashcheck-'));
    const path = join(dir, 'c.db');
    try {
      const storage = new NativeStorage({ url: `sqlite:${path}` });
      await storage.ensureSchema(fixtureSchema());
      for (let k = 1; k <= 6; k++) {
        await hostPush(storage, CRASH_PARTITION, { clientId: CRASH_CLIENT, clientCommitId: ccidOf(k), ops: opsOf(k) });
      }
      await storage.close();
      assert.deepEqual((await checkLayout(path)).problems, []);
      exec(path, `DELETE FROM sync_change_scopes WHERE partition = '${CRASH_PARTITION}' AND commit_seq = 2 AND var = 'owner_id'`);
      assert.equal((await checkLayout(path)).partial, 1);
      exec(path, `DELETE FROM sync_commits WHERE partition = '${CRASH_PARTITION}' AND commit_seq = 4`);
      const c = await checkLayout(path);
      assert.equal(c.gaps, 1);
      assert.ok(c.partial >= 2, 'commit 4 left orphan changes, rows and a push result');
      exec(path, `UPDATE "tasks" SET "_sync_server_version" = 1 WHERE "_sync_row_id" = 'hot'`);
      assert.ok((await checkLayout(path)).problems.some((p) => p.includes('hot row')));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

if (pg) {
  describe('reliability: crash safety (postgres)', () => {
    test('5 SIGKILLs of the pushing host process: no acknowledged commit lost, no partial commit, dense log, retries apply once', async () => {
      const f = await runCrash({ kills: 5, seed: Date.now(), pgUrl: pg.requireUrl() });
      assert.deepEqual(f.problems, []);
      assert.equal(f.engine, 'postgres');
      assert.equal(f.kills, 5);
      assert.equal(f.survived, 5);
      assert.equal(f.lost + f.partial + f.duplicates + f.gaps, 0);
      assert.equal(f.exactlyOnce, f.retries);
      assert.ok(f.retries + f.acked > 0, 'the children pushed before being killed');
      assert.ok(f.commitsChecked >= f.acked);
    });

    test('the layout check (psql on the schema) detects a half-written commit, an orphan and a gap', async () => {
      const db = pgTarget(pg.requireUrl());
      try {
        const storage = db.open();
        await storage.ensureSchema(fixtureSchema());
        for (let k = 1; k <= 6; k++) {
          await hostPush(storage, CRASH_PARTITION, { clientId: CRASH_CLIENT, clientCommitId: ccidOf(k), ops: opsOf(k) });
        }
        await storage.close();
        assert.deepEqual((await checkLayout(db)).problems, []);
        await db.psql.exec(`DELETE FROM sync_change_scopes WHERE partition = '${CRASH_PARTITION}' AND commit_seq = 2 AND var = 'owner_id'`);
        assert.equal((await checkLayout(db)).partial, 1);
        await db.psql.exec(`DELETE FROM sync_commits WHERE partition = '${CRASH_PARTITION}' AND commit_seq = 4`);
        const c = await checkLayout(db);
        assert.equal(c.gaps, 1);
        assert.ok(c.partial >= 2, 'commit 4 left orphan changes, rows and a push result');
        await db.psql.exec(`UPDATE "tasks" SET "_sync_server_version" = 1 WHERE "_sync_row_id" = 'hot'`);
        assert.ok((await checkLayout(db)).problems.some((p) => p.includes('hot row')));
      } finally {
        await db.close();
      }
    });
  });
}
