// The move's final pass from the command (issue 51, docs/copy.md, "The
// final pass from the command"): `syncular-native-storage copy --final`
// runs in another process than the host, takes the SQLite file's write
// lock, copies the rest and marks the file moved; the host's next write is
// refused with ERR_SYNCULAR_MOVED, so is any other storage's on the file,
// until `moved --clear`. Then the acceptance through upstream's handler,
// CI-sized (__test__/host/copy-scale.ts; the full-scale run is in
// docs/copy.md): a file the in-tree 0.15.48 storage wrote, swapped in and
// moved under push and pull load with the command.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { engines, freshPgSchema, sqliteFileUrl, tempDbPath } from './support/engines.mjs';
import { NativeStorage, pkg } from './support/package.mjs';
import { hostPush, taskRow } from './support/harness.mjs';
import { fixtureSchema } from './support/schema.mjs';
import { hostTest, runHost } from './support/upstream.mjs';

const pg = engines.find((e) => e.name === 'postgres');
const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'syncular-native-storage.mjs');

function command(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out, err }));
  });
}

describe('copy --final: the command ends the move while a host writes', { skip: pg === undefined ? 'needs SYNCULAR_TEST_PG_URL' : false }, () => {
  test('writes wait for the pass, then every writer of the file is refused until the mark is cleared', async (t) => {
    const url = pg.requireUrl();
    const path = tempDbPath();
    const file = sqliteFileUrl(path);
    const schema = freshPgSchema();
    const s = new NativeStorage({ url: file });
    await s.ensureSchema(fixtureSchema());
    await s.touchPartition('p1', 1, 'epoch-p1');
    const acked = [];
    const other = [];
    let refused;
    const writer = (async () => {
      for (let i = 0; refused === undefined; i++) {
        try {
          const r = await hostPush(s, 'p1', { clientId: 'live', clientCommitId: `live-${i}`, ops: [{ table: 'tasks', row: taskRow(`t${i}`, { title: `v${i}` }) }] });
          acked.push({ key: `live-${i}`, seq: r.commitSeq });
        } catch (err) {
          if (err.code === 'ERR_SYNCULAR_MOVED') refused = { err, atMs: Date.now() };
          else other.push(`${err.code}: ${err.message}`);
        }
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    while (acked.length < 20) await new Promise((r) => setTimeout(r, 5));
    const run = await command(['copy', file, url, '--schema', schema, '--final', '--verify']);
    assert.equal(run.code, 0, run.err);
    const report = JSON.parse(run.out);
    await writer;
    t.diagnostic(JSON.stringify({ acked: acked.length, passes: report.catchUp?.map((p) => p.commits), final: report.finalPass.commits, writesHeldMs: report.finalPass.writesHeldMs, lockWaitMs: report.finalPass.lockWaitMs }));
    assert.deepEqual(other, []);
    assert.equal(report.verify.equal, true, JSON.stringify(report.verify.firstDifference));
    assert.ok(report.finalPass.writesHeldMs < 1000, `writes held ${report.finalPass.writesHeldMs} ms`);
    assert.ok(refused.atMs >= report.finalPass.lockedAtMs, 'refused only after the pass took the lock');
    assert.match(refused.err.message, /moved to postgres:\/\/[^:@]*@127\.0\.0\.1/);
    assert.doesNotMatch(refused.err.message, /syncular-pw-test/);

    // Every acknowledged push is on PostgreSQL, the target takes writes on.
    const d = new NativeStorage({ url, schema, maxConnections: 2 });
    try {
      await d.ensureSchema(fixtureSchema());
      for (const a of acked) assert.equal((await d.getPushResult('p1', 'live', a.key))?.commitSeq, a.seq, a.key);
      const next = await hostPush(d, 'p1', { clientId: 'live', clientCommitId: 'after', ops: [{ table: 'tasks', row: taskRow('after') }] });
      assert.equal(next.commitSeq, acked.at(-1).seq + 1);
    } finally {
      await d.close();
    }

    // The mark is in the file: reads go on; a storage opened afresh (as a
    // restarted host) is refused too, as is a write through storage-level members.
    assert.equal((await s.getMaxCommitSeq('p1')), acked.at(-1).seq);
    await s.close();
    const again = new NativeStorage({ url: file });
    try {
      assert.equal(await again.getMaxCommitSeq('p1'), acked.at(-1).seq);
      // At the recorded version ensureSchema writes nothing: it succeeds.
      await again.ensureSchema(fixtureSchema());
      await assert.rejects(again.touchPartition('p1', 2, 'epoch-p1'), (err) => err.code === 'ERR_SYNCULAR_MOVED');
      await assert.rejects(hostPush(again, 'p1', { clientId: 'x', clientCommitId: 'x', ops: [{ table: 'tasks', row: taskRow('x') }] }), (err) => err.code === 'ERR_SYNCULAR_MOVED');
      const mark = await pkg.movedMark(file);
      assert.match(mark.moved.target, /^postgres:\/\/[^:@]*@127\.0\.0\.1/);
      assert.ok(mark.moved.movedAtMs >= report.finalPass.lockedAtMs);

      // Cleared (an operator moving back): the same open storage writes again.
      const cleared = spawnSync(process.execPath, [BIN, 'moved', file, '--clear'], { encoding: 'utf8' });
      assert.equal(cleared.status, 0, cleared.stderr);
      assert.deepEqual(JSON.parse(cleared.stdout), { moved: null, cleared: true });
      await again.touchPartition('p1', 3, 'epoch-p1');
      const r = await hostPush(again, 'p1', { clientId: 'x', clientCommitId: 'y', ops: [{ table: 'tasks', row: taskRow('y') }] });
      assert.equal(r.commitSeq, acked.at(-1).seq + 1);
      assert.deepEqual(await pkg.movedMark(file), { moved: null, cleared: null });
      assert.equal((await pkg.movedMark(file, { clear: true })).cleared, false);
    } finally {
      await again.close();
    }
    assert.equal(spawnSync(process.execPath, [BIN, 'moved'], { encoding: 'utf8' }).status, 2);
    assert.equal(spawnSync(process.execPath, [BIN, 'copy', file, url, '--final', '--verify-only'], { encoding: 'utf8' }).status, 2);
    await assert.rejects(pkg.movedMark(file, { clear: 'yes' }), (err) => err.code === 'ERR_SYNCULAR_INVALID_ARGUMENT');
    await assert.rejects(pkg.movedMark(url), (err) => err.code === 'ERR_SYNCULAR_COPY_UNSUPPORTED');
  });
});

describe('copy --final under load through upstream\'s handler', () => {
  const skip = hostTest.skip ?? (pg === undefined ? 'needs SYNCULAR_TEST_PG_URL' : undefined);
  test('an in-tree 0.15.48 file, swapped in and moved with the command: no acknowledged push lost, refused under 1 s, next pulls identical, verify equal', { skip }, async (t) => {
    const url = pg.requireUrl();
    const args = [tempDbPath(), freshPgSchema(), '--partitions', '4', '--write-intree', '240', '--warm-ms', '800', '--between-ms', '800', '--after-ms', '800'];
    const r = await runHost('copy-scale.ts', args, { env: { SYNCULAR_TEST_PG_URL: url, SYNCULAR_NODE: process.execPath }, timeoutMs: 240_000 });
    t.diagnostic(JSON.stringify(r));
    assert.equal(r.acked.missing, 0, JSON.stringify(r.acked.firstMissing));
    assert.deepEqual(r.otherFailures, []);
    assert.ok(r.acked.onSqlite > 0 && r.acked.onPostgres > 0, JSON.stringify(r.acked));
    assert.equal(r.verify.equal, true, JSON.stringify(r.verify.firstDifference));
    assert.equal(r.refused.beforeFinalPass, 0);
    assert.ok(r.refused.windowMs <= 1000, `refused for ${r.refused.windowMs} ms`);
    assert.equal(r.nextPulls.compared, 8);
    assert.equal(r.nextPulls.identical, r.nextPulls.compared, JSON.stringify(r.nextPulls.firstDiff));
    assert.deepEqual(r.nextPulls.bootstrapsOrResets, []);
    assert.match(r.mark.file, /^postgres:\/\//);
    assert.equal(r.mark.cleared, true);
    // A push that committed on SQLite just before the mark, whose request's
    // later write was refused, is acknowledged on PostgreSQL as `cached`
    // when sent again: it was moved, and counted there.
    assert.equal(r.commitsMoved, r.commitsBefore + r.acked.onSqlite + r.cachedAfterRefusal);
    assert.equal(r.ok, true);
  });
});
