// Pull-side reads: readCommitWindow (§7.4), latestScopedChangeSeq (§7.3),
// scanRows (§7.5), getRow / getPushResult on committed state.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  appendOnly,
  assertRow,
  assertSame,
  deleteChange,
  rejectsQueryError,
  taskRow,
  upsertChange,
  withStorage,
  writeCommit,
} from '../support/harness.mjs';

const pad = (i) => String(i).padStart(3, '0');

function win(storage, partition, q) {
  return storage.readCommitWindow(partition, {
    table: 'tasks',
    afterSeq: 0,
    throughSeq: Number.MAX_SAFE_INTEGER,
    limitChanges: 1000,
    ...q,
  });
}

function scan(storage, partition, q) {
  return storage.scanRows(partition, { table: 'tasks', afterRowId: null, limit: 1000, ...q });
}

/**
 * Seed: one commit per entry, each with the given changes.
 * Returns the commit seqs.
 */
async function seed(storage, partition, commits) {
  const seqs = [];
  for (const [i, changes] of commits.entries()) {
    seqs.push(await appendOnly(storage, partition, changes, { createdAtMs: 1000 + i, actorId: `actor-${i}` }));
  }
  return seqs;
}

const t = (id, project = 'p1', owner = 'u1', version = 1) => upsertChange('tasks', taskRow(id, { project, owner }, { version }));

