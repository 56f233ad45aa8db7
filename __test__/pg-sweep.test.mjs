// scripts/pg-sweep.mjs: the schemas a test, acceptance or bench process of
// this machine left behind are dropped once their process is gone; a live
// process's schemas and every other name are kept.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { engines } from './support/engines.mjs';
import { ownerPid, sweepSchemas } from '../scripts/pg-sweep.mjs';

test('ownerPid reads the pid after the prefix and nothing else', () => {
  assert.equal(ownerPid('syncular_t_123_abc_1', 'syncular_t_'), 123);
  assert.equal(ownerPid('syncular_up_9_x', 'syncular_up_'), 9);
  assert.equal(ownerPid('syncular_bench_intree_77_a', 'syncular_bench_'), undefined);
  assert.equal(ownerPid('syncular_bench_intree_77_a', 'syncular_bench_intree_'), 77);
  assert.equal(ownerPid('syncular_t_123', 'syncular_t_'), undefined);
  assert.equal(ownerPid('syncular_t_0_a', 'syncular_t_'), undefined);
  assert.equal(ownerPid('app_123_a', 'syncular_t_'), undefined);
  assert.equal(ownerPid('syncular_t_99999999999999999999_a', 'syncular_t_'), undefined);
});

const pg = engines.find((e) => e.dialect === 'postgres');

if (pg) {
  describe('postgres: sweeping stale schemas', () => {
    test('a gone process\'s schemas are dropped; a live one\'s, the caller\'s kept and foreign names stay', async () => {
      const url = pg.requireUrl();
      // A pid that has just ended (its number is not reused this soon).
      const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
      assert.match(gone, /^\d+$/);
      const tag = Date.now().toString(36);
      const names = {
        dead: `syncular_t_${gone}_${tag}_1`,
        deadBench: `syncular_bench_intree_pg_${gone}_${tag}_1`,
        live: `syncular_t_${process.pid}_${tag}_2`,
        own: `syncular_up_${process.pid}_${tag}_3`,
        foreign: `syncular_keep_${gone}_${tag}`,
      };
      const { default: Pg } = await import('pg');
      const client = new Pg.Client({ connectionString: url });
      await client.connect();
      const exists = async (n) =>
        (await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [n])).rowCount === 1;
      try {
        for (const n of Object.values(names)) {
          await client.query(`CREATE SCHEMA "${n}"`);
          await client.query(`CREATE TABLE "${n}".t (x int)`);
        }
        const dropped = await sweepSchemas(url, [names.own]);
        for (const n of [names.dead, names.deadBench, names.own]) {
          assert.ok(dropped.includes(n), `${n} dropped`);
          assert.equal(await exists(n), false, `${n} is gone`);
        }
        for (const n of [names.live, names.foreign]) {
          assert.ok(!dropped.includes(n), `${n} kept`);
          assert.equal(await exists(n), true, `${n} is still there`);
        }
      } finally {
        for (const n of Object.values(names)) await client.query(`DROP SCHEMA IF EXISTS "${n}" CASCADE`);
        await client.end();
      }
    });

    test('an unreachable server is not an error', async () => {
      assert.deepEqual(await sweepSchemas('postgres://nobody@127.0.0.1:1/none', ['syncular_t_1_x']), []);
    });
  });
}
