// Operations (docs/operations.md): versions(), ping(), stats() and its
// Prometheus rendering, on every engine.
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { createRequire } from 'node:module';
import { engines } from './support/engines.mjs';
import { pkg, NativeStorage } from './support/package.mjs';
import { fixtureSchema } from './support/schema.mjs';
import { taskRow, writeCommit, withStorage } from './support/harness.mjs';
import { query, sqliteCliAvailable } from './support/sqlite-cli.mjs';

const require = createRequire(import.meta.url);
const CLOSED = (err) => err?.code === 'ERR_SYNCULAR_CLOSED';
const delay = (ms) => new Promise((r) => setTimeout(r, ms));

// The Prometheus project's own parser of the text format (the Python
// client's), as a second reader beside ours. .ci/run installs it; without
// it the comparison is skipped, naming why, except under CI=true.
const PROM_PARSE = `
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    out[f.name] = {"type": f.type, "samples": [[s.name, s.labels, s.value] for s in f.samples]}
print(json.dumps(out))
`;
function promReference(text) {
  const { spawnSync } = require('node:child_process');
  const r = spawnSync('python3', ['-c', PROM_PARSE], { input: text, encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    const why = r.error?.message ?? r.stderr.trim().split('\n').pop();
    if (/No module named|ENOENT/.test(why) && process.env.CI !== 'true') return { skipped: `python3 with prometheus_client is not here (${why}); pip install prometheus_client` };
    assert.fail(`the reference parser refused the text: ${why}`);
  }
  return { families: JSON.parse(r.stdout) };
}


/**
 * Four pushers of one-row commits on partitions p0 and p1, each calling
 * `between()` after every commit: `acked` lists { partition, seq, id } in
 * acknowledgement order; `stop()` ends them.
 */
function fourPushers(storage, between = async () => {}) {
  const acked = [];
  let stopped = false;
  const pusher = async (n) => {
    const partition = `p${n % 2}`;
    for (let i = 0; !stopped; i++) {
      const id = `w${n}-${i}`;
      const seq = await writeCommit(storage, partition, [{ table: 'tasks', row: taskRow(id) }]);
      acked.push({ partition, seq, id });
      await between();
    }
  };
  const pushers = [0, 1, 2, 3].map(pusher);
  return {
    acked,
    stop: () => {
      stopped = true;
      return Promise.all(pushers);
    },
  };
}

test('versions(): the package, the addon build and the bundled SQLite', () => {
  const v = pkg.versions();
  assert.equal(v.package, require('../package.json').version);
  const crate = /^version = "([^"]+)"/m.exec(readFileSync(new URL('../Cargo.toml', import.meta.url), 'utf8'))[1];
  assert.equal(v.addon, crate);
  assert.match(v.addonProfile, /^(debug|release)$/);
  assert.match(v.sqlite, /^3\.\d+\.\d+$/);
  assert.equal(v.node, process.versions.node);
  assert.ok(Object.isFrozen(v));
});

test('ping() on an unreachable PostgreSQL rejects: it makes a real round trip', async () => {
  const storage = new NativeStorage({ url: 'postgres://nobody@127.0.0.1:1/db', connectTimeoutMs: 300 });
  await assert.rejects(storage.ping(), (err) => typeof err.code === 'string');
  await storage.close();
});

