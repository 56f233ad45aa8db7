// SQLite only: windows and scans with a small limit or few candidates
// answer on the calling thread, within a row budget; larger ones, and one
// past the budget, run off-thread with the same answer.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { tempDbPath, sqliteFileUrl } from './support/engines.mjs';
import { NativeStorage } from './support/package.mjs';
import { fixtureSchema } from './support/schema.mjs';
import { noteRow, taskRow, upsertChange, writeCommit } from './support/harness.mjs';
import { measured } from './support/measure.mjs';
import { TIME_SCALE } from './support/emulation.mjs';

const require = createRequire(import.meta.url);
const native = require('../lib/native.js');
const V = require('../lib/values.js');

/** The commit seqs of a native window answer, and the row ids of a scan's. */
const seqsOf = (answer) => V.unpackCommits(answer).map((c) => c.commitSeq);
const idsOf = (answer) => V.unpackRows(answer).map((r) => r.rowId);

/** A bare native engine on `path`, with the fixture schema loaded. */
async function engineOn(path) {
  const engine = new native.NativeEngine({ url: sqliteFileUrl(path) });
  const lease = await engine.begin(null);
  await engine.ensureSchema(lease, V.flattenSchema(fixtureSchema()), [], Date.now());
  await engine.unlock(lease, true);
  return engine;
}

async function filled(commits, other = { project: 'p1', owner: 'u2' }) {
  const path = tempDbPath();
  const storage = new NativeStorage({ url: sqliteFileUrl(path) });
  await storage.ensureSchema(fixtureSchema());
  // Each commit: one task of p1/u1 and two `other` ones (p1/u2 unless
  // given), so a filter on both variables keeps one change in three.
  for (let c = 0; c < commits; c++) {
    await writeCommit(storage, 'p', [
      { table: 'tasks', row: taskRow(`a${String(c).padStart(4, '0')}`, { project: 'p1', owner: 'u1' }) },
      { table: 'tasks', row: taskRow(`b${String(c).padStart(4, '0')}`, other) },
      { table: 'tasks', row: taskRow(`c${String(c).padStart(4, '0')}`, other) },
    ]);
  }
  return { path, storage };
}

