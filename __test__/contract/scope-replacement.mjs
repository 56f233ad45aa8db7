// A row's scope-index entries are replaced, not accumulated, across
// repeated writes of the row in one transaction (upsert, delete, delete of
// an absent row, upsert, upsert with empty scopes); other partitions are
// untouched; rollback and a push rejection restore the entries. Checked
// through the interface (scanRows, tx.scanRows, getRowScopes) on every
// engine, and in the index table itself where the test can open the
// database (sqlite-file, postgres). The behaviours are those upstream's
// storage tests check since 3266edf1; the cases are our own.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { taskRow, withStorage, writeCommit } from '../support/harness.mjs';
import { fixtureSchema } from '../support/schema.mjs';
import { query as sqliteQuery, sqliteCliAvailable } from '../support/sqlite-cli.mjs';

const A = { project_id: 'pa', owner_id: 'ua' };
const B = { project_id: 'pb', owner_id: 'ub' };
const C = { project_id: 'pc', owner_id: 'uc' };
const ALL_PROJECTS = { project_id: ['pa', 'pb', 'pc'] };
const ALL_OWNERS = { owner_id: ['ua', 'ub', 'uc'] };

/** A tasks row `r1` carrying exactly `scopes`. */
const row = (scopes, version = 1) => ({ ...taskRow('r1', {}, { version }), scopes });

const REJECTED = {
  status: 'rejected',
  recordedAtMs: 5,
  cacheIdentity: 'rej-scopes',
  results: [{ opIndex: 0, status: 'error', code: 'sync.constraint_violation', message: 'constraint violated', retryable: false }],
};

/** Row ids `scan` (storage.scanRows bound to a partition, or tx.scanRows) finds under `filter`. */
async function idsUnder(scan, filter) {
  return (await scan({ table: 'tasks', scopeFilter: filter, limit: 100 })).map((r) => r.rowId).sort();
}

/** What each read says about r1's scopes: under which values it is found. */
async function foundUnder(scan) {
  const out = {};
  for (const [name, s] of Object.entries({ A, B, C })) {
    out[name] = (await idsUnder(scan, { project_id: [s.project_id] })).length > 0 || (await idsUnder(scan, { owner_id: [s.owner_id] })).length > 0;
  }
  return out;
}

/** The five writes of r1, checking the transaction's own view after each. */
async function repeatedWrites(tx) {
  const scan = (q) => tx.scanRows(q);
  await tx.upsertRow('tasks', row(B, 2), { opIndex: 0 });
  assert.deepEqual(await foundUnder(scan), { A: false, B: true, C: false }, 'upsert replaces A by B');
  await tx.deleteRow('tasks', 'r1');
  assert.deepEqual(await foundUnder(scan), { A: false, B: false, C: false }, 'delete removes every entry');
  await tx.deleteRow('tasks', 'r1');
  assert.deepEqual(await foundUnder(scan), { A: false, B: false, C: false }, 'deleting an absent row changes nothing');
  await tx.upsertRow('tasks', row(C, 3), { opIndex: 1 });
  assert.deepEqual(await foundUnder(scan), { A: false, B: false, C: true }, 'upsert after delete: C only');
  await tx.upsertRow('tasks', row({}, 4), { opIndex: 2 });
  assert.deepEqual(await foundUnder(scan), { A: false, B: false, C: false }, 'empty scopes: no entry at all');
  assert.deepEqual(await idsUnder(scan, ALL_PROJECTS), []);
  assert.deepEqual(await idsUnder(scan, ALL_OWNERS), []);
}

/** The raw index entries of `tasks` rows, by partition, where the test can read the database. */
function indexReader(engine, shared) {
  if (engine.dialect === 'sqlite' && shared.path && sqliteCliAvailable()) {
    return async () =>
      sqliteQuery(shared.path, "SELECT partition, row_id, var, value FROM sync_row_scopes WHERE tbl = 'tasks' ORDER BY 1, 2, 3, 4");
  }
  if (engine.dialect === 'postgres') {
    return async () => {
      const client = new pg.Client({ connectionString: shared.url });
      await client.connect();
      try {
        const schema = `"${shared.schema.replaceAll('"', '""')}"`;
        const { rows } = await client.query(
          `SELECT partition, row_id, var, value FROM ${schema}.sync_row_scopes WHERE tbl = 'tasks' ORDER BY 1, 2, 3, 4`,
        );
        return rows;
      } finally {
        await client.end();
      }
    };
  }
  return undefined;
}

