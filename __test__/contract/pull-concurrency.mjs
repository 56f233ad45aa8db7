// @syncular/server 0.26.2: one pull issues readCommitWindow and scanRows
// concurrently (Promise.all), after reading the partition's max commit seq.
// While pushes land in the same and in another partition, every such pair
// must answer consistently: the window holds exactly the commits up to the
// cursor, each whole; the scan holds every row those commits wrote, at that
// version or a later one, and never a torn row (payload, version and scopes
// always of one write) or a row of another partition.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertBytes, hostPush, taskPayload, taskRow, withStorage } from '../support/harness.mjs';

const PUSHES = 40;
const ROWS = 10;

/** Row ids push `i` writes (its commit seq is i + 1: one writer per partition). */
const touched = (i) => [`r${i % ROWS}`, `r${(i + 3) % ROWS}`];

/** The version of each row after commits 1..seq. */
function expectedAt(seq) {
  const out = new Map();
  for (let i = 0; i < seq; i++) for (const id of touched(i)) out.set(id, i + 1);
  return out;
}

const title = (partition, version) => `${partition}-v${version}`;

const rowOf = (partition, id, version) =>
  taskRow(id, { project: partition, title: title(partition, version) }, { version });

async function pushAll(storage, partition) {
  for (let i = 0; i < PUSHES; i++) {
    const version = i + 1;
    const r = await hostPush(storage, partition, {
      clientId: `writer-${partition}`,
      clientCommitId: `c${i}`,
      ops: touched(i).map((id) => ({ table: 'tasks', row: rowOf(partition, id, version) })),
    });
    assert.equal(r.commitSeq, version, 'one writer per partition: seqs are dense');
    // Let reads interleave with the pushes.
    if (i % 4 === 0) await new Promise((resolve) => setImmediate(resolve));
  }
}

/** One pull's reads of partition p1, checked. Returns the cursor. */
async function pullOnce(storage) {
  const partition = 'p1';
  const cursor = await storage.getMaxCommitSeq(partition);
  const [window, rows] = await Promise.all([
    storage.readCommitWindow(partition, {
      table: 'tasks',
      scopeFilter: { project_id: [partition] },
      afterSeq: 0,
      throughSeq: cursor,
      limitChanges: 10_000,
    }),
    storage.scanRows(partition, { table: 'tasks', scopeFilter: { project_id: [partition] }, limit: 1000 }),
  ]);

  // The window: commits 1..cursor, in order, each whole.
  assert.deepEqual(
    window.map((c) => c.commitSeq),
    Array.from({ length: cursor }, (_, k) => k + 1),
    `window through ${cursor}`,
  );
  for (const commit of window) {
    const version = commit.commitSeq;
    assert.deepEqual(commit.changes.map((ch) => ch.rowId), touched(version - 1), `changes of commit ${version}`);
    for (const ch of commit.changes) {
      assert.equal(ch.op, 'upsert');
      assert.equal(ch.rowVersion, version);
      assertBytes(ch.payload, taskPayload(ch.rowId, { project: partition, title: title(partition, version) }));
    }
  }

  // The scan: every row the window's commits wrote, at that version or later, never torn.
  const expected = expectedAt(cursor);
  const byId = new Map(rows.map((r) => [r.rowId, r]));
  for (const [id, version] of expected) {
    const r = byId.get(id);
    assert.ok(r, `row ${id} (written by commit ≤ ${cursor}) is missing from the scan`);
    assert.ok(r.serverVersion >= version, `row ${id}: version ${r.serverVersion} older than ${version} at cursor ${cursor}`);
  }
  for (const r of rows) {
    assert.ok(r.serverVersion >= 1 && r.serverVersion <= PUSHES, `row ${r.rowId}: version ${r.serverVersion}`);
    assert.ok(touched(r.serverVersion - 1).includes(r.rowId), `row ${r.rowId}: version ${r.serverVersion} never wrote it`);
    assert.deepEqual(r.scopes, { project_id: partition, owner_id: 'u1' });
    assertBytes(r.payload, taskPayload(r.rowId, { project: partition, title: title(partition, r.serverVersion) }), `row ${r.rowId} is whole`);
  }
  return cursor;
}

export function define(engine) {
  describe('concurrent pull reads during pushes (0.26.2)', () => {
    test('readCommitWindow and scanRows under Promise.all answer consistently while pushes land', () =>
      withStorage(engine, async (storage) => {
        let writing = true;
        const writers = Promise.all([pushAll(storage, 'p1'), pushAll(storage, 'p2')]).finally(() => {
          writing = false;
        });
        const cursors = [];
        const reader = async () => {
          while (writing) cursors.push(await pullOnce(storage));
        };
        await Promise.all([writers, reader(), reader()]);
        assert.equal(await pullOnce(storage), PUSHES, 'after the pushes: everything');
        assert.ok(cursors.length > 0, 'the readers ran while the pushes did');
      }));

    test('a pull issued inside a push (reads while a transaction holds the partition) sees only committed state', () =>
      withStorage(engine, async (storage) => {
        await pushAll(storage, 'p1');
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        await tx.upsertRow('tasks', rowOf('p1', 'r0', 999));
        await tx.appendCommit({ clientId: 'x', clientCommitId: 'staged', actorId: 'a', createdAtMs: 1, changes: [] });
        try {
          assert.equal(await pullOnce(storage), PUSHES, 'the staged commit and row are not visible');
        } finally {
          await tx.rollback();
        }
      }));
  });
}