/** A strict reader of the text exposition format: `{ name: { type, help, samples: [{ labels, value }] } }`. */
function parsePrometheus(text) {
  assert.ok(text.endsWith('\n'), 'the text ends with a newline');
  const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
  const families = {};
  for (const line of text.slice(0, -1).split('\n')) {
    let m;
    if ((m = /^# HELP (\S+) (.+)$/.exec(line))) {
      assert.match(m[1], NAME);
      assert.equal(families[m[1]], undefined, `one HELP for ${m[1]}`);
      families[m[1]] = { help: m[2], type: undefined, samples: [] };
    } else if ((m = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line))) {
      assert.ok(families[m[1]] && families[m[1]].type === undefined && families[m[1]].samples.length === 0, `TYPE of ${m[1]} before its samples`);
      families[m[1]].type = m[2];
    } else if ((m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line))) {
      const family = families[m[1]];
      assert.ok(family?.type, `sample ${m[1]} follows its TYPE line`);
      const labels = {};
      if (m[2] !== undefined) {
        const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/gy;
        let at = 0;
        let l;
        while (at < m[2].length && (l = re.exec(m[2])) !== null) {
          labels[l[1]] = l[2];
          at = re.lastIndex;
        }
        assert.equal(at, m[2].length, `labels of ${line} parse`);
      }
      const value = Number(m[3]);
      assert.ok(m[3] === 'NaN' || !Number.isNaN(value), `value of ${line}`);
      if (family.type === 'counter') assert.ok(value >= 0, `${line}: a counter is never negative`);
      family.samples.push({ labels, value });
    } else {
      assert.fail(`not a line of the exposition format: ${JSON.stringify(line)}`);
    }
  }
  return families;
}