const entries = (partition, scopes) =>
  Object.entries(scopes)
    .map(([v, value]) => ({ partition, row_id: 'r1', var: v, value }))
    .sort((x, y) => (x.var < y.var ? -1 : 1));

/**
 * `fn(storage, index)` on a storage whose p1 and p2 both hold r1 under A,
 * committed; `index` reads the raw entries or is undefined.
 */
async function withTwoPartitions(engine, fn) {
  const shared = engine.shared?.();
  const run = async (storage) => {
    await writeCommit(storage, 'p1', [{ table: 'tasks', row: row(A) }]);
    await writeCommit(storage, 'p2', [{ table: 'tasks', row: row(A) }]);
    const index = shared ? indexReader(engine, shared) : undefined;
    if (index) assert.deepEqual(await index(), [...entries('p1', A), ...entries('p2', A)], 'the starting index');
    await fn(storage, index);
  };
  if (!shared) return withStorage(engine, run);
  const storage = shared.open();
  try {
    await storage.ensureSchema(fixtureSchema());
    await run(storage);
  } finally {
    await storage.close();
  }
}

/** p2 still holds r1 under A, exactly. */
async function assertOtherPartitionUntouched(storage) {
  const p2 = (q) => storage.scanRows('p2', q);
  assert.deepEqual(await foundUnder(p2), { A: true, B: false, C: false });
  assert.deepEqual(await storage.getRowScopes('p2', 'tasks', 'r1'), { serverVersion: 1, scopes: A });
}

/** p1 is back to r1 under A, as committed before the transaction. */
async function assertRestored(storage, index) {
  const p1 = (q) => storage.scanRows('p1', q);
  assert.deepEqual(await foundUnder(p1), { A: true, B: false, C: false });
  assert.deepEqual(await storage.getRowScopes('p1', 'tasks', 'r1'), { serverVersion: 1, scopes: A });
  if (index) assert.deepEqual(await index(), [...entries('p1', A), ...entries('p2', A)]);
}

export function define(engine) {
  describe('scope replacement across repeated writes', () => {
    test('upsert, delete, delete of an absent row, upsert, upsert with empty scopes: the last write wins, p2 untouched', () =>
      withTwoPartitions(engine, async (storage, index) => {
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        await repeatedWrites(tx);
        await tx.commit();
        const p1 = (q) => storage.scanRows('p1', q);
        assert.deepEqual(await foundUnder(p1), { A: false, B: false, C: false });
        assert.deepEqual(await storage.getRowScopes('p1', 'tasks', 'r1'), { serverVersion: 4, scopes: {} });
        await assertOtherPartitionUntouched(storage);
        if (index) assert.deepEqual(await index(), entries('p2', A), 'p1 keeps no entry; p2 keeps its own');
        // A later write with scopes indexes them again, and only them.
        await writeCommit(storage, 'p1', [{ table: 'tasks', row: row(B, 5) }]);
        assert.deepEqual(await foundUnder(p1), { A: false, B: true, C: false });
        if (index) assert.deepEqual(await index(), [...entries('p1', B), ...entries('p2', A)]);
      }));

    test('rollback restores the entries', () =>
      withTwoPartitions(engine, async (storage, index) => {
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        await repeatedWrites(tx);
        await tx.rollback();
        await assertRestored(storage, index);
        await assertOtherPartitionUntouched(storage);
      }));

    test('a push rejection (commitRejectedPushResult) restores the entries and keeps the rejection', () =>
      withTwoPartitions(engine, async (storage, index) => {
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        await repeatedWrites(tx);
        await tx.commitRejectedPushResult('c1', 'cc-rejected', REJECTED);
        await assertRestored(storage, index);
        await assertOtherPartitionUntouched(storage);
        assert.equal((await storage.getPushResult('p1', 'c1', 'cc-rejected')).status, 'rejected');
        assert.equal(await storage.getMaxCommitSeq('p1'), 1);
      }));

    test('the same sequence in p2 leaves p1 untouched (no cross-partition leak either way)', () =>
      withTwoPartitions(engine, async (storage, index) => {
        const tx = await storage.begin('p2');
        await tx.lockPartitionForPush();
        await repeatedWrites(tx);
        await tx.commit();
        await assertRestored(storage, undefined);
        assert.deepEqual(await storage.getRowScopes('p2', 'tasks', 'r1'), { serverVersion: 4, scopes: {} });
        if (index) assert.deepEqual(await index(), entries('p1', A), 'p1 keeps its own; p2 keeps none');
      }));
  });
}
