// PostgreSQL-only cases: clean process exit after using the engine, two
// storages (two pools, standing in for two host processes) pushing into one
// partition, and a full pool of pushing transactions. They run whenever the
// contract suite's postgres engine does (SYNCULAR_TEST_PG_URL; required
// under CI=true, see support/engines.mjs).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { engines, freshPgSchema } from './support/engines.mjs';
import { NativeStorage } from './support/package.mjs';
import { hostPush, taskRow, within } from './support/harness.mjs';
import { fixtureSchema } from './support/schema.mjs';
import { Psql } from '../stress/lib/sql.mjs';

const pg = engines.find((e) => e.dialect === 'postgres');
const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Runs `body` (an async function's text) in a fresh node process. */
function runChild(body, args = []) {
  const program = `
    const { NativeStorage } = require(${JSON.stringify(join(root, 'index.js'))});
    const url = process.env.SYNCULAR_TEST_PG_URL;
    const schema = process.argv[1];
    (async () => { ${body} })().then(
      () => console.log('child done'),
      (e) => { console.error(e); process.exit(3); },
    );`;
  return spawnSync(process.execPath, [...args, '-e', program, freshPgSchema()], {
    encoding: 'utf8',
    timeout: 60_000,
    env: process.env,
  });
}

function assertCleanExit(r) {
  assert.equal(r.signal, null, `killed by ${r.signal}: ${r.stderr}`);
  assert.equal(r.status, 0, `exit ${r.status}: ${r.stderr}`);
  assert.match(r.stdout, /child done/);
  assert.doesNotMatch(r.stderr, /panicked|fatal runtime error/);
}

if (pg) {
  describe('postgres: process exit', () => {
    test('a process that closed its storage exits 0', () => {
      assertCleanExit(
        runChild(`
          const s = new NativeStorage({ url, schema });
          await s.getMaxCommitSeq('p');
          await s.close();`),
      );
    });

    test('a process that never closed its storage and left a transaction open exits 0', () => {
      assertCleanExit(
        runChild(`
          const s = new NativeStorage({ url, schema });
          const tx = await s.begin('p');
          await tx.lockPartitionForPush();
          globalThis.keep = [s, tx];`),
      );
    });

    test('storages and transactions collected by GC release their locks; the process exits 0', () => {
      assertCleanExit(
        runChild(
          `
          for (let i = 0; i < 3; i++) {
            let s = new NativeStorage({ url, schema, maxConnections: 2 });
            let tx = await s.begin('p');
            await tx.lockPartitionForPush();
            s = undefined; tx = undefined;
            for (let k = 0; k < 3; k++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 30)); }
          }
          // the partition row locks of the collected transactions are gone
          const s2 = new NativeStorage({ url, schema });
          const tx = await s2.begin('p');
          const t = setTimeout(() => { console.error('partition lock still held'); process.exit(4); }, 10000);
          await tx.lockPartitionForPush();
          clearTimeout(t);
          await tx.rollback();`,
          ['--expose-gc'],
        ),
      );
    });
  });

  describe('postgres: several pools on one database', () => {
    test('two storages pushing concurrently to one partition: each push applied once, commitSeq dense 1..N', async () => {
      const shared = pg.shared();
      const a = shared.open({ maxConnections: 3 });
      const b = shared.open({ maxConnections: 3 });
      try {
        await Promise.all([a.ensureSchema(fixtureSchema()), b.ensureSchema(fixtureSchema())]);
        const N = 40;
        const pushes = [];
        for (let i = 0; i < N; i++) {
          const push = {
            clientId: `client-${i % 5}`,
            clientCommitId: `commit-${i}`,
            ops: [{ table: 'tasks', row: taskRow(`t${i}`, { count: i }) }],
          };
          // every push is sent to both storages, as a retry landing on the
          // other process would be
          pushes.push(hostPush(a, 'p1', push), hostPush(b, 'p1', push));
        }
        const results = await within(Promise.all(pushes), 60_000, 'pushes');
        const applied = results.filter((r) => r.applied);
        assert.equal(applied.length, N, 'each push applied exactly once');
        const seqs = applied.map((r) => r.commitSeq).sort((x, y) => x - y);
        assert.deepEqual(seqs, Array.from({ length: N }, (_, i) => i + 1));
        for (let i = 0; i < N; i++) {
          const [x, y] = [results[2 * i], results[2 * i + 1]];
          assert.equal(x.result.commitSeq, y.result.commitSeq, 'both callers see the one result');
        }
        assert.equal(await a.getMaxCommitSeq('p1'), N);
        assert.equal(await b.getMaxCommitSeq('p1'), N);
        const metadata = await a.listCommitMetadata('p1', { afterSeq: 0, limit: 1000 });
        assert.deepEqual(
          metadata.map((m) => m.commitSeq).sort((x, y) => x - y),
          seqs,
        );
        for (let i = 0; i < N; i++) assert.ok(await b.getRow('p1', 'tasks', `t${i}`));
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });

    test('more concurrent pushers than pool connections still make progress', async () => {
      const storage = new NativeStorage({ url: pg.url, schema: freshPgSchema(), maxConnections: 2 });
      try {
        await storage.ensureSchema(fixtureSchema());
        const N = 24;
        const results = await within(
          Promise.all(
            Array.from({ length: N }, (_, i) =>
              hostPush(storage, i % 3 === 0 ? 'p2' : 'p1', {
                clientId: 'c',
                clientCommitId: `k${i}`,
                ops: [{ table: 'tasks', row: taskRow(`t${i}`) }],
              }),
            ),
          ),
          60_000,
          'pushes on a full pool',
        );
        assert.ok(results.every((r) => r.applied));
        assert.equal((await storage.getMaxCommitSeq('p1')) + (await storage.getMaxCommitSeq('p2')), N);
      } finally {
        await storage.close();
      }
    });
  });

  /** A fresh schema with the fixture's layout, made by this package. */
  async function ensuredSchema() {
    const schema = freshPgSchema();
    const storage = new NativeStorage({ url: pg.url, schema });
    await storage.ensureSchema(fixtureSchema());
    await storage.close();
    return schema;
  }

  describe('postgres: the index added to an in-tree sync_row_scopes', () => {
    // Issue 48: on a database the in-tree storage wrote, the first open adds
    // sync_row_scopes_by_row. Built inside the meta transaction it held every
    // writer of the table (the in-tree hosts' too) for the whole build; now
    // it is built concurrently, and an interrupted build is redone.
    const valid = async (psql) =>
      (await psql.query("SELECT indisvalid AS v, indisunique AS u FROM pg_index WHERE indexrelid = to_regclass('sync_row_scopes_by_row')"));

    test('writers of sync_row_scopes go on while ours builds it', async () => {
      const schema = await ensuredSchema();
      const holder = new Psql(pg.url, { schema });
      const writer = new Psql(pg.url, { schema });
      const b = new NativeStorage({ url: pg.url, schema });
      try {
        // As the in-tree storage left it, with a writer's transaction open:
        // the build waits for that transaction, as any index build must.
        await holder.exec('DROP INDEX sync_row_scopes_by_row');
        await holder.exec('BEGIN');
        await holder.exec("INSERT INTO sync_row_scopes VALUES ('p1', 'tasks', 'v', 'x', 'r1')");
        const opening = b.ping();
        await new Promise((r) => setTimeout(r, 400));
        // Another writer is not queued behind the build (inside a
        // transaction, its SHARE lock request held this insert until the
        // lock timeout).
        await writer.exec("SET lock_timeout = '1s'");
        await writer.exec("INSERT INTO sync_row_scopes VALUES ('p1', 'tasks', 'v', 'y', 'r2')");
        await holder.exec('COMMIT');
        await within(opening, 10_000, 'open');
        assert.deepEqual(await valid(writer), [{ v: true, u: false }]);
      } finally {
        await b.close();
        await holder.close();
        await writer.close();
      }
    });

    test('a build interrupted earlier (an invalid index) is done again at the next open', async () => {
      const schema = await ensuredSchema();
      const psql = new Psql(pg.url, { schema });
      const b = new NativeStorage({ url: pg.url, schema });
      try {
        // A concurrent build that failed leaves its index invalid.
        await psql.exec('DROP INDEX sync_row_scopes_by_row');
        await psql.exec("INSERT INTO sync_row_scopes VALUES ('p1', 'tasks', 'v1', 'a', 'r1'), ('p1', 'tasks', 'v2', 'b', 'r1')");
        await assert.rejects(psql.exec('CREATE UNIQUE INDEX CONCURRENTLY sync_row_scopes_by_row ON sync_row_scopes(partition, tbl, row_id)'));
        assert.deepEqual(await valid(psql), [{ v: false, u: true }]);
        await b.ping();
        assert.deepEqual(await valid(psql), [{ v: true, u: false }]);
      } finally {
        await b.close();
        await psql.close();
      }
    });
  });

  describe('postgres: first use beside an in-tree host starting at the same instant', () => {
    // Issue 48: a 0.15.48 host creating the same tables on an empty
    // database at the same instant made ours fail at startup (23505 on
    // pg_type_typname_nsp_index; the in-tree storages take no lock). Ours
    // retries and starts.
    for (const table of ['sync_commits', 'tasks']) {
      test(`another session creating ${table} while ours does: ours retries and starts`, async () => {
        const ref = await ensuredSchema();
        const target = freshPgSchema();
        const psql = new Psql(pg.url);
        const b = new NativeStorage({ url: pg.url, schema: target, maxConnections: 2 });
        try {
          await psql.exec(`CREATE SCHEMA "${target}"`);
          if (table === 'tasks') {
            // The meta tables exist; the race is on the app table.
            const c = new NativeStorage({ url: pg.url, schema: target });
            await c.ping();
            await c.close();
          }
          await psql.exec('BEGIN');
          await psql.exec(`CREATE TABLE "${target}"."${table}" (LIKE "${ref}"."${table}" INCLUDING ALL)`);
          const started = b.ensureSchema(fixtureSchema());
          // Ours reaches the same CREATE and waits for the other session.
          await new Promise((r) => setTimeout(r, 400));
          await psql.exec('COMMIT');
          await within(started, 10_000, 'ensureSchema');
          await hostPush(b, 'p1', { clientId: 'c1', clientCommitId: 'k1', ops: [{ table: 'tasks', row: taskRow('t1') }] });
          assert.equal(await b.getMaxCommitSeq('p1'), 1);
        } finally {
          await b.close();
          await psql.close();
        }
      });
    }
  });

  describe('postgres: connections that died while idle', () => {
    // The pool hands out connections without a ping first; a connection the
    // server ended meanwhile (a restart, pg_terminate_backend, an idle
    // timeout) must cost neither a failed read nor a failed push.
    test('reads, writes and pushes after the server ended every idle connection still succeed', async () => {
      const storage = new NativeStorage({ url: pg.url, schema: freshPgSchema(), maxConnections: 3 });
      const psql = new Psql(pg.url);
      const endAll = async () => {
        const name = `syncular-${process.pid}-%`;
        await psql.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE '${name}' AND pid <> pg_backend_pid()`,
        );
        for (let i = 0; i < 100; i++) {
          const [{ n }] = await psql.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE '${name}'`,
          );
          if (n === 0) return;
          await new Promise((r) => setTimeout(r, 20));
        }
        assert.fail('backends still running');
      };
      try {
        await storage.ensureSchema(fixtureSchema());
        // three connections open and idle
        await Promise.all(
          [0, 1, 2].map((i) =>
            hostPush(storage, `p${i}`, { clientId: 'c', clientCommitId: `warm-${i}`, ops: [{ table: 'tasks', row: taskRow(`w${i}`) }] }),
          ),
        );
        await endAll();
        assert.equal(await storage.getMaxCommitSeq('p0'), 1);
        await endAll();
        const r = await hostPush(storage, 'p0', { clientId: 'c', clientCommitId: 'after-1', ops: [{ table: 'tasks', row: taskRow('a1') }] });
        assert.ok(r.applied);
        assert.equal(r.commitSeq, 2);
        await endAll();
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        await tx.rollback();
        await endAll();
        const q = await storage.queryAuthoritative('p0', { sql: 'SELECT id FROM tasks ORDER BY id', params: [], tables: ['tasks'] });
        assert.deepEqual(q.rows.map((r) => r.id), ['a1', 'w0']);
        await endAll();
        await storage.setHorizonSeq('p2', 0);
        assert.ok(await storage.getRow('p0', 'tasks', 'a1'));
      } finally {
        await storage.close();
        psql.close();
      }
    });

    test('a connection lost inside a transaction fails that call with code PG_CONNECTION or a SQLSTATE, and the storage goes on', async () => {
      const storage = new NativeStorage({ url: pg.url, schema: freshPgSchema(), maxConnections: 2 });
      const psql = new Psql(pg.url);
      try {
        await storage.ensureSchema(fixtureSchema());
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        await psql.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'syncular-${process.pid}-%' AND pid <> pg_backend_pid()`,
        );
        await new Promise((r) => setTimeout(r, 100));
        const err = await tx.getPushResult('c', 'k').then(
          () => assert.fail('a read on an ended connection answered'),
          (e) => e,
        );
        assert.match(String(err.code), /^(PG_CONNECTION|57P01)$/, `code ${err.code}: ${err.message}`);
        await tx.rollback();
        const r = await hostPush(storage, 'p1', { clientId: 'c', clientCommitId: 'k2', ops: [{ table: 'tasks', row: taskRow('t2') }] });
        assert.ok(r.applied);
      } finally {
        await storage.close();
        psql.close();
      }
    });
  });

  describe('postgres: a young table\'s scope index', () => {
    // The row-scope entries of one row are found through
    // sync_row_scopes_by_row. On a young, unanalyzed table the planner
    // once took the primary key (partition, tbl, var, value, row_id) for
    // that lookup and kept it in the statement's generic plan, reading
    // every entry of the partition's table for each row written. The
    // server's statistics count the index pages each index touched (the
    // entries it returned would not show it: the primary key skipped the
    // other rows' entries inside the scan).
    test('writing and deleting rows reads only their own entries, and the entries follow the rows', async () => {
      const schema = freshPgSchema();
      const storage = new NativeStorage({ url: pg.url, schema, maxConnections: 1 });
      const psql = new Psql(pg.url);
      const rows = 2000;
      try {
        await storage.ensureSchema(fixtureSchema());
        const tx = await storage.begin('p1');
        await tx.lockPartitionForPush();
        for (let i = 0; i < rows; i++) await tx.upsertRow('tasks', taskRow(`r${i}`, { project: 'pa' }), { opIndex: i });
        for (let i = 0; i < 10; i++) await tx.upsertRow('tasks', taskRow(`r${i}`, { project: 'pb' }, { version: 2 }), { opIndex: i });
        for (let i = 10; i < 20; i++) await tx.deleteRow('tasks', `r${i}`);
        await tx.commit();
      } finally {
        // The backend's statistics reach the server when it ends.
        await storage.close();
      }
      try {
        const entries = await psql.query(
          `SELECT var, value, count(*)::int AS n FROM ${JSON.stringify(schema)}.sync_row_scopes WHERE partition = 'p1' AND tbl = 'tasks' GROUP BY 1, 2 ORDER BY 1, 2`,
        );
        const projects = Object.fromEntries(entries.filter((e) => e.var === 'project_id').map((e) => [e.value, e.n]));
        assert.deepEqual(projects, { pa: rows - 20, pb: 10 }, 'moved rows left their old entries, deleted rows all of theirs');
        let read;
        for (let i = 0; i < 100; i++) {
          read = Object.fromEntries(
            (
              await psql.query(
                `SELECT indexrelname AS i, (idx_blks_hit + idx_blks_read)::int AS n FROM pg_statio_user_indexes WHERE schemaname = '${schema}' AND relname = 'sync_row_scopes'`,
              )
            ).map((r) => [r.i, r.n]),
          );
          if (read.sync_row_scopes_by_row > 0) break;
          await new Promise((r) => setTimeout(r, 50));
        }
        assert.ok(read.sync_row_scopes_by_row > 0, `statistics: ${JSON.stringify(read)}`);
        // Each write touches a few pages of each index: its own row's
        // entries, and the conflict check and insert of its new ones (about
        // 8 a write on the primary key, 6 on the row index, for 2,000
        // rows). The primary-key plan read every leaf page of the
        // partition's entries for each write: 58,235 for these writes.
        const bound = 12 * (rows + 20);
        assert.ok(read.sync_row_scopes_pkey < bound, `the primary key's pages were touched ${read.sync_row_scopes_pkey} times (bound ${bound})`);
        assert.ok(read.sync_row_scopes_by_row < bound, `the row index's pages were touched ${read.sync_row_scopes_by_row} times (bound ${bound})`);
      } finally {
        psql.close();
      }
    });
  });
}