for (const engine of engines) {
  describe(`operations (${engine.name})`, () => {
    test('ping() answers the engine, a round-trip time and the server version', async () => {
      const storage = engine.create();
      const out = await storage.ping();
      assert.equal(out.engine, engine.dialect);
      assert.ok(Number.isFinite(out.roundTripMs) && out.roundTripMs >= 0);
      if (engine.dialect === 'sqlite') {
        assert.equal(out.serverVersion, pkg.versions().sqlite);
      } else {
        const { Client } = require('pg');
        const client = new Client({ connectionString: engine.url });
        await client.connect();
        const { rows } = await client.query('SHOW server_version');
        await client.end();
        assert.equal(out.serverVersion, rows[0].server_version);
      }
      await storage.close();
      await assert.rejects(storage.ping(), CLOSED);
      await assert.rejects(storage.stats(), CLOSED);
      await assert.rejects(storage.backup('x.db'), CLOSED);
    });

    test("a transaction's own members are its 21 members, each counted under its own name", async () => {
      const { TX_METHODS } = require('../lib/transaction.js');
      await withStorage(engine, async (storage) => {
        const tx = await storage.begin('p');
        assert.deepEqual(Object.keys(tx), TX_METHODS);
        // Each member once (most fail on missing arguments), commit on a second transaction.
        for (const name of TX_METHODS) {
          if (name === 'commit' || name === 'rollback') continue;
          await Promise.allSettled([Promise.resolve().then(() => tx[name]())]);
        }
        await tx.rollback();
        await (await storage.begin('p')).commit();
        const m = (await storage.stats()).members;
        for (const name of TX_METHODS) assert.equal(m[`tx.${name}`]?.calls, 1, `tx.${name}`);
      });
    });

    test('stats() counts the calls and errors a test made, and renders as Prometheus text', async (t) => {
      await withStorage(engine, async (storage) => {
        for (let i = 0; i < 3; i++) await writeCommit(storage, 'p', [{ table: 'tasks', row: taskRow(`t${i}`) }]);
        await storage.getRow('p', 'tasks', 't0');
        await assert.rejects(storage.getRow('p', 'no_such_table', 'x'));
        await assert.rejects(storage.getMaxCommitSeq(42));
        await storage.getMaxCommitSeq('p');
        const tx = await storage.begin('p');
        await assert.rejects(tx.upsertRow('no_such_table', taskRow('z'), { opIndex: 0 }));
        await tx.rollback();
        // Two writers at once: the second waits for the first (SQLite's one writer).
        const a = await storage.begin('p');
        const b = storage.begin('p');
        await new Promise((r) => setTimeout(r, 20));
        await a.rollback();
        await (await b).rollback();

        const stats = await storage.stats();
        assert.equal(stats.engine, engine.dialect);
        const m = stats.members;
        assert.deepEqual(m.ensureSchema, { calls: 1, errors: 0 });
        assert.deepEqual(m.begin, { calls: 6, errors: 0 });
        assert.deepEqual(m.getRow, { calls: 2, errors: 1 });
        assert.deepEqual(m.getMaxCommitSeq, { calls: 2, errors: 1 });
        assert.deepEqual(m['tx.lockPartitionForPush'], { calls: 3, errors: 0 });
        assert.deepEqual(m['tx.upsertRow'], { calls: 4, errors: 1 });
        assert.deepEqual(m['tx.appendCommit'], { calls: 3, errors: 0 });
        assert.deepEqual(m['tx.commit'], { calls: 3, errors: 0 });
        assert.deepEqual(m['tx.rollback'], { calls: 3, errors: 0 });
        assert.deepEqual(m.stats, { calls: 1, errors: 0 });
        assert.equal(m.listPartitions, undefined, 'members never called are left out');

        if (engine.dialect === 'sqlite') {
          // ensureSchema's write and the three pushes were made durable.
          assert.equal(stats.groupCommit.sum, 4);
          assert.ok(stats.groupCommit.count >= 1 && stats.groupCommit.count <= 4);
          assert.ok(stats.groupCommit.max >= 1);
          assert.ok(stats.lockWaits.count >= 1, 'the second begin waited');
          assert.ok(stats.lockWaits.totalMs > 0);
          assert.ok(stats.wal.bytes > 0);
          if (engine.name === 'sqlite-file') {
            // The checkpoint thread's figures (a memory database has none).
            assert.equal(typeof stats.wal.checkpoints, 'number');
            assert.equal(typeof stats.wal.checkpointLagFrames, 'number');
            assert.ok(stats.wal.checkpointLagFrames >= 0);
          }
          assert.equal(stats.pool, undefined);
        } else {
          assert.ok(stats.pool.size >= 1 && stats.pool.size <= 4);
          assert.ok(stats.pool.idle >= 0 && stats.pool.idle <= stats.pool.size + 4);
          assert.equal(stats.pool.waiting, 0);
          assert.ok(stats.pool.acquires >= 1);
          assert.equal(stats.wal, undefined);
          // Each push took its partition's row lock.
          assert.ok(stats.lockWaits.count >= 3, `lockWaits ${JSON.stringify(stats.lockWaits)}`);
          assert.ok(stats.lockWaits.totalMs > 0);
          assert.equal(stats.groupCommit, undefined);
        }

        const text = pkg.toPrometheus(stats, { prefix: 'app_' });
        const families = parsePrometheus(text);
        // The reference parser reads the same families and values (it names
        // a counter's family without its _total suffix).
        const ref = promReference(text);
        if (ref.skipped) t.diagnostic(ref.skipped);
        else {
          const mine = Object.entries(families).map(([name, f]) => [f.type === 'counter' ? name.replace(/_total$/, '') : name, f]);
          assert.deepEqual(Object.keys(ref.families).sort(), mine.map(([n]) => n).sort());
          for (const [name, f] of mine) {
            const theirs = ref.families[name];
            assert.equal(theirs.type, f.type, name);
            assert.deepEqual(theirs.samples.map(([, labels, value]) => [labels, value]), f.samples.map((x) => [x.labels, x.value]), name);
          }
        }
        const calls = families.app_calls_total;
        assert.equal(calls.type, 'counter');
        const sample = (fam, member) => fam.samples.find((s) => s.labels.member === member);
        assert.deepEqual(sample(calls, 'tx.upsertRow'), { labels: { engine: engine.dialect, member: 'tx.upsertRow' }, value: 4 });
        assert.equal(sample(families.app_errors_total, 'getRow').value, 1);
        assert.equal(calls.samples.length, Object.keys(m).length);
        if (engine.dialect === 'sqlite') {
          assert.equal(families.app_group_commit_transactions_total.samples[0].value, 4);
          assert.equal(families.app_wal_bytes.type, 'gauge');
        } else {
          assert.equal(families.app_pool_size.samples[0].value, stats.pool.size);
        }
        assert.match(pkg.toPrometheus(stats), /^# HELP syncular_storage_calls_total /);
        assert.throws(() => pkg.toPrometheus(stats, { prefix: 'bad prefix' }), { code: 'ERR_SYNCULAR_INVALID_ARGUMENT' });
        assert.throws(() => pkg.toPrometheus({}), { code: 'ERR_SYNCULAR_INVALID_ARGUMENT' });
      }, { schema: fixtureSchema() });
    });
  });
}

for (const engine of engines.filter((e) => e.dialect === 'postgres')) {
  test('stats() on PostgreSQL: a begin waiting for the one connection counts in pool.waiting', async () => {
    const storage = engine.create({ maxConnections: 1 });
    try {
      await storage.ensureSchema(fixtureSchema());
      const first = await storage.begin('p1');
      const second = storage.begin('p2');
      let waiting;
      for (let i = 0; i < 100 && waiting !== 1; i++) {
        await delay(10);
        waiting = (await storage.stats()).pool.waiting;
      }
      assert.equal(waiting, 1, 'the second begin waits for the connection');
      const busy = (await storage.stats()).pool;
      assert.equal(busy.size, 1);
      assert.equal(busy.idle, 0);
      await first.rollback();
      await (await second).rollback();
      const after = (await storage.stats()).pool;
      assert.equal(after.waiting, 0);
      assert.equal(after.idle, 1);
    } finally {
      await storage.close();
    }
  });
}

// ---- backup ------------------------------------------------------------------

/** `PRAGMA integrity_check` of the file at `path`, read through this package's own SQLite (storage.db), on a copy so the file is not touched. */
async function integrityCheck(path, dir) {
  const copy = join(mkdtempSync(join(dir, 'check-')), 'copy.db');
  copyFileSync(path, copy);
  const s = new NativeStorage({ url: `sqlite:${copy}` });
  try {
    return s.db.query('PRAGMA integrity_check').all();
  } finally {
    await s.close();
  }
}

const PRELOAD_COMMITS = 50;
const PRELOAD_ROWS = 1000; // per commit: 50,000 rows, so the copy takes a while

for (const engine of engines.filter((e) => e.dialect === 'sqlite')) {
  test(`backup() while 4 pushers run: intact, and after restore and epoch rotation it serves every commit acknowledged before it (${engine.name})`, { timeout: 300_000 }, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'syncular-backup-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const storage = engine.create();
    await storage.ensureSchema(fixtureSchema());
    // The host registers a partition when it authenticates a request to it.
    for (const p of ['p0', 'p1', 'bulk']) {
      await storage.touchPartition(p, Date.now(), `epoch-${p}`);
      await storage.putClientRecord(p, { clientId: `c-${p}`, actorId: 'a', cursor: 0, updatedAtMs: 1, subscriptions: [] });
    }
    const title = 'x'.repeat(200);
    for (let c = 0; c < PRELOAD_COMMITS; c++) {
      const rows = [];
      for (let r = 0; r < PRELOAD_ROWS; r++) rows.push({ table: 'tasks', row: taskRow(`b${c}-${r}`, { title }) });
      await writeCommit(storage, 'bulk', rows);
    }
    // SQLite answers these calls at once: each pusher lets timers and the backup's answer in.
    const { acked, stop } = fourPushers(storage, () => new Promise(setImmediate));
    while (acked.length < 40) await delay(5);
    const path = join(dir, 'backup.db');
    const atCall = acked.length;
    const started = performance.now();
    await storage.backup(path);
    const took = performance.now() - started;
    const atAnswer = acked.length;
    while (acked.length < atAnswer + 20) await delay(5);
    await stop();
    await storage.close();
    t.diagnostic(`backup of ${PRELOAD_COMMITS * PRELOAD_ROWS} rows: ${took.toFixed(0)} ms, ${atAnswer - atCall} commits acknowledged meanwhile`);
    assert.ok(atAnswer > atCall, `no commit was acknowledged while the backup ran (${took.toFixed(0)} ms): it held the pushers up`);

    assert.deepEqual(await integrityCheck(path, dir), [{ integrity_check: 'ok' }]);
    // A second reader when the sqlite3 shell is here (it is not needed).
    if (sqliteCliAvailable()) assert.deepEqual(query(path, 'PRAGMA integrity_check'), [{ integrity_check: 'ok' }]);
    else t.diagnostic('sqlite3 shell not found: integrity_check ran through the package only');
    await assert.rejects(
      (async () => {
        const s = engine.create();
        try {
          await s.backup(path);
        } finally {
          await s.close();
        }
      })(),
      { code: 'ERR_SYNCULAR_INVALID_ARGUMENT' },
      'backup() never overwrites a file',
    );

    // Restore: copy into place, open, rotate every partition's log epoch.
    const restoredPath = join(dir, 'restored', 'storage.db');
    mkdirSync(dirname(restoredPath));
    copyFileSync(path, restoredPath);
    const restored = new NativeStorage({ url: `sqlite:${restoredPath}` });
    try {
      await restored.ensureSchema(fixtureSchema());
      const partitions = await restored.listPartitions();
      assert.deepEqual([...partitions].sort(), ['bulk', 'p0', 'p1']);
      for (const p of partitions) {
        const old = await restored.getPartitionLogEpoch(p);
        const entry = await restored.rotatePartitionLogEpoch(p, `restored-${p}`, Date.now());
        assert.notEqual(entry.logEpoch, old);
        assert.equal(await restored.getPartitionLogEpoch(p), `restored-${p}`);
      }
      // The checks upstream's restore sequence asks for.
      for (const entry of await restored.listPartitionRegistry()) {
        assert.equal(entry.logEpoch, `restored-${entry.partition}`);
        assert.equal(entry.epochRequired, true);
        assert.deepEqual(await restored.listClientRecords(entry.partition), []);
      }
      // Every commit acknowledged before the backup started is served.
      assert.equal(await restored.getMaxCommitSeq('bulk'), PRELOAD_COMMITS);
      for (let c = 0; c < PRELOAD_COMMITS; c += 7) assert.ok(await restored.getRow('bulk', 'tasks', `b${c}-${PRELOAD_ROWS - 1}`), `preloaded commit ${c + 1}`);
      for (const { partition, seq, id } of acked.slice(0, atCall)) {
        const row = await restored.getRow(partition, 'tasks', id);
        assert.ok(row !== undefined, `row ${id} of commit ${seq} acknowledged before the backup`);
      }
      // One snapshot: each partition's log is dense, and a commit in it has its row.
      for (const p of ['p0', 'p1']) {
        const seqs = (await restored.listCommitMetadata(p, { afterSeq: 0, limit: 100000 })).map((c) => c.commitSeq).sort((a, b) => a - b);
        assert.deepEqual(seqs, seqs.map((_, i) => i + 1), `the log of ${p} is dense`);
        const inLog = new Set(seqs);
        for (const c of acked) {
          if (c.partition !== p) continue;
          if (acked.indexOf(c) < atCall) assert.ok(inLog.has(c.seq), `commit ${c.seq} of ${p}`);
          if (inLog.has(c.seq)) assert.ok(await restored.getRow(p, 'tasks', c.id), `commit ${c.seq} of ${p} has its row ${c.id}`);
        }
      }
    } finally {
      await restored.close();
    }
  });
}

