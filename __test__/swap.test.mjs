// The swap on real data (README "Swapping in and back"; docs/testing.md):
// a database written by the in-tree storage through upstream's real handler
// opens in this package at the same schema version, its pulls are
// byte-identical to the in-tree storage's, and after this package has
// written to it the in-tree storage serves it again, identically. Each
// engine the host runs: a SQLite file, PostgreSQL through Bun.SQL (the
// executor upstream's README shows) and through node-postgres. Needs an
// upstream tree (support/upstream.mjs).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { query } from './support/sqlite-cli.mjs';
import { hostTest, runHost } from './support/upstream.mjs';
import { freshPgSchema } from './support/engines.mjs';

const dir = mkdtempSync(join(tmpdir(), 'syncular-swap-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const pgUrl = process.env.SYNCULAR_TEST_PG_URL;
const pgRequired = process.env.CI === 'true';
let n = 0;

function assertSwapped(result) {
  assert.equal(result.steps.length, 2, JSON.stringify(result));
  for (const s of result.steps) {
    assert.ok(s.requests >= 20, `${s.step}: ${s.requests} pull answers compared`);
    assert.equal(s.identical, true, `${s.step}: answer ${s.firstDiff} differs`);
  }
  // The log continued across both swaps: 40 + 6 in-tree, 25 + 4 ours, 5 in-tree again.
  assert.deepEqual(result.commits, { inTree: 46, ours: 75, final: 80 });
}

describe('swap in and back on data the in-tree storage wrote, through upstream\'s handler', () => {
  test('SQLite file', hostTest, async () => {
    const path = join(dir, `swap-${++n}.db`);
    assertSwapped(await runHost('swap.ts', ['sqlite', path]));
    assert.deepEqual(query(path, 'PRAGMA integrity_check'), [{ integrity_check: 'ok' }]);
  });

  for (const kind of ['postgres-bunsql', 'postgres-pg']) {
    const skip = hostTest.skip ?? (!pgUrl && !pgRequired ? 'SYNCULAR_TEST_PG_URL is not set' : undefined);
    test(`PostgreSQL (${kind === 'postgres-pg' ? 'node-postgres' : 'Bun.SQL'})`, { skip }, async () => {
      assert.ok(pgUrl, 'SYNCULAR_TEST_PG_URL is required under CI=true');
      // Dropped when the file's tests end (engines.mjs).
      const schema = freshPgSchema();
      assertSwapped(await runHost('swap.ts', [kind, schema], { env: { SYNCULAR_TEST_PG_URL: pgUrl } }));
    });
  }
});