export function define(engine) {
  describe('readCommitWindow', () => {
    test('commits cross intact: ids beyond ASCII, actors and scopes shared between changes, deletes', () =>
      withStorage(engine, async (storage) => {
        const ids = ['\u00e9-1', '\u6f22-2', '\u{1F4A5}-3', 'plain-4'];
        await seed(storage, 'p1', [
          [t(ids[0]), t(ids[1])],
          [deleteChange('tasks', ids[2], { project_id: 'p1', owner_id: 'u1' }), t(ids[3])],
        ]);
        await appendOnly(storage, 'p1', [t(ids[2])], { createdAtMs: 5000, actorId: 'actor-0' });
        const got = await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] } });
        assertSame(got, [
          { commitSeq: 1, createdAtMs: 1000, actorId: 'actor-0', changes: [t(ids[0]), t(ids[1])] },
          { commitSeq: 2, createdAtMs: 1001, actorId: 'actor-1', changes: [deleteChange('tasks', ids[2], { project_id: 'p1', owner_id: 'u1' }), t(ids[3])] },
          { commitSeq: 3, createdAtMs: 5000, actorId: 'actor-0', changes: [t(ids[2])] },
        ]);
        assert.equal('rowVersion' in got[1].changes[0], false);
        assert.equal('payload' in got[1].changes[0], false);
        const [a, b] = got[0].changes;
        assert.notEqual(a.scopes, b.scopes);
        a.scopes.owner_id = 'changed';
        assert.equal(b.scopes.owner_id, 'u1');
        assert.equal(got[2].changes[0].scopes.owner_id, 'u1');
      }));

    test('returns matching commits oldest first with metadata and only matching changes', () =>
      withStorage(engine, async (storage) => {
        const noteChange = { table: 'notes', rowId: 'n1', op: 'upsert', rowVersion: 1, scopes: { project_id: 'p1' }, payload: Uint8Array.of(1) };
        await seed(storage, 'p1', [
          [t('a'), noteChange, t('x', 'p2')],
          [t('b', 'p2')],
          [deleteChange('tasks', 'a', { project_id: 'p1', owner_id: 'u1' }), t('c')],
        ]);
        const got = await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] } });
        assertSame(got, [
          { commitSeq: 1, createdAtMs: 1000, actorId: 'actor-0', changes: [t('a')] },
          { commitSeq: 3, createdAtMs: 1002, actorId: 'actor-2', changes: [deleteChange('tasks', 'a', { project_id: 'p1', owner_id: 'u1' }), t('c')] },
        ]);
        assert.equal('rowVersion' in got[1].changes[0], false);
        assert.equal('payload' in got[1].changes[0], false);
        assert.equal(got[1].changes[0].op, 'delete');
        // only that table's changes
        const notes = await storage.readCommitWindow('p1', { table: 'notes', scopeFilter: { project_id: ['p1'] }, afterSeq: 0, throughSeq: 10, limitChanges: 10 });
        assertSame(notes, [{ commitSeq: 1, createdAtMs: 1000, actorId: 'actor-0', changes: [noteChange] }]);
      }));

    test('afterSeq is exclusive, throughSeq inclusive', () =>
      withStorage(engine, async (storage) => {
        await seed(storage, 'p1', [[t('a')], [t('b')], [t('c')], [t('d')], [t('e')]]);
        const seqs = (w) => w.map((c) => c.commitSeq);
        assert.deepEqual(seqs(await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, afterSeq: 1, throughSeq: 4 })), [2, 3, 4]);
        assert.deepEqual(seqs(await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, afterSeq: 4, throughSeq: 4 })), []);
        assert.deepEqual(seqs(await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, afterSeq: 0, throughSeq: 0 })), []);
        assert.deepEqual(seqs(await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, afterSeq: 5 })), []);
        assert.deepEqual(seqs(await win(storage, 'p2', { scopeFilter: { project_id: ['p1'] } })), [], 'partition-local');
      }));

    test('stops after the commit that reaches limitChanges and never splits a commit', () =>
      withStorage(engine, async (storage) => {
        await seed(storage, 'p1', [[t('a1'), t('a2'), t('a3')], [t('b1')], [t('c1'), t('c2')], [t('d1')]]);
        const counts = (w) => w.map((c) => [c.commitSeq, c.changes.length]);
        assert.deepEqual(counts(await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, limitChanges: 1 })), [[1, 3]]);
        assert.deepEqual(counts(await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, limitChanges: 3 })), [[1, 3]]);
        assert.deepEqual(counts(await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, limitChanges: 4 })), [[1, 3], [2, 1]]);
        assert.deepEqual(counts(await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, limitChanges: 5 })), [[1, 3], [2, 1], [3, 2]]);
        assert.deepEqual(counts(await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, afterSeq: 1, limitChanges: 2 })), [[2, 1], [3, 2]]);
      }));

    test('limitChanges <= 0, an empty filter or an empty first list give []', () =>
      withStorage(engine, async (storage) => {
        await seed(storage, 'p1', [[t('a')]]);
        assert.deepEqual(await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, limitChanges: 0 }), []);
        assert.deepEqual(await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, limitChanges: -5 }), []);
        assert.deepEqual(await win(storage, 'p1', { scopeFilter: {} }), []);
        assert.deepEqual(await win(storage, 'p1', { scopeFilter: { owner_id: [], project_id: ['p1'] } }), []);
      }));

    test('matches any of several values and verifies every filter variable', () =>
      withStorage(engine, async (storage) => {
        await seed(storage, 'p1', [[t('a', 'p1', 'u1'), t('b', 'p2', 'u1'), t('c', 'p3', 'u1'), t('d', 'p1', 'u2')]]);
        const ids = (w) => w.flatMap((c) => c.changes.map((ch) => ch.rowId));
        assert.deepEqual(ids(await win(storage, 'p1', { scopeFilter: { project_id: ['p1', 'p2'] } })), ['a', 'b', 'd']);
        assert.deepEqual(ids(await win(storage, 'p1', { scopeFilter: { project_id: ['p2', 'p1', 'p2'] } })), ['a', 'b', 'd'], 'duplicate values');
        assert.deepEqual(ids(await win(storage, 'p1', { scopeFilter: { project_id: ['p1', 'p2'], owner_id: ['u1'] } })), ['a', 'b']);
        assert.deepEqual(ids(await win(storage, 'p1', { scopeFilter: { owner_id: ['u1'], project_id: ['p3'] } })), ['c']);
        // a variable the stored scopes do not have never matches
        assert.deepEqual(ids(await win(storage, 'p1', { scopeFilter: { project_id: ['p1'], org_id: ['o1'] } })), []);
      }));

    test('changes with empty scopes are invisible', () =>
      withStorage(engine, async (storage) => {
        const bare = { ...t('bare'), scopes: {} };
        await seed(storage, 'p1', [[bare], [t('a')]]);
        const w = await win(storage, 'p1', { scopeFilter: { project_id: ['p1'] } });
        assert.deepEqual(w.map((c) => c.commitSeq), [2]);
      }));

    test('pages through more candidates than one batch, skipping non-matching ones', () =>
      withStorage(engine, async (storage) => {
        const commits = [];
        for (let i = 0; i < 150; i++) commits.push([t(`r${pad(i)}`, i % 10 === 9 ? 'p9' : 'p1', i < 140 ? 'u1' : 'u2')]);
        await seed(storage, 'p1', commits);
        // first sorted key is owner_id: candidates are many, verification keeps few
        const w = await win(storage, 'p1', { scopeFilter: { project_id: ['p9'], owner_id: ['u1', 'u2'] } });
        assert.deepEqual(
          w.map((c) => c.commitSeq),
          Array.from({ length: 15 }, (_, k) => 10 * k + 10),
        );
        const all = await win(storage, 'p1', { scopeFilter: { owner_id: ['u1', 'u2'] }, limitChanges: 10_000 });
        assert.equal(all.length, 150);
        assert.deepEqual(all.map((c) => c.commitSeq), Array.from({ length: 150 }, (_, k) => k + 1));
        const limited = await win(storage, 'p1', { scopeFilter: { owner_id: ['u1'] }, limitChanges: 100 });
        assert.equal(limited.length, 100);
        assert.equal(limited.at(-1).commitSeq, 100);
        const tail = await win(storage, 'p1', { scopeFilter: { owner_id: ['u2'] }, limitChanges: 3 });
        assert.deepEqual(tail.map((c) => c.commitSeq), [141, 142, 143]);
      }));

    test('a commit touching several scopes appears once', () =>
      withStorage(engine, async (storage) => {
        await seed(storage, 'p1', [[t('a', 'p1'), t('b', 'p2'), t('c', 'p1')]]);
        const w = await win(storage, 'p1', { scopeFilter: { project_id: ['p1', 'p2'] } });
        assert.equal(w.length, 1);
        assert.deepEqual(w[0].changes.map((c) => c.rowId), ['a', 'b', 'c']);
      }));
  });

  test('scope-value sets beyond the engine variable limit (40,000 values) answer in full', () =>
    withStorage(engine, async (storage) => {
      await writeCommit(storage, 'p1', [
        { table: 'tasks', row: taskRow('a', { project: 'v00007' }) },
        { table: 'tasks', row: taskRow('b', { project: 'v39999' }) },
        { table: 'tasks', row: taskRow('c', { project: 'outside' }) },
      ]);
      const many = Array.from({ length: 40_000 }, (_, i) => `v${String(i).padStart(5, '0')}`);
      const rows = await scan(storage, 'p1', { scopeFilter: { project_id: many } });
      assert.deepEqual(rows.map((r) => r.rowId), ['a', 'b']);
      const w = await win(storage, 'p1', { scopeFilter: { project_id: many } });
      assert.deepEqual(w.flatMap((c) => c.changes.map((ch) => ch.rowId)).sort(), ['a', 'b']);
      assert.equal(await storage.latestScopedChangeSeq('p1', { table: 'tasks', scopeFilter: { project_id: many } }), 1);
      // A set of 65 (first above the per-variable form) and quotes inside values.
      const mid = [...many.slice(0, 64), 'it\'s "quoted"'];
      assert.deepEqual((await scan(storage, 'p1', { scopeFilter: { project_id: mid } })).map((r) => r.rowId), ['a']);
    }));

  describe('latestScopedChangeSeq', () => {
    test('is the index maximum for the first sorted variable without full verification', () =>
      withStorage(engine, async (storage) => {
        const q = (scopeFilter, table = 'tasks') => storage.latestScopedChangeSeq('p1', { table, scopeFilter });
        assert.equal(await q({ project_id: ['p1'] }), 0);
        await seed(storage, 'p1', [[t('a', 'p1', 'u1')], [t('b', 'p2', 'u1')], [t('c', 'p1', 'u2')], [{ table: 'notes', rowId: 'n', op: 'upsert', rowVersion: 1, scopes: { project_id: 'p1' }, payload: Uint8Array.of(0) }]]);
        assert.equal(await q({ project_id: ['p1'] }), 3);
        assert.equal(await q({ project_id: ['p2'] }), 2);
        assert.equal(await q({ project_id: ['p1', 'p2'] }), 3);
        assert.equal(await q({ project_id: ['p9'] }), 0);
        assert.equal(await q({ project_id: ['p1'] }, 'notes'), 4);
        // first sorted key is owner_id; project_id is not verified
        assert.equal(await q({ project_id: ['p2'], owner_id: ['u2'] }), 3);
        assert.equal(await q({}), 0);
        assert.equal(await q({ owner_id: [], project_id: ['p1'] }), 0);
        assert.equal(await storage.latestScopedChangeSeq('p2', { table: 'tasks', scopeFilter: { project_id: ['p1'] } }), 0);
        assert.equal(typeof (await q({ project_id: ['p1'] })), 'number');
      }));

    test('the probe variable is chosen by UTF-16 code-unit order (JS sort), not UTF-8 byte order', () =>
      withStorage(engine, async (storage) => {
        const high = '\uFFFF'; // UTF-8 EF BF BF, UTF-16 FFFF
        const astral = '\u{1F600}'; // UTF-8 F0 9F 98 80, UTF-16 D83D DE00 (sorts first in JS)
        assert.deepEqual([high, astral].sort(), [astral, high]);
        await seed(storage, 'p1', [[{ ...t('a'), scopes: { [high]: 'x' } }], [{ ...t('b'), scopes: { [astral]: 'y' } }], [{ ...t('c'), scopes: { [high]: 'x' } }]]);
        // the probe looks only at the first sorted key (astral): commit 2
        assert.equal(await storage.latestScopedChangeSeq('p1', { table: 'tasks', scopeFilter: { [high]: ['x'], [astral]: ['y'] } }), 2);
        assert.equal(await storage.latestScopedChangeSeq('p1', { table: 'tasks', scopeFilter: { [high]: ['x'] } }), 3);
        // full verification still finds nothing matching both
        assert.deepEqual(await win(storage, 'p1', { scopeFilter: { [high]: ['x'], [astral]: ['y'] } }), []);
      }));

    test('is 0 once the index entries are pruned', () =>
      withStorage(engine, async (storage) => {
        await seed(storage, 'p1', [[t('a')], [t('b')]]);
        await storage.pruneCommitsThrough('p1', 2);
        assert.equal(await storage.latestScopedChangeSeq('p1', { table: 'tasks', scopeFilter: { project_id: ['p1'] } }), 0);
      }));
  });

  describe('scanRows', () => {
    test('rows cross intact: ids beyond ASCII, shared scopes copied per row, large versions', () =>
      withStorage(engine, async (storage) => {
        // Row ids sort by their bytes; each reaches JS as the same string.
        const ids = ['a-plain', 'b-\u00e9t\u00e9', 'c-\u6f22\u5b57', 'd-\u{1F4A5}x', 'e-\u{1F600}\u{1F600}', 'f-end'];
        const ops = ids.map((id, i) => ({ table: 'tasks', row: taskRow(id, { project: 'p1', owner: i % 2 ? 'u2' : 'u1' }, { version: 2 ** 40 + i }) }));
        await writeCommit(storage, 'p1', ops);
        const rows = await scan(storage, 'p1', { scopeFilter: { project_id: ['p1'] } });
        assert.deepEqual(rows.map((r) => r.rowId), ids);
        for (const [i, row] of rows.entries()) assertRow(row, ops[i].row);
        // Rows with the same stored scopes get objects of their own.
        assert.notEqual(rows[0].scopes, rows[2].scopes);
        rows[0].scopes.project_id = 'changed';
        assert.equal(rows[2].scopes.project_id, 'p1');
        const again = await scan(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, afterRowId: ids[2], limit: 2 });
        assert.deepEqual(again.map((r) => r.rowId), ids.slice(3, 5));
        assert.equal(again[0].serverVersion, 2 ** 40 + 3);
      }));

    test('pages by afterRowId (exclusive) in rowId order', () =>
      withStorage(engine, async (storage) => {
        const ops = [];
        for (let i = 149; i >= 0; i--) ops.push({ table: 'tasks', row: taskRow(`r${pad(i)}`, { project: i % 2 ? 'p1' : 'p2' }) });
        await writeCommit(storage, 'p1', ops);
        const filter = { project_id: ['p1', 'p2'] };
        const all = [];
        let after = null;
        for (let page = 0; page < 10; page++) {
          const rows = await scan(storage, 'p1', { scopeFilter: filter, afterRowId: after, limit: 40 });
          assert.ok(rows.length <= 40);
          all.push(...rows.map((r) => r.rowId));
          if (rows.length < 40) break;
          after = rows.at(-1).rowId;
        }
        assert.deepEqual(all, Array.from({ length: 150 }, (_, i) => `r${pad(i)}`));
        const odd = await scan(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, afterRowId: 'r100', limit: 3 });
        assert.deepEqual(odd.map((r) => r.rowId), ['r101', 'r103', 'r105']);
        assertRow(odd[0], taskRow('r101', { project: 'p1' }));
        const big = await scan(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, limit: 500 });
        assert.equal(big.length, 75);
      }));

    test('verifies every filter variable across many non-matching candidates', () =>
      withStorage(engine, async (storage) => {
        const ops = [];
        for (let i = 0; i < 150; i++) ops.push({ table: 'tasks', row: taskRow(`r${pad(i)}`, { project: i % 50 === 7 ? 'p9' : 'p1', owner: i % 2 ? 'u1' : 'u2' }) });
        await writeCommit(storage, 'p1', ops);
        const rows = await scan(storage, 'p1', { scopeFilter: { project_id: ['p9'], owner_id: ['u1', 'u2'] }, limit: 10 });
        assert.deepEqual(rows.map((r) => r.rowId), ['r007', 'r057', 'r107']);
        const one = await scan(storage, 'p1', { scopeFilter: { owner_id: ['u1', 'u2'], project_id: ['p9'] }, afterRowId: 'r007', limit: 1 });
        assert.deepEqual(one.map((r) => r.rowId), ['r057']);
        const none = await scan(storage, 'p1', { scopeFilter: { project_id: ['p1'], org_id: ['o1'] } });
        assert.deepEqual(none, []);
      }));

    test('requires a scope; empty first list or limit <= 0 give []', () =>
      withStorage(engine, async (storage) => {
        await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('a') }]);
        await rejectsQueryError(scan(storage, 'p1', { scopeFilter: {} }), 'sync.storage.scan_requires_scope');
        await rejectsQueryError(scan(storage, 'p1', { scopeFilter: null }), 'sync.storage.scan_requires_scope');
        assert.deepEqual(await scan(storage, 'p1', { scopeFilter: { project_id: [] } }), []);
        assert.deepEqual(await scan(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, limit: 0 }), []);
        assert.deepEqual(await scan(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, limit: -1 }), []);
        assert.deepEqual(await scan(storage, 'p2', { scopeFilter: { project_id: ['p1'] } }), [], 'partition-local');
      }));

    test("afterRowId '' behaves like null and a row with an empty id is never returned", () =>
      withStorage(engine, async (storage) => {
        await writeCommit(storage, 'p1', [
          { table: 'tasks', row: taskRow('') },
          { table: 'tasks', row: taskRow('a') },
        ]);
        assertRow(await storage.getRow('p1', 'tasks', ''), taskRow(''));
        const a = await scan(storage, 'p1', { scopeFilter: { project_id: ['p1'] } });
        const b = await scan(storage, 'p1', { scopeFilter: { project_id: ['p1'] }, afterRowId: '' });
        assert.deepEqual(a.map((r) => r.rowId), ['a']);
        assert.deepEqual(b.map((r) => r.rowId), ['a']);
      }));

    test('a scope move re-homes the row; deletes leave the index', () =>
      withStorage(engine, async (storage) => {
        await writeCommit(storage, 'p1', [
          { table: 'tasks', row: taskRow('a', { project: 'p1', owner: 'u1' }) },
          { table: 'tasks', row: taskRow('b', { project: 'p1', owner: 'u1' }) },
        ]);
        await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('a', { project: 'p2', owner: 'u3' }, { version: 2 }) }]);
        await writeCommit(storage, 'p1', [{ table: 'tasks', delete: 'b', scopes: { project_id: 'p1', owner_id: 'u1' } }]);
        const ids = async (scopeFilter) => (await scan(storage, 'p1', { scopeFilter })).map((r) => r.rowId);
        assert.deepEqual(await ids({ project_id: ['p1'] }), []);
        assert.deepEqual(await ids({ owner_id: ['u1'] }), []);
        assert.deepEqual(await ids({ project_id: ['p2'] }), ['a']);
        assert.deepEqual(await ids({ owner_id: ['u3'] }), ['a']);
        const moved = await storage.getRow('p1', 'tasks', 'a');
        assert.deepEqual(moved.scopes, { project_id: 'p2', owner_id: 'u3' });
        assert.equal(moved.serverVersion, 2);
        // moving back works too
        await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('a', { project: 'p1', owner: 'u1' }, { version: 3 }) }]);
        assert.deepEqual(await ids({ project_id: ['p1'] }), ['a']);
        assert.deepEqual(await ids({ project_id: ['p2'] }), []);
      }));

    test('rows with empty scopes are invisible to scans', () =>
      withStorage(engine, async (storage) => {
        await writeCommit(storage, 'p1', [
          { table: 'tasks', row: { ...taskRow('bare'), scopes: {} } },
          { table: 'tasks', row: taskRow('a') },
        ]);
        assert.deepEqual((await storage.getRow('p1', 'tasks', 'bare')).scopes, {});
        const rows = await scan(storage, 'p1', { scopeFilter: { project_id: ['p1'] } });
        assert.deepEqual(rows.map((r) => r.rowId), ['a']);
      }));
  });

  describe('committed-state point reads', () => {
    test('getRow and getPushResult return undefined when absent', () =>
      withStorage(engine, async (storage) => {
        assert.strictEqual(await storage.getRow('p1', 'tasks', 'nope'), undefined);
        assert.strictEqual(await storage.getPushResult('p1', 'c', 'cc'), undefined);
      }));
  });
}
