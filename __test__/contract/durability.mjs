// A database written by one storage object reads back identically through a
// second one (file-backed engines; contract Q6, §6 synchronous construction).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fixtureSchema } from '../support/schema.mjs';
import { assertSame, hostPush, taskRow, accountRow, writeCommit } from '../support/harness.mjs';

async function snapshot(storage) {
  const filter = { project_id: ['p1', 'p2'] };
  return {
    rows: await storage.scanRows('p1', { table: 'tasks', scopeFilter: filter, afterRowId: null, limit: 100 }),
    accounts: await storage.scanRows('p1', { table: 'accounts', scopeFilter: { org_id: ['o1'] }, afterRowId: null, limit: 100 }),
    row: await storage.getRow('p1', 'tasks', 'r1'),
    window: await storage.readCommitWindow('p1', { table: 'tasks', scopeFilter: filter, afterSeq: 0, throughSeq: 100, limitChanges: 100 }),
    max: await storage.getMaxCommitSeq('p1'),
    horizon: await storage.getHorizonSeq('p1'),
    push: await storage.getPushResult('p1', 'c1', 'cc1'),
    client: await storage.getClientRecord('p1', 'c1'),
    registry: await storage.listPartitionRegistry(),
    partitions: await storage.listPartitions(),
    gate: await storage.readServeGate('p1', 1),
    before: await storage.getCommitSeqBefore('p1', 1e15),
    floor: await storage.getActiveClientCursorFloor('p1', 0),
    latest: await storage.latestScopedChangeSeq('p1', { table: 'tasks', scopeFilter: filter }),
  };
}

export function define(engine) {
  if (!engine.shared) return;
  describe('durability across storage objects', () => {
    test('a reopened database reads back identically', async () => {
      const shared = engine.shared();
      const first = shared.open();
      let expected;
      try {
        await first.ensureSchema(fixtureSchema());
        await first.touchPartition('p1', 100, 'epoch-1');
        await hostPush(first, 'p1', {
          clientId: 'c1',
          clientCommitId: 'cc1',
          ops: [
            { table: 'tasks', row: taskRow('r1', { data: Uint8Array.of(1, 2) }, { version: 3, columnVersions: Uint8Array.of(4, 3) }) },
            { table: 'accounts', row: accountRow('a1', 'o1', 'e@x') },
          ],
        });
        await writeCommit(first, 'p1', [{ table: 'tasks', row: taskRow('r2', { project: 'p2' }) }]);
        await writeCommit(first, 'p1', [{ table: 'tasks', delete: 'r2', scopes: { project_id: 'p2', owner_id: 'u1' } }]);
        await writeCommit(first, 'p1', [{ table: 'tasks', row: taskRow('r3') }]);
        await first.pruneCommitsThrough('p1', { logEpoch: 'epoch-1', throughSeq: 1 });
        await first.putClientRecord('p1', { clientId: 'c1', actorId: 'actor-1', wireVersion: 3, cursor: 4, updatedAtMs: 50, subscriptions: [{ id: 's', table: 'tasks', scopes: { project_id: ['p1'] } }] });
        expected = await snapshot(first);
      } finally {
        await first.close();
      }
      const second = shared.open();
      try {
        // storage-level counters are readable before ensureSchema
        assert.equal(await second.getMaxCommitSeq('p1'), expected.max);
        await second.ensureSchema(fixtureSchema());
        const actual = await snapshot(second);
        assertSame(actual, expected);
        assert.equal(actual.max, 4);
        assert.equal(actual.horizon, 1);
        const tx = await second.begin('p1');
        assert.equal(await tx.getTombstoneSeq('tasks', 'r2'), 3);
        await tx.rollback();
        // and continues the sequence
        assert.equal(await writeCommit(second, 'p1', []), 5);
      } finally {
        await second.close();
      }
    });

    test('synchronous option values are accepted', { skip: engine.dialect !== 'sqlite' && 'synchronous is a SQLite option (refused elsewhere: options.test.mjs)' }, async () => {
      for (const synchronous of ['normal', 'full', 'off']) {
        const shared = engine.shared();
        const a = shared.open({ synchronous });
        try {
          await a.ensureSchema(fixtureSchema());
          await writeCommit(a, 'p1', [{ table: 'tasks', row: taskRow('r1') }]);
        } finally {
          await a.close();
        }
        const b = shared.open({ synchronous });
        try {
          await b.ensureSchema(fixtureSchema());
          assert.ok(await b.getRow('p1', 'tasks', 'r1'), synchronous);
        } finally {
          await b.close();
        }
      }
    });

  });
}