describe('sqlite reads on the calling thread', () => {
  // Budgets (src/sqlite/engine.rs): at most 1024 candidates (a limit, a
  // window's seq range, a scan's index-only count), 1536 stepped rows and
  // 4 MiB of payload on the calling thread.
  test('windows: small ones answer at once; over the row budget the same answer comes later', async () => {
    const { path, storage } = await filled(600);
    const engine = await engineOn(path);
    try {
      const both = JSON.stringify({ owner_id: ['u1'], project_id: ['p1'] });
      const read = (filter, limit) => engine.readCommitWindow('p', 'tasks', filter, 0, 100000, limit);
      // Two changes from 3 joined rows each: well inside the budget.
      const small = read(JSON.stringify({ project_id: ['p1'] }), 2);
      assert.ok(!(small instanceof Promise), 'a small window answers at once');
      // A large limit over a short seq range (the last 5 commits): at once.
      const tail = engine.readCommitWindow('p', 'tasks', both, 595, 600, 5000);
      assert.ok(!(tail instanceof Promise), 'a short range answers at once');
      assert.deepEqual(seqsOf(tail), [596, 597, 598, 599, 600]);
      const open = read(both, 5000);
      assert.ok(open instanceof Promise, 'a long range: off-thread');
      assert.equal(V.unpackCommits(await open).length, 600);
      // A limit past 1024 over a long range: off-thread.
      const big = read(both, 2000);
      assert.ok(big instanceof Promise, 'many candidates: off-thread');
      // A limit of 1024 that no change matches: 600 candidates of 3 rows
      // each are read, past the row budget, so off-thread with the same
      // (empty) answer.
      const none = read(JSON.stringify({ owner_id: ['u1'], project_id: ['p2'] }), 1024);
      assert.ok(none instanceof Promise, 'over budget: off-thread');
      assert.deepEqual(V.unpackCommits(await none), []);
      const within = read(both, 500);
      assert.ok(!(within instanceof Promise), '1500 rows: within the budget');
      assert.deepEqual(seqsOf(within), [...Array(500).keys()].map((i) => i + 1));
      const seqs = seqsOf(await big);
      assert.deepEqual(seqs, [...Array(600).keys()].map((i) => i + 1));
      const all = await storage.readCommitWindow('p', { table: 'tasks', scopeFilter: { owner_id: ['u1'], project_id: ['p1'] }, afterSeq: 0, throughSeq: 100000, limitChanges: 2000 });
      assert.deepEqual(all.map((c) => c.commitSeq), seqs);
      assert.deepEqual(all.map((c) => c.changes.map((ch) => ch.rowId)), all.map((c, i) => [`a${String(i).padStart(4, '0')}`]));
    } finally {
      await engine.close();
      await storage.close();
    }
  });

  test('a loop of reads answered at once lets the event loop turn every few milliseconds, not after every read', async () => {
    const { storage } = await filled(200);
    try {
      const window = { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterSeq: 100, throughSeq: 200, limitChanges: 50 };
      const scan = { table: 'tasks', scopeFilter: { project_id: ['p1'] }, limit: 50 };
      const commits = (await storage.readCommitWindow('p', window)).length;
      assert.ok(commits > 0);
      let reads = 0;
      let turns = 0;
      let counting = true;
      const count = () => {
        turns++;
        if (counting) setImmediate(count);
      };
      setImmediate(count);
      // A host's loop of small reads, each answered on the calling thread,
      // for 400 ms: with nothing to make it wait, it would hold the event
      // loop all that time.
      const r = await measured(async () => {
        const until = performance.now() + 400 * TIME_SCALE;
        while (performance.now() < until) {
          const w = await storage.readCommitWindow('p', window);
          assert.equal(w.length, commits);
          const rows = await storage.scanRows('p', scan);
          assert.equal(rows.length, 50);
          reads += 2;
        }
      });
      counting = false;
      assert.ok(r.ok, String(r.error));
      assert.ok(r.stall < 50 * TIME_SCALE, `event loop stalled ${r.stall.toFixed(1)} ms`);
      assert.ok(turns > 10, `the event loop turned ${turns} times in 400 ms`);
      if (TIME_SCALE === 1) {
        // A read takes well under a millisecond here, so most do not wait
        // for a turn (each would add one to \`turns\`).
        assert.ok(turns < reads / 2, `${turns} turns for ${reads} reads`);
      }
    } finally {
      await storage.close();
    }
  });

  test('scans: small pages answer at once; over the row budget the same rows come later', async () => {
    // Every row is u1's; a… rows are in p1, b… and c… rows in p2.
    const { path, storage } = await filled(1000, { project: 'p2', owner: 'u1' });
    const engine = await engineOn(path);
    try {
      const scan = (filter, limit) => engine.scanRows('p', 'tasks', filter, '', limit);
      const small = scan(JSON.stringify({ project_id: ['p1'] }), 5);
      assert.ok(!(small instanceof Promise), 'a small page answers at once');
      const page = scan(JSON.stringify({ project_id: ['p1'] }), 1000);
      assert.ok(!(page instanceof Promise), 'a 1000-row page answers at once');
      assert.equal(V.unpackRows(page).length, 1000);
      // A limit past 1024, and the probe (owner_id, first in order) yields
      // 3000 candidates: off-thread.
      const late = scan(JSON.stringify({ owner_id: ['u1'], project_id: ['p2'] }), 1100);
      assert.ok(late instanceof Promise, 'many candidates: off-thread');
      // A limit of 1000, but a filter on p2 skips the 1000 a… rows first:
      // past the row budget, so off-thread with the same rows.
      const skipping = scan(JSON.stringify({ owner_id: ['u1'], project_id: ['p2'] }), 1000);
      assert.ok(skipping instanceof Promise, 'over budget: off-thread');
      const bs = [...Array(1000).keys()].map((i) => `b${String(i).padStart(4, '0')}`);
      assert.deepEqual(idsOf(await skipping), bs);
      // The last rows of the probe: a large limit over few candidates.
      const last = scan(JSON.stringify({ owner_id: ['u1'] }), 5000);
      assert.ok(last instanceof Promise, 'many candidates: off-thread');
      await last;
      const end = engine.scanRows('p', 'tasks', JSON.stringify({ owner_id: ['u1'] }), 'c0995', 5000);
      assert.ok(!(end instanceof Promise), 'few candidates answer at once');
      assert.deepEqual(idsOf(end), ['c0996', 'c0997', 'c0998', 'c0999']);
      const lateAnswer = await late;
      const ids = [...bs, ...[...Array(100).keys()].map((i) => `c${String(i).padStart(4, '0')}`)];
      assert.deepEqual(idsOf(lateAnswer), ids);
      const rows = await storage.scanRows('p', { table: 'tasks', scopeFilter: { owner_id: ['u1'], project_id: ['p2'] }, limit: 1100 });
      assert.deepEqual(rows.map((r) => r.rowId), ids);
      const few = await storage.scanRows('p', { table: 'tasks', scopeFilter: { project_id: ['p1'] }, limit: 5 });
      assert.deepEqual(few.map((r) => r.rowId), ['a0000', 'a0001', 'a0002', 'a0003', 'a0004']);
      assert.ok(few[0].payload instanceof Uint8Array && few[0].payload.length > 0);
    } finally {
      await engine.close();
      await storage.close();
    }
  });

  test('one-value windows walk the log beside the scope index: the same commits however the scope interleaves', async () => {
    // Commits 1…600: every 100th a task of p3 (sparse: the walks hand over
    // to the join at once), else every 3rd of p1 (one candidate per three
    // commits: handed over after a few dozen), the rest of p2 (walked to
    // the end); every 7th also writes a note, and every 11th only a note
    // (commits without a task change, and changes of another table).
    const path = tempDbPath();
    const storage = new NativeStorage({ url: sqliteFileUrl(path) });
    await storage.ensureSchema(fixtureSchema());
    const project = (c) => (c % 100 === 0 ? 'p3' : c % 3 === 0 ? 'p1' : 'p2');
    const tasksOf = new Map();
    try {
      for (let c = 1; c <= 600; c++) {
        const ops = [];
        if (c % 11 !== 0) {
          const ids = c % 5 === 0 ? [`t${c}a`, `t${c}b`] : [`t${c}`];
          for (const id of ids) ops.push({ table: 'tasks', row: taskRow(id, { project: project(c), owner: 'u1' }) });
          tasksOf.set(c, ids);
        }
        if (c % 7 === 0 || c % 11 === 0) ops.push({ table: 'notes', row: noteRow(`n${c}`, project(c), `body ${c}`) });
        await writeCommit(storage, 'p', ops);
      }
      const expect = (p, after, limit) => {
        const out = [];
        let total = 0;
        for (const [c, ids] of tasksOf) {
          if (c <= after || (p !== undefined && project(c) !== p)) continue;
          if (total >= limit) break;
          out.push([c, ids]);
          total += ids.length;
        }
        return out;
      };
      const read = async (filter, afterSeq, limitChanges) =>
        (await storage.readCommitWindow('p', { table: 'tasks', scopeFilter: filter, afterSeq, throughSeq: 600, limitChanges })).map(
          (c) => [c.commitSeq, c.changes.map((ch) => ch.rowId)],
        );
      for (const p of ['p1', 'p2', 'p3']) {
        assert.deepEqual(await read({ project_id: [p] }, 0, 1000), expect(p, 0, 1000), p);
        assert.deepEqual(await read({ project_id: [p] }, 250, 40), expect(p, 250, 40), `${p} after 250`);
      }
      assert.deepEqual(await read({ owner_id: ['u1'] }, 0, 1000), expect(undefined, 0, 1000));
      assert.deepEqual(await read({ owner_id: ['u1'], project_id: ['p2'] }, 100, 300), expect('p2', 100, 300));
      // Each change's own fields, not a neighbour's.
      const [commit] = await storage.readCommitWindow('p', { table: 'tasks', scopeFilter: { project_id: ['p2'] }, afterSeq: 9, throughSeq: 600, limitChanges: 1 });
      assert.equal(commit.commitSeq, 10);
      assert.deepEqual(commit.changes.map((ch) => [ch.rowId, ch.scopes.project_id]), [['t10a', 'p2'], ['t10b', 'p2']]);
      const row = await storage.getRow('p', 'tasks', 't10b');
      assert.deepEqual(Buffer.from(commit.changes[1].payload), Buffer.from(row.payload));
    } finally {
      await storage.close();
    }
  });

  test('one-value scans walk the table beside the scope index: the same rows however the scope interleaves', async () => {
    // r0000…r0899: every 100th in p3 (sparse: the walk hands over to the
    // join at once), else every 3rd in p1 (one candidate per three table
    // rows: the walk hands over after a few dozen), the rest in p2 (two in
    // three: walked to the end). A deleted row leaves neither row nor
    // scope entry.
    const path = tempDbPath();
    const storage = new NativeStorage({ url: sqliteFileUrl(path) });
    await storage.ensureSchema(fixtureSchema());
    const project = (i) => (i % 100 === 0 ? 'p3' : i % 3 === 0 ? 'p1' : 'p2');
    const id = (i) => `r${String(i).padStart(4, '0')}`;
    try {
      for (let c = 0; c < 90; c++) {
        const ops = [];
        for (let i = c * 10; i < c * 10 + 10; i++) ops.push({ table: 'tasks', row: taskRow(id(i), { project: project(i), owner: 'u1' }) });
        await writeCommit(storage, 'p', ops);
      }
      await writeCommit(storage, 'p', [{ table: 'tasks', delete: id(451), scopes: { project_id: 'p2', owner_id: 'u1' } }]);
      const kept = [...Array(900).keys()].filter((i) => i !== 451);
      const expect = (p, after = '', limit = 5000) =>
        kept.filter((i) => (p === undefined || project(i) === p) && id(i) > after).slice(0, limit).map(id);
      const scan = async (filter, afterRowId, limit) =>
        (await storage.scanRows('p', { table: 'tasks', scopeFilter: filter, afterRowId, limit })).map((r) => r.rowId);
      for (const p of ['p1', 'p2', 'p3']) {
        assert.deepEqual(await scan({ project_id: [p] }, null, 1000), expect(p), p);
        assert.deepEqual(await scan({ project_id: [p] }, 'r0440', 50), expect(p, 'r0440', 50), `${p} after r0440`);
      }
      assert.deepEqual(await scan({ owner_id: ['u1'] }, null, 1000), expect(undefined));
      assert.deepEqual(await scan({ owner_id: ['u1'], project_id: ['p2'] }, 'r0100', 300), expect('p2', 'r0100', 300));
      // Each row's own fields, not a neighbour's.
      const rows = await storage.scanRows('p', { table: 'tasks', scopeFilter: { project_id: ['p2'] }, afterRowId: 'r0600', limit: 20 });
      for (const r of rows) {
        const one = await storage.getRow('p', 'tasks', r.rowId);
        assert.deepEqual([r.rowId, r.scopes, Buffer.from(r.payload)], [one.rowId, one.scopes, Buffer.from(one.payload)]);
      }
    } finally {
      await storage.close();
    }
  });

  test('windows and scans: past 4 MiB of payload, the same answer comes off-thread', async () => {
    const path = tempDbPath();
    const storage = new NativeStorage({ url: sqliteFileUrl(path) });
    await storage.ensureSchema(fixtureSchema());
    // Ten commits of one task each, every title 1 MiB: 10 rows, 10 MiB.
    const title = (c) => String(c).repeat(1 << 20);
    for (let c = 0; c < 10; c++) {
      await writeCommit(storage, 'p', [{ table: 'tasks', row: taskRow(`big${c}`, { title: title(c) }) }]);
    }
    const engine = await engineOn(path);
    try {
      const filter = JSON.stringify({ project_id: ['p1'] });
      const two = engine.readCommitWindow('p', 'tasks', filter, 0, 100, 2);
      assert.ok(!(two instanceof Promise), '2 MiB: at once');
      const window = engine.readCommitWindow('p', 'tasks', filter, 0, 100, 10);
      assert.ok(window instanceof Promise, '10 MiB: off-thread');
      const commits = V.unpackCommits(await window);
      assert.equal(commits.length, 10);
      const scan = engine.scanRows('p', 'tasks', filter, '', 10);
      assert.ok(scan instanceof Promise, '10 MiB: off-thread');
      const rows = V.unpackRows(await scan);
      assert.deepEqual(rows.map((r) => r.rowId), [...Array(10).keys()].map((c) => `big${c}`));
      assert.deepEqual(rows.map((r) => r.payload.length), commits.map((c) => c.changes[0].payload.length));
      assert.ok(rows.every((r) => r.payload.length > 1 << 20));
      const few = engine.scanRows('p', 'tasks', filter, '', 3);
      assert.ok(!(few instanceof Promise), '3 MiB: at once');
    } finally {
      await engine.close();
      await storage.close();
    }
  });

  test('registered queries: cheap ones answer at once; one past its step budget moves off-thread for good', async () => {
    const { path, storage } = await filled(200);
    const engine = await engineOn(path);
    try {
      const ask = (sql, params) => engine.queryAuthoritative('p', { sql, tables: ['tasks'] }, params, undefined);
      // The engine's first query opens its reader and reads the schema: on
      // a loaded machine that alone can pass the 2 ms budget. Another text
      // warms it, so the budget below meets the query alone.
      await ask('SELECT title FROM tasks WHERE id = ?', ['a0001']);
      const point = ask('SELECT id FROM tasks WHERE id = ?', ['a0007']);
      assert.ok(!(point instanceof Promise), 'a cheap query answers at once');
      assert.deepEqual(point.rows, [{ id: 'a0007' }]);
      // 600 rows, cross-joined with themselves: far past the budget.
      const heavy = 'SELECT count(*) AS n FROM tasks AS a, tasks AS b WHERE a.title <> b.id';
      const first = ask(heavy, []);
      assert.ok(first instanceof Promise, 'over budget: off-thread');
      assert.deepEqual((await first).rows, [{ n: 360000 }]);
      const again = ask(heavy, []);
      assert.ok(again instanceof Promise, 'known to be expensive: off-thread at once');
      assert.deepEqual((await again).rows, [{ n: 360000 }]);
      // Through the storage, the same answers.
      const out = await storage.queryAuthoritative('p', { sql: heavy, params: [], tables: ['tasks'] });
      assert.deepEqual(out.rows, [{ n: 360000 }]);
      assert.ok(out.maxCommitSeq >= 200);
    } finally {
      await engine.close();
      await storage.close();
    }
  });

  test('SYNCULAR_NATIVE_STALL_MS sets the calling-thread budget of registered queries; an invalid value says so', () => {
    const probe = (value) => {
      const env = { ...process.env, SYNCULAR_NATIVE_STALL_MS: value };
      const r = spawnSync(process.execPath, [fileURLToPath(new URL('./support/stall-probe.mjs', import.meta.url))], { env, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      return { ...JSON.parse(r.stdout.trim().split('\n').pop()), stderr: r.stderr };
    };
    const roomy = probe('60000');
    assert.deepEqual(roomy, { atOnce: true, rows: [{ n: 50 }], stderr: '' });
    // One microsecond: the first progress check is already past it.
    const tight = probe('0.001');
    assert.equal(tight.atOnce, false, 'past the budget: off-thread');
    assert.deepEqual(tight.rows, [{ n: 50 }]);
    for (const bad of ['fast', '0', '-5', '60001']) {
      const r = probe(bad);
      assert.deepEqual(r.rows, [{ n: 50 }]);
      assert.match(r.stderr, new RegExp(`SYNCULAR_NATIVE_STALL_MS="${bad}" is .*; the budget stays 2 ms`));
    }
  });

  test('point reads see committed state only, whether the idle writer or a reader answers them', async () => {
    // On the calling thread an idle writer connection answers point reads
    // (its page cache is warm); beside an open transaction a reader does.
    const path = tempDbPath();
    const storage = new NativeStorage({ url: sqliteFileUrl(path) });
    const row = (id) => taskRow(id, { project: 'p1', owner: 'u1' });
    const open = async (id) => {
      const tx = await storage.begin('p');
      await tx.lockPartitionForPush();
      await tx.upsertRow('tasks', row(id), { opIndex: 0 });
      await tx.appendCommit({ clientId: 'c', clientCommitId: id, actorId: 'a', createdAtMs: 1, changes: [upsertChange('tasks', row(id))] });
      return tx;
    };
    try {
      await storage.ensureSchema(fixtureSchema());
      await writeCommit(storage, 'p', [{ table: 'tasks', row: row('t1') }]);
      assert.equal(await storage.getMaxCommitSeq('p'), 1);
      assert.equal((await storage.getRow('p', 'tasks', 't1')).serverVersion, 1);

      const tx = await open('t2');
      assert.equal(await tx.getRow('tasks', 't2') !== undefined, true, 'the transaction sees its own row');
      assert.equal(await storage.getRow('p', 'tasks', 't2') ?? null, null, 'beside it, the row is not there yet');
      assert.equal(await storage.getMaxCommitSeq('p'), 1);
      await tx.commit();
      assert.equal(await storage.getMaxCommitSeq('p'), 2);
      assert.notEqual(await storage.getRow('p', 'tasks', 't2') ?? null, null);

      const undone = await open('t3');
      await undone.rollback();
      assert.equal(await storage.getMaxCommitSeq('p'), 2);
      assert.equal(await storage.getRow('p', 'tasks', 't3') ?? null, null);

      // A write between reads is seen by the next read at once.
      const client = { clientId: 'c', actorId: 'a', wireVersion: 1, cursor: 0, subscriptions: [], updatedAtMs: 0 };
      for (let i = 1; i <= 50; i++) {
        await storage.putClientRecord('p', { ...client, cursor: i, updatedAtMs: i });
        assert.equal((await storage.getClientRecord('p', 'c')).cursor, i);
      }
    } finally {
      await storage.close();
    }
  });
});
