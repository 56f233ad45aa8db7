// Leaks, short version (issue 7 §4; long: stress/leak.mjs, 1M calls).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runLeak } from '../../stress/lib/leak.mjs';
import { NativeStorage } from '../support/package.mjs';
import { fixtureSchema } from '../support/schema.mjs';
import { taskRow, within } from '../support/harness.mjs';
import { engines, tempDbPath } from '../support/engines.mjs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

describe('reliability: leaks', () => {
  test('40k mixed calls with dropped transactions: RSS flat, dropped writes absent, no stuck begin', async () => {
    const f = await runLeak({ calls: 40_000, dropEvery: 2000 });
    assert.equal(f.crashed, false, f.problem);
    assert.equal(f.stuck, 0);
    assert.ok(f.dropped >= 19, `${f.dropped} transactions dropped`);
    assert.equal(f.droppedWritesVisible, 0);
    assert.ok(f.growth < 48 * 2 ** 20, `RSS grew ${(f.growth / 2 ** 20).toFixed(1)} MB after warm-up`);
  });

  test('a transaction collected without commit or rollback releases the lease and rolls back', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc');
    for (const url of ['sqlite::memory:', `sqlite:${tempDbPath()}`]) {
      const storage = new NativeStorage({ url });
      try {
        await storage.ensureSchema(fixtureSchema());
        await (async () => {
          const tx = await storage.begin('p');
          await tx.lockPartitionForPush();
          await tx.upsertRow('tasks', taskRow('dropped'), { opIndex: 0 });
          await tx.appendCommit({ clientId: 'c', clientCommitId: 'cc', actorId: 'a', createdAtMs: 1, changes: [] });
        })();
        const next = storage.begin('p');
        let done = false;
        next.then(() => {
          done = true;
        });
        for (let i = 0; i < 100 && !done; i++) {
          gc();
          await new Promise((r) => setTimeout(r, 10));
        }
        const tx = await within(next, 1000, 'begin after a dropped transaction');
        assert.equal(await tx.getRow('tasks', 'dropped'), undefined, 'the dropped write is rolled back');
        await tx.rollback();
        assert.equal(await storage.getMaxCommitSeq('p'), 0);
        assert.equal(await storage.getRow('p', 'tasks', 'dropped'), undefined);
      } finally {
        await storage.close();
      }
    }
  });
});

// PostgreSQL joins with SYNCULAR_TEST_PG_URL (required under CI=true; see engines.mjs).
const pg = engines.find((e) => e.dialect === 'postgres');
if (pg) {
  describe('reliability: leaks (postgres)', () => {
    test('3000 mixed calls with dropped transactions: RSS flat, dropped writes absent, no stuck begin or lock', async () => {
      const f = await runLeak({ calls: 3000, dropEvery: 600, pgUrl: pg.requireUrl() });
      assert.equal(f.crashed, false, f.problem);
      assert.equal(f.stuck, 0);
      assert.ok(f.dropped >= 4, `${f.dropped} transactions dropped`);
      assert.equal(f.droppedWritesVisible, 0);
      assert.ok(f.growth < 48 * 2 ** 20, `RSS grew ${(f.growth / 2 ** 20).toFixed(1)} MB after warm-up`);
    });
  });
}
