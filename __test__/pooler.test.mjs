// PostgreSQL behind a real connection pooler (issue 46): PgBouncer from
// Debian's packages, started here on 127.0.0.1 in front of the test cluster
// with its default settings, in transaction and in session mode. The whole
// contract suite runs through it in both modes; the cases below add what
// only a pooler shows. Under CI=true a missing pgbouncer fails every case.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { startPgBouncer } from '../scripts/pgbouncer.mjs';

const pgUrl = process.env.SYNCULAR_TEST_PG_URL;
const required = process.env.CI === 'true';

let bouncer;
let problem;
if (pgUrl) {
  try {
    bouncer = await startPgBouncer();
    process.env.SYNCULAR_TEST_PGBOUNCER = JSON.stringify({ transaction: bouncer.url('transaction'), session: bouncer.url('session') });
    after(() => bouncer.stop());
  } catch (e) {
    problem = e.message;
  }
} else if (required) {
  problem = 'SYNCULAR_TEST_PG_URL is not set (required when CI=true)';
}

// Imported after the pooler's urls are named (engines.mjs reads them).
const { engines } = await import('./support/engines.mjs');
const { modules } = await import('./contract/all.mjs');
const { definePoolerCases, defineHostCase } = await import('./support/pooler-cases.mjs');

if (problem !== undefined) {
  test('PgBouncer in front of PostgreSQL', () => {
    throw new Error(`PgBouncer unavailable: ${problem}`);
  });
} else if (bouncer) {
  for (const engine of engines.filter((e) => e.pooler)) {
    describe(engine.name, () => {
      for (const mod of modules) mod.define(engine);
    });
  }
  definePoolerCases(bouncer);
  defineHostCase(bouncer);
} else {
  test('PgBouncer in front of PostgreSQL', { skip: 'SYNCULAR_TEST_PG_URL is not set' }, () => {});
}
