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
          assert.equal(stats.pool, undefined);
        } else {
          assert.ok(stats.pool.size >= 1 && stats.pool.size <= 4);
          assert.ok(stats.pool.idle >= 0 && stats.pool.idle <= stats.pool.size + 4);
          assert.equal(stats.pool.waiting, 0);
          assert.ok(stats.pool.acquires >= 1);
          assert.equal(stats.wal, undefined);
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

// ---- backup ------------------------------------------------------------------

const delay = (ms) => new Promise((r) => setTimeout(r, ms));

for (const engine of engines.filter((e) => e.dialect === 'sqlite')) {
  test(`backup() while 4 pushers run: intact, and after restore and epoch rotation it serves every commit acknowledged before it (${engine.name})`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'syncular-backup-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const storage = engine.create();
    await storage.ensureSchema(fixtureSchema());
    // The host registers a partition when it authenticates a request to it.
    for (const p of ['p0', 'p1']) {
      await storage.touchPartition(p, Date.now(), `epoch-${p}`);
      await storage.putClientRecord(p, { clientId: `c-${p}`, actorId: 'a', cursor: 0, updatedAtMs: 1, subscriptions: [] });
    }
    const acked = []; // { partition, seq, id } in acknowledgement order
    let stop = false;
    const pusher = async (n) => {
      const partition = `p${n % 2}`;
      for (let i = 0; !stop; i++) {
        const id = `w${n}-${i}`;
        const seq = await writeCommit(storage, partition, [{ table: 'tasks', row: taskRow(id) }]);
        acked.push({ partition, seq, id });
        // SQLite answers these calls at once: let timers and the backup in.
        await new Promise(setImmediate);
      }
    };
    const pushers = [0, 1, 2, 3].map(pusher);
    while (acked.length < 40) await delay(5);
    const before = acked.length;
    const path = join(dir, 'backup.db');
    const during = acked.length;
    await storage.backup(path);
    const after = acked.length;
    while (acked.length < after + 20) await delay(5);
    stop = true;
    await Promise.all(pushers);
    await storage.close();
    assert.ok(after > during || acked.length > before, 'pushes went on around the backup');

    if (sqliteCliAvailable()) assert.deepEqual(query(path, 'PRAGMA integrity_check'), [{ integrity_check: 'ok' }]);
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
      assert.deepEqual([...partitions].sort(), ['p0', 'p1']);
      const epochs = {};
      for (const p of partitions) {
        const old = await restored.getPartitionLogEpoch(p);
        const entry = await restored.rotatePartitionLogEpoch(p, `restored-${p}`, Date.now());
        assert.notEqual(entry.logEpoch, old);
        epochs[p] = await restored.getPartitionLogEpoch(p);
        assert.equal(epochs[p], `restored-${p}`);
      }
      // The checks upstream's restore sequence asks for.
      for (const entry of await restored.listPartitionRegistry()) {
        assert.equal(entry.logEpoch, `restored-${entry.partition}`);
        assert.equal(entry.epochRequired, true);
        assert.deepEqual(await restored.listClientRecords(entry.partition), []);
      }
      for (const { partition, seq, id } of acked.slice(0, before)) {
        const row = await restored.getRow(partition, 'tasks', id);
        assert.ok(row !== undefined, `row ${id} of commit ${seq} acknowledged before the backup`);
      }
      for (const p of partitions) {
        const seqs = new Set((await restored.listCommitMetadata(p, { afterSeq: 0, limit: 100000 })).map((c) => c.commitSeq));
        for (const c of acked.slice(0, before)) if (c.partition === p) assert.ok(seqs.has(c.seq), `commit ${c.seq} of ${p}`);
      }
    } finally {
      await restored.close();
    }
  });
}

for (const engine of engines.filter((e) => e.dialect === 'postgres')) {
  test('backup() on PostgreSQL refuses, pointing at pg_dump', async () => {
    await withStorage(engine, async (storage) => {
      await assert.rejects(storage.backup('/tmp/never.db'), (err) => err.code === 'ERR_SYNCULAR_BACKUP_UNSUPPORTED' && /pg_dump/.test(err.message));
    });
  });
}