/** The directory of pg_dump and pg_restore: $PGBIN, else the newest /usr/lib/postgresql/N/bin (as .ci/run finds it), else PATH; or why not. */
function pgTools() {
  const { existsSync, readdirSync } = require('node:fs');
  const { execFileSync } = require('node:child_process');
  const has = (dir) => existsSync(join(dir, 'pg_dump')) && existsSync(join(dir, 'pg_restore'));
  const looked = [];
  if (process.env.PGBIN) {
    looked.push(process.env.PGBIN);
    if (has(process.env.PGBIN)) return { bin: process.env.PGBIN };
  }
  let versions = [];
  try {
    versions = readdirSync('/usr/lib/postgresql').sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  } catch {
    // no Debian layout
  }
  for (const v of versions.reverse()) {
    const dir = join('/usr/lib/postgresql', v, 'bin');
    looked.push(dir);
    if (has(dir)) return { bin: dir };
  }
  try {
    const dump = execFileSync('sh', ['-c', 'command -v pg_dump'], { encoding: 'utf8' }).trim();
    if (dump && has(dirname(dump))) return { bin: dirname(dump) };
  } catch {
    // not on PATH
  }
  looked.push('PATH');
  return { missing: `pg_dump and pg_restore not found (looked in ${looked.join(', ')}); install the postgresql client or set PGBIN` };
}

