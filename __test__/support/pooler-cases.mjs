// What only a pooler shows (see pooler.test.mjs): several host processes
// pushing through PgBouncer in transaction mode to one database, and a
// server session that other clients get next left as it was found.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startPgBouncer } from '../../scripts/pgbouncer.mjs';
import { freshPgSchema } from './engines.mjs';
import { NativeStorage } from './package.mjs';
import { fixtureSchema } from './schema.mjs';
import { hostPush, taskRow } from './harness.mjs';
import { hostTest, runHost } from './upstream.mjs';

const PUSHER = fileURLToPath(new URL('./pooler-pusher.mjs', import.meta.url));

function runPusher(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [PUSHER, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()));
      } catch {
        reject(new Error(`pusher exited ${code}: ${out}${err}`));
      }
    });
  });
}

async function directRows(sql, params = []) {
  const client = new pg.Client({ connectionString: process.env.SYNCULAR_TEST_PG_URL });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows;
  } finally {
    await client.end();
  }
}

export function definePoolerCases(bouncer) {
  describe('PgBouncer, transaction mode: several host processes on one database', () => {
    test('4 processes x 75 pushes over 3 partitions: every acknowledged commit stored once, sequences dense', async () => {
      const schema = freshPgSchema();
      // The schema first, so the processes race on pushes, not on setup.
      const setup = new NativeStorage({ url: bouncer.url('transaction'), pooling: 'transaction', schema });
      await setup.ensureSchema(fixtureSchema());
      await setup.close();
      const url = `${bouncer.url('transaction')}?pgbouncer=true`;
      const runs = await Promise.all(['h1', 'h2', 'h3', 'h4'].map((name) => runPusher([url, schema, name, '75', '3', '4'])));
      const errors = runs.flatMap((r) => r.errors);
      assert.deepEqual(errors, []);
      const acked = runs.flatMap((r) => r.acked);
      assert.equal(acked.length, 300);
      const stored = await directRows(
        `SELECT partition, commit_seq::int AS seq, client_id, client_commit_id FROM "${schema}".sync_commits ORDER BY partition, commit_seq`,
      );
      assert.equal(stored.length, 300, 'stored commits');
      const byKey = new Map(stored.map((r) => [r.client_commit_id, r]));
      assert.equal(byKey.size, 300, 'no commit stored twice');
      for (const a of acked) {
        const s = byKey.get(a.clientCommitId);
        assert.ok(s, `acknowledged ${a.clientCommitId} is stored`);
        assert.equal(s.partition, a.partition);
        assert.equal(s.seq, a.commitSeq, `${a.clientCommitId}: the sequence the host was told`);
      }
      for (const p of ['p0', 'p1', 'p2']) {
        const seqs = stored.filter((r) => r.partition === p).map((r) => r.seq);
        assert.deepEqual(seqs, seqs.map((_, i) => i + 1), `${p}: dense from 1`);
      }
      const results = await directRows(`SELECT count(*)::int AS n FROM "${schema}".sync_push_results`);
      assert.equal(results[0].n, 300, 'one push result per commit');
    });
  });

  describe('PgBouncer, transaction mode, with pooling left unset', () => {
    test('the storage finds the server session moving at open and refuses (ERR_SYNCULAR_POOLER, naming the setting): no named statement is ever sent there', async () => {
      const storage = new NativeStorage({ url: bouncer.url('transaction'), schema: freshPgSchema() });
      try {
        await assert.rejects(storage.ensureSchema(fixtureSchema()), (e) => {
          assert.equal(e.code, 'ERR_SYNCULAR_POOLER', String(e));
          assert.match(e.message, /pooling: 'transaction'/);
          return true;
        });
      } finally {
        await storage.close();
      }
    });
  });

  describe('PgBouncer, transaction mode: the server session is left as it was found', () => {
    test('after pushes, pulls and registered queries, one shared server session holds no prepared statement, temporary object or changed setting', async () => {
      // A pool of one server session: every client's transactions run on it.
      const one = await startPgBouncer({ poolSize: 1 });
      try {
        const url = one.url('transaction');
        const schema = freshPgSchema();
        const storage = new NativeStorage({ url, schema, pooling: 'transaction', maxConnections: 3 });
        const session = async () => {
          const c = new pg.Client({ connectionString: url });
          await c.connect();
          try {
            const q = async (text) => (await c.query(text)).rows;
            return {
              prepared: (await q('SELECT name FROM pg_prepared_statements')).map((r) => r.name),
              temp: (await q("SELECT count(*)::int AS n FROM pg_class WHERE relnamespace = pg_my_temp_schema()"))[0].n,
              tempFunctions: (await q('SELECT count(*)::int AS n FROM pg_proc WHERE pronamespace = pg_my_temp_schema()'))[0].n,
              searchPath: (await q('SHOW search_path'))[0].search_path,
              planCache: (await q('SHOW plan_cache_mode'))[0].plan_cache_mode,
            };
          } finally {
            await c.end();
          }
        };
        const before = await session();
        try {
          await storage.ensureSchema(fixtureSchema());
          for (let i = 0; i < 5; i++) {
            await hostPush(storage, 'p1', { clientId: 'c1', clientCommitId: `k${i}`, ops: [{ table: 'tasks', row: taskRow(`t${i}`) }] });
          }
          const page = await storage.readCommitsAfter?.({ partition: 'p1', afterSeq: 0, limit: 10 });
          if (page !== undefined) assert.ok(page.length >= 5);
          assert.ok(await storage.getRow('p1', 'tasks', 't1'));
          const q = await storage.queryAuthoritative('p1', { sql: 'SELECT count(*) AS n FROM tasks', params: [], tables: ['tasks'] });
          assert.ok(q);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.queryAuthoritative({ sql: 'SELECT id FROM tasks ORDER BY id', params: [], tables: ['tasks'] });
          await tx.rollback();
        } finally {
          await storage.close();
        }
        const afterwards = await session();
        assert.deepEqual(afterwards, before);
        assert.deepEqual(afterwards.prepared, []);
      } finally {
        await one.stop();
      }
    });
  });
}

/** A 0.15.x-era host through upstream's handler (host/pooler.ts), when an upstream tree is given. */
export function defineHostCase(bouncer) {
  describe('PgBouncer, transaction mode: a host through upstream\'s handler', () => {
    test('300 pushes from 10 clients at once, their pulls, a bootstrap and 16 registered queries: all served, 0 errors', hostTest, async () => {
      const out = await runHost('pooler.ts', [`${bouncer.url('transaction')}?pgbouncer=true`, freshPgSchema()], { timeoutMs: 180_000 });
      assert.deepEqual(out.errors, []);
      assert.equal(out.acked, 300);
      assert.deepEqual(out.seqs, Array.from({ length: 300 }, (_, i) => i + 1));
      assert.equal(out.maxCommitSeq, 300);
      assert.deepEqual(out.pulls, Array(10).fill('active'));
      assert.equal(out.pulledChanges, 10 * 300);
      assert.equal(out.bootstrapRows, 50);
      assert.deepEqual(out.queries, Array.from({ length: 16 }, () => 5));
    });
  });
}