for (const engine of engines.filter((e) => e.dialect === 'postgres')) {
  test('pg_dump while 4 pushers run, pg_restore, log-epoch rotation: every commit acknowledged before the dump started is served (postgres)', { timeout: 300_000 }, async (t) => {
    const tools = pgTools();
    if (tools.missing) {
      if (process.env.CI === 'true') assert.fail(tools.missing);
      t.diagnostic(tools.missing);
      t.skip(tools.missing);
      return;
    }
    const { execFile } = require('node:child_process');
    const run = (tool, args) =>
      new Promise((resolve, reject) => {
        execFile(join(tools.bin, tool), args, { encoding: 'utf8' }, (err, stdout, stderr) => (err ? reject(new Error(`${tool}: ${err.message}\n${stderr}`)) : resolve(stdout)));
      });
    const dir = mkdtempSync(join(tmpdir(), 'syncular-pgdump-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const shared = engine.shared();
    const storage = shared.open();
    await storage.ensureSchema(fixtureSchema());
    for (const p of ['p0', 'p1']) {
      await storage.touchPartition(p, Date.now(), `epoch-${p}`);
      await storage.putClientRecord(p, { clientId: `c-${p}`, actorId: 'a', cursor: 0, updatedAtMs: 1, subscriptions: [] });
    }
    const { acked, stop } = fourPushers(storage);
    while (acked.length < 40) await delay(5);
    const dump = join(dir, 'sync.dump');
    const atStart = acked.length;
    await run('pg_dump', ['--format=custom', `--schema=${shared.schema}`, `--file=${dump}`, shared.url]);
    const atEnd = acked.length;
    // Commits after the dump, which the restore throws away.
    while (acked.length < atEnd + 20) await delay(5);
    await stop();
    await storage.close();
    t.diagnostic(`${atEnd - atStart} commits acknowledged while pg_dump ran; ${acked.length} in all`);

    await run('pg_restore', ['--clean', '--if-exists', `--dbname=${shared.url}`, dump]);
    const restored = shared.open();
    try {
      await restored.ensureSchema(fixtureSchema());
      const partitions = (await restored.listPartitions()).sort();
      assert.deepEqual(partitions, ['p0', 'p1']);
      for (const p of partitions) {
        const entry = await restored.rotatePartitionLogEpoch(p, `restored-${p}`, Date.now());
        assert.equal(entry.logEpoch, `restored-${p}`);
      }
      for (const entry of await restored.listPartitionRegistry()) {
        assert.equal(entry.logEpoch, `restored-${entry.partition}`);
        assert.equal(entry.epochRequired, true);
        assert.deepEqual(await restored.listClientRecords(entry.partition), []);
      }
      for (const { partition, seq, id } of acked.slice(0, atStart)) {
        assert.ok(await restored.getRow(partition, 'tasks', id), `row ${id} of commit ${seq} acknowledged before the dump`);
      }
      let dropped = 0;
      for (const p of partitions) {
        const seqs = (await restored.listCommitMetadata(p, { afterSeq: 0, limit: 100000 })).map((c) => c.commitSeq).sort((a, b) => a - b);
        assert.deepEqual(seqs, seqs.map((_, i) => i + 1), `the log of ${p} is dense`);
        assert.equal(await restored.getMaxCommitSeq(p), seqs.length);
        const inLog = new Set(seqs);
        for (const [i, c] of acked.entries()) {
          if (c.partition !== p) continue;
          if (i < atStart) assert.ok(inLog.has(c.seq), `commit ${c.seq} of ${p}`);
          if (inLog.has(c.seq)) assert.ok(await restored.getRow(p, 'tasks', c.id), `commit ${c.seq} of ${p} has its row`);
          else dropped++;
        }
      }
      assert.ok(dropped >= 20, `the commits after the dump are gone (${dropped})`);
    } finally {
      await restored.close();
    }
  });

  test('backup() on PostgreSQL refuses, pointing at pg_dump', async () => {
    await withStorage(engine, async (storage) => {
      await assert.rejects(storage.backup('/tmp/never.db'), (err) => err.code === 'ERR_SYNCULAR_BACKUP_UNSUPPORTED' && /pg_dump/.test(err.message));
    });
  });
}
